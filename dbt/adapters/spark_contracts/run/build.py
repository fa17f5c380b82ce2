"""What Jinja is handed for one table, incremental or snapshot build (`PlannedBuild`), and the build's
table statement carried out: created in one statement, replaced in one atomic statement, built
beside the relation and swapped in (run/swap.py), or created after the relation is dropped.

The adapter's `execute_plan` is the one call that carries a `PlannedBuild` out: a planned run
goes to the Runner (run/runner.py), a build that only creates or replaces the table comes
here. Jinja renders the table statement with dbt-spark's DDL macros (`create_sql`, for the
relation `builds_at` names) and decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from dbt.adapters.spark_contracts.connection.errors import config_errors_as_compilation_errors
from dbt.adapters.spark_contracts.core.contracts.constraints import TableConstraints
from dbt.adapters.spark_contracts.core.evolution.render import REWRITE_SUFFIX, suffixed
from dbt.adapters.spark_contracts.core.materialization.build_plan import (
    created_by_rename,
    created_name,
)
from dbt.adapters.spark_contracts.core.materialization.flags import Is
from dbt.adapters.spark_contracts.core.materialization.load import SnapshotMerge
from dbt.adapters.spark_contracts.core.materialization.microbatch import (
    MICROBATCH,
    Microbatch,
    plan_microbatch,
)
from dbt.adapters.spark_contracts.core.materialization.run_plan import Build, BuildPlan
from dbt.adapters.spark_contracts.run.model_run import ModelRun


@dataclass(frozen=True)
class PlannedBuild:
    """One build as planned (the adapter's `plan_model`): the build (create, replace, build
    beside and swap, drop then create, or evolve), the run planned when it evolves (or when a
    creating build counts what it discards), the SELECT its table statement creates the table
    from (None: the run's load writes and no table statement is needed), and the constraints an
    enforced contract creates with the table."""

    build: BuildPlan
    run: Optional[ModelRun] = None
    create_select: Optional[str] = None
    constraints: Optional[TableConstraints] = None
    unique_id: str = ""
    invocation_id: str = ""

    @property
    def replace_by(self) -> Build:
        """How the table statement replaces the relation: the run's own (a rebuild or full
        refresh planned against the deployed table) or the build's."""
        return self.run.replace_by if self.run is not None else self.build.action

    swaps = Is("replace_by", Build.SWAP)
    drop_first = Is("replace_by", Build.DROP_AND_CREATE)

    @property
    def explicit_build(self) -> bool:
        """The table is created with declared columns (Iceberg's NOT NULL build,
        constraints.build_not_null), not by a CTAS: a build that creates or replaces it, a
        full refresh, or a run that creates the table (its load; a table model's rebuild of an
        existing table or a swap has no such build: its CTAS refuses NOT NULL)."""
        if self.constraints is None or not self.constraints.explicit_schema or self.swaps:
            return False
        return self.run is None or self.run.full_refresh or self.run.creates

    @property
    def merge_columns(self) -> tuple:
        """The quoted staging columns a snapshot's merge inserts (core/materialization/load.py
        `SnapshotMerge`); () where the run loads nothing (blocked, a dry run): no merge runs."""
        load = self.run.load if self.run is not None else None
        return load.insert if isinstance(load, SnapshotMerge) else ()

    def lands_at(self, relation: Any) -> Any:
        """The relation the table statement leaves the table at: `relation`, or the table
        beside it that a swap puts in its place (a rebuild's load swaps in after the load,
        run/swap.py)."""
        if not self.swaps:
            return relation
        identifier = suffixed(relation.identifier, REWRITE_SUFFIX)
        return relation.incorporate(path={"identifier": identifier}, type="table")

    def builds_at(self, relation: Any) -> Any:
        """The relation the table statement's CTAS creates: where it `lands_at`, or first
        under its run's own name where the format's killed CTAS would block that name
        (`BuildPlan.creates_by_rename`; `table_statement` renames it)."""
        at = self.lands_at(relation)
        if not self.build.creates_by_rename:
            return at
        identifier = created_name(at.identifier, self.invocation_id)
        return at.incorporate(path={"identifier": identifier}, type="table")

    def table_statement(self, create_sql: Optional[str], relation: Any) -> Optional[str]:
        """The table statement Jinja rendered for `relation`, as sent: a CTAS at a run's own
        name (`builds_at`) with its rename to where it `lands_at`, in one script."""
        if create_sql is None or self.create_select is None or self.explicit_build:
            return create_sql  # no CTAS of `builds_at` (Iceberg's NOT NULL build, a snapshot)
        if not self.build.creates_by_rename:
            return create_sql
        created, final = self.builds_at(relation), self.lands_at(relation)
        return created_by_rename(create_sql, str(created), str(final))


def plan_batch(
    unique_id: str, strategy: str, table_format: str, model: Dict[str, Any], compiled: Any
) -> Optional[Microbatch]:
    """A microbatch run's window and load (core/materialization/microbatch.py), refused before any write."""
    if strategy != MICROBATCH:
        return None
    with config_errors_as_compilation_errors():
        return plan_microbatch(
            unique_id, table_format, model.get("config") or {}, model.get("batch"), compiled
        )
