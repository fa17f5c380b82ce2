"""Relations: dbt-spark's, plus a catalog part (`iceberg.schema.table`) for configured catalogs."""

from __future__ import annotations

from dataclasses import dataclass, field

from dbt.adapters.base.relation import BaseRelation, Policy
from dbt.adapters.contracts.relation import RelationType
from dbt.adapters.spark.relation import SparkQuotePolicy, SparkRelation

from dbt.adapters.spark_contracts.core.materialization.snapshot import (
    reads_source_view,
    staging_query,
)


@dataclass
class SparkContractsIncludePolicy(Policy):
    # `database` is the catalog. It is None for spark_catalog relations (dbt-spark's
    # generate_database_name returns None), so they render `schema.table` as before.
    database: bool = True
    schema: bool = True
    identifier: bool = True


@dataclass(frozen=True, eq=False, repr=False)
class SparkContractsRelation(SparkRelation):
    quote_policy: Policy = field(default_factory=lambda: SparkQuotePolicy())
    include_policy: Policy = field(default_factory=lambda: SparkContractsIncludePolicy())

    def __post_init__(self) -> None:
        # dbt-spark refuses database != schema; here `database` names a catalog.
        pass

    def render(self) -> str:
        if self.database is not None and self.database == self.schema:
            return self.include(database=False).render()
        return super(SparkRelation, self).render()


def model_view(relation: BaseRelation, snapshot: bool = False) -> BaseRelation:
    """The temporary view a run reads the model's query from. A snapshot's has a name of its
    own: its staging view (`SnapshotStaging`) has the model's, which the plan's view reads."""
    suffix = "__dbt_snapshot_source" if snapshot else "__dbt_tmp"
    view = relation.incorporate(path={"identifier": relation.identifier + suffix})
    return view.include(database=False, schema=False)


def source_view(snapshot: BaseRelation) -> BaseRelation:
    """The temporary view of a snapshot's query, where its staging SELECT reads it through one
    (core/materialization/snapshot.SourceStage)."""
    view = snapshot.incorporate(path={"identifier": snapshot.identifier + "__dbt_snapshot_query"})
    return view.include(database=False, schema=False)


@dataclass(frozen=True)
class SnapshotStaging:
    """A snapshot's staging view: dbt's staging SELECT as a temporary view of the thread's
    session (macros/materializations/snapshot.sql), named as dbt-spark names its persistent one
    (`<snapshot>__dbt_tmp`: the model's view, `model_view`), and the snapshot's query as that
    SELECT reads it (core/materialization/snapshot.staging_query); `source`: the temporary
    view of the query it reads through, made first (None: it reads the query itself)."""

    relation: BaseRelation
    query: str
    source: BaseRelation | None = None

    @classmethod
    def of(cls, snapshot: BaseRelation, sql: str, file_format: str) -> SnapshotStaging:
        view = model_view(snapshot).incorporate(type=RelationType.View)
        source = source_view(snapshot) if reads_source_view(file_format) else None
        return cls(view, staging_query(sql, file_format, str(source)), source)
