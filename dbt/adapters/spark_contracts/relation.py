"""Relations: dbt-spark's, plus a catalog part (`iceberg.schema.table`) for configured catalogs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dbt.adapters.base.relation import Policy
from dbt.adapters.spark.relation import SparkQuotePolicy, SparkRelation
from dbt_common.exceptions import CompilationError

from dbt.adapters.spark_contracts.core.config import ConfigError
from dbt.adapters.spark_contracts.core.python_model import check_python_model


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

    @classmethod
    def create_from(cls, quoting: Any, relation_config: Any, **kwargs: Any) -> Any:
        """dbt's parser calls this per node with the project (and its credentials): a Python
        model on a method that cannot run it fails here, when the project is parsed.

        Checked once the node has its relation name, i.e. its final configuration: dbt also
        calls this while it builds a model's parse context, before `dbt.config(enabled=False)`
        or a schema file's config applies; the manifest check after parsing (enabled nodes
        only) and every later call see the final one."""
        if getattr(relation_config, "relation_name", None) is not None:
            _check_python_model(quoting, relation_config)
        return super().create_from(quoting, relation_config, **kwargs)

    def render(self) -> str:
        if self.database is not None and self.database == self.schema:
            return self.include(database=False).render()
        return super(SparkRelation, self).render()


def _check_python_model(quoting: Any, relation_config: Any) -> None:
    """A Python model on a method that cannot run it: dbt's CompilationError, naming both."""
    try:
        check_python_model(
            str(getattr(relation_config, "unique_id", relation_config.identifier)),
            getattr(relation_config, "language", None),
            getattr(getattr(quoting, "credentials", None), "method", None),
            getattr(getattr(relation_config, "config", None), "enabled", True),
        )
    except ConfigError as exc:
        raise CompilationError(str(exc)) from exc
