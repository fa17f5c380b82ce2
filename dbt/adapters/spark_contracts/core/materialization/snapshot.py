"""Snapshots evolve through the same planner: the source's new columns and struct fields are
added, its widened types widen the snapshot table, nothing is ever removed (a snapshot keeps its
history). The schema contract binds first: `freeze` fails before any change. Pure.

Supported on snapshots: `columns` and `data_type` evolve (where the format widens in place) or
freeze; `tables` as for models (its first run). A snapshot merges the staged rows by key into its history, so the modes
that drop rows, values or columns (discard modes, variant columns) are refused with this reason,
when dbt parses the project and again at run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract
from dbt.adapters.spark_contracts.core.contracts.decision import (
    WIDEN,
    ContractViolation,
)
from dbt.adapters.spark_contracts.core.contracts.enforce import (
    decide,
    type_freeze_violations,
)
from dbt.adapters.spark_contracts.core.evolution.capabilities import drop_sql, row_of
from dbt.adapters.spark_contracts.core.evolution.operations import Plan
from dbt.adapters.spark_contracts.core.evolution.plan import plan_schema_change
from dbt.adapters.spark_contracts.core.evolution.render import suffixed
from dbt.adapters.spark_contracts.core.materialization.write_path import merged_by_name
from dbt.adapters.spark_contracts.core.recovery.pending import run_key
from dbt.adapters.spark_contracts.core.schema.diff import (
    ColumnAdded,
    FieldAdded,
    SchemaDiff,
    diff_schemas,
)
from dbt.adapters.spark_contracts.core.schema.types import Struct, holds_variant, quote_identifier
from dbt.adapters.spark_contracts.core.settings.config import ConfigError, EvolutionSettings

# Columns dbt's snapshot staging adds for its own merge (`dbt_unique_key_1`, ... included).
SYSTEM_PREFIXES = ("dbt_change_type", "dbt_unique_key")


class SnapshotContractError(ConfigError):
    """A contract mode a snapshot cannot carry out (named, with the reason)."""


@dataclass(frozen=True)
class SnapshotPlan:
    plan: Plan
    target: Struct
    mode: str  # how the plan was chosen, for the run's summary
    violations: tuple[ContractViolation, ...] = ()


@dataclass(frozen=True)
class SnapshotMerge:
    """A snapshot's load: dbt's snapshot merge of the staged rows into their history (dbt's
    `snapshot_merge_sql`, rendered in Jinja from the staging relation), inserting `insert` by
    name."""

    insert: tuple[str, ...]  # quoted staging columns (merge_columns)


def source_columns(staged: Struct) -> Struct:
    """The staging relation's columns without dbt's own merge helpers."""
    return Struct(tuple(f for f in staged.fields if not f.name.lower().startswith(SYSTEM_PREFIXES)))


def merge_columns(staged: Struct) -> tuple[str, ...]:
    """The quoted staging columns dbt's snapshot merge inserts by name (dbt-spark's `insert *`
    would also write its helpers): every column but dbt's own, all of which the snapshot table
    holds once its plan ran (a run never gets past a plan that would leave one out)."""
    return tuple(quote_identifier(f.name) for f in source_columns(staged).fields)


def plan_snapshot(
    unique_id: str,
    deployed: Struct,
    staged: Struct,
    table_format: str,
    properties: Mapping[str, str],
    settings: EvolutionSettings,
    contract: SchemaContract | None,
) -> SnapshotPlan:
    source = source_columns(staged)
    wanted = merged_by_name(deployed, source)
    target = wanted
    violations: tuple[ContractViolation, ...] = ()
    mode = "snapshot: its source's new columns and widened types"
    if contract is not None:
        mode = f"schema_contract {contract.to_dict()}"
        _refuse_unsupported(unique_id, contract)
        decision = decide(contract, deployed, wanted, diff_schemas(deployed, wanted), table_format)
        violations = decision.violations + type_freeze_violations(
            contract, deployed, wanted, "the snapshot source changed this column's type"
        )
        for check in decision.value_checks:
            if check.handling not in (WIDEN, ContractMode.FREEZE.value):
                raise SnapshotContractError(
                    f"{unique_id}: snapshot column `{check.dotted}` changes type "
                    f"{check.deployed_type.to_sql()} -> {check.compiled_type.to_sql()}, which "
                    f"{table_format} cannot widen in place; a snapshot takes no variant column"
                )
        if decision.target is not None:
            target = decision.target
    if violations:
        return SnapshotPlan(Plan(table_format), deployed, mode, violations)
    diff = diff_schemas(deployed, target)
    if table_format == "iceberg":
        _refuse_new_variants(unique_id, diff)
    plan = plan_schema_change(diff, table_format, properties, settings.policy, deployed, target)
    if plan.ignored:  # a snapshot records its source's columns as they are
        raise SnapshotContractError(
            f"{unique_id}: a snapshot cannot ignore a change of its source (it would record "
            f"false changes): {'; '.join(j.describe() for j in plan.ignored)}; set "
            "on_additive_change / on_destructive_change to allow, warn or error on snapshots"
        )
    return SnapshotPlan(plan, target, mode)


def _refuse_new_variants(unique_id: str, diff: SchemaDiff) -> None:
    """Iceberg 1.12 cannot merge into a table whose new VARIANT column no data file holds yet
    (a NullPointerException planning the merge, after the column was added): refused before
    anything changes."""
    for change in diff.changes:
        if isinstance(change, (ColumnAdded, FieldAdded)) and holds_variant(change.field.type):
            raise SnapshotContractError(
                f"{unique_id}: the snapshot source brings the VARIANT column `{change.dotted}`, "
                "and Iceberg 1.12 cannot merge into a table whose new VARIANT column no data "
                "file holds yet (NullPointerException planning the merge); snapshot into a "
                "Delta table (file_format: delta), or keep the source's variant_columns typed"
            )


# the formats whose MERGE reads a non-deterministic source once: Delta materializes it first
# (its default `spark.databricks.delta.merge.materializeSource=auto`); Iceberg's MERGE refuses one
READ_ONCE_FORMATS = ("delta",)
SOURCE_STAGE_SUFFIX = "__dbt_source_"


def reads_source_view(table_format: str) -> bool:
    """A snapshot's staging SELECT reads its query through a temporary view, which its load
    points at the query's rows written once (`SourceStage`): Iceberg, whose MERGE cannot share
    a source it reads several times (a Hudi snapshot reads the query as it is, untested)."""
    return table_format == "iceberg"


def staging_query(sql: str, table_format: str, source_view: str) -> str:
    """The snapshot's query as dbt's staging SELECT reads it. That SELECT reads the query in two
    CTEs (three with `hard_deletes`), which Spark inlines and runs once each; a non-deterministic
    query it runs once per statement and shares (a shuffle). `rand() >= 0`, true for every row,
    makes it so where the format's MERGE takes such a source (`READ_ONCE_FORMATS`). Elsewhere
    it reads `source_view`, the query's temporary view, which the load points at the query's
    rows written once (`SourceStage`). The query stands on lines of its own, so a trailing
    `--` comment ends before the wrapper's `)`."""
    if reads_source_view(table_format):
        return f"select * from {source_view}"
    if table_format not in READ_ONCE_FORMATS:
        return sql
    return f"select * from (\n{sql}\n) where rand() >= 0"


@dataclass(frozen=True)
class SourceStage:
    """A snapshot's query written once before its merge, where the format's MERGE cannot share
    a source it reads several times (Iceberg): `statements` write the query's rows from its
    temporary view (`view`, which dbt's staging SELECT reads) into `table`, then point the view
    at them, so the merge reads the rows and the snapshot table in its one statement and the
    query runs once. `drop` after the merge, whatever happened. The table is named by the run's
    invocation, so it is never another live run's."""

    view: str
    table: str
    table_format: str

    def statements(self) -> tuple[str, ...]:
        return (
            self.drop,
            f"create table {self.table} using {row_of(self.table_format).stage_format} "
            f"as select * from {self.view}",
            f"create or replace temporary view {self.view} as select * from {self.table}",
        )

    @property
    def drop(self) -> str:
        return drop_sql(self.table, self.table_format)


def source_stage(
    relation: str, view: str, table_format: str, invocation_id: str
) -> SourceStage | None:
    """The stage of a snapshot's query before its merge (`SourceStage`), or None where the
    format's MERGE reads the query once by itself (`READ_ONCE_FORMATS`)."""
    if not reads_source_view(table_format):
        return None
    name = suffixed(relation, SOURCE_STAGE_SUFFIX + run_key(invocation_id))
    return SourceStage(view, name, table_format)


SNAPSHOT_MODES = (ContractMode.EVOLVE, ContractMode.FREEZE)


def unsupported_on_snapshots(contract: SchemaContract) -> list[str]:
    """The contract's entities whose mode a snapshot cannot carry out: a snapshot merges its
    source rows into their history by key, so dropping rows, values or columns would record
    false changes (a column left out reads as changed on every `check_cols: all` run).
    `tables` binds the first run as for models."""
    refused = [
        f"{entity}: {mode.value}"
        for entity, mode in (("columns", contract.columns), ("data_type", contract.data_type))
        if mode not in SNAPSHOT_MODES
    ]
    if contract.data_tests is not ContractMode.EVOLVE:  # a snapshot's merge has no gate
        refused.append(f"data_tests: {contract.data_tests.value}")
    if contract.quarantine:  # it would stay empty: a snapshot discards nothing
        refused.append("quarantine: true")
    return refused


def _refuse_unsupported(unique_id: str, contract: SchemaContract) -> None:
    refused = unsupported_on_snapshots(contract)
    if refused:
        raise SnapshotContractError(snapshot_refusal(unique_id, refused))


def snapshot_refusal(unique_id: str, refused: list[str]) -> str:
    return (
        f"{unique_id}: schema_contract {', '.join(refused)} is not supported on snapshots (a "
        "snapshot merges its source rows into their history by key: dropping rows, values or "
        "columns would record false changes). Allowed on snapshots: columns and data_type "
        "evolve or freeze, data_tests evolve (its tests run after the snapshot, as in dbt; "
        "tables: any mode), quarantine false."
    )
