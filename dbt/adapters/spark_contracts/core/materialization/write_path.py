"""How one incremental run writes: which schema changes ride inside the load itself, and when
the model's output must be staged first. Decided once per run, from typed inputs. Pure.

Spark 4.1 with Delta 4.3 evolves a table inside one write: `MERGE WITH SCHEMA EVOLUTION` and an
append with schema merging add top-level columns,
struct fields (also inside arrays) and widen integral types in the same commit as the rows. A
plan made only of such changes is `IN_WRITE`: no ALTER, nothing to restore, one commit. Any
other plan (drops, defaults, backfills, rewrites, features, a parquet table) is `MULTI_STEP`:
a durable intent, the statements, the load, each undone together on failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from dbt.adapters.spark_contracts.core.contracts.decision import (
    ContractDecision,
)
from dbt.adapters.spark_contracts.core.contracts.load_select import (
    LoadSql,
)
from dbt.adapters.spark_contracts.core.evolution.capabilities import INTEGRAL_UP, row_of
from dbt.adapters.spark_contracts.core.evolution.operations import AddColumns, AlterColumnType, Plan
from dbt.adapters.spark_contracts.core.evolution.plan import (
    plan_on_schema_change,
    plan_schema_change,
)
from dbt.adapters.spark_contracts.core.materialization.flags import Is
from dbt.adapters.spark_contracts.core.schema.diff import FieldsReordered, SchemaDiff, diff_schemas
from dbt.adapters.spark_contracts.core.schema.merge import MergeRules, Order, merge_structs
from dbt.adapters.spark_contracts.core.schema.types import SparkType, Struct, type_kind
from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings

# Widenings the evolving write performs itself (probed on Spark 4.1.1, Delta 4.3.1, Iceberg 1.12).
IN_WRITE_WIDENINGS = frozenset(INTEGRAL_UP | {("float", "double")})
# Strategies whose write evolves the schema in the same commit as the rows, per table format.
# A table model is rebuilt whole: its `create or replace` writes the new schema with the rows.
REBUILD = "table"
# Iceberg is not listed: Spark 4.1 + Iceberg 1.12 run `MERGE WITH SCHEMA EVOLUTION` as a schema
# commit first and the rows after, so a query failing at run time leaves the new columns behind
# (tests/functional/evolution/test_atomicity.py); Iceberg takes the multi-step path.
# A Delta microbatch's `REPLACE WHERE` evolves the schema like an append (schema auto-merge).
IN_WRITE_STRATEGIES: dict[str, tuple[str, ...]] = {"delta": ("merge", "append", "microbatch")}


# An insert_overwrite or microbatch load of a model with `partition_by` replaces only the
# partitions its rows fall in (dbt-spark's incremental macro sets it for the model's session and
# leaves it set; here it is set with the load and put back after a run that succeeded).
PARTITION_OVERWRITE = ("spark.sql.sources.partitionOverwriteMode", "DYNAMIC")
PARTITION_OVERWRITE_STRATEGIES = ("insert_overwrite", "microbatch")
# strategies whose evolving write takes its schema change from a session conf (Delta's autoMerge)
CONF_EVOLVED_STRATEGIES = ("append", "microbatch")


def load_settings(
    strategy: str, table_format: str, evolves_in_write: bool, partitioned: bool
) -> tuple[tuple[str, str], ...]:
    """The SQL confs the run's load statement runs under, each set in the node's own session
    with that statement and put back once the run has succeeded (run/load_settings.py): the
    format's conf that evolves an append's schema inside the write (Delta's autoMerge), and the
    dynamic partition overwrite of a partitioned model's insert_overwrite or microbatch load."""
    settings: list[tuple[str, str]] = []
    conf = row_of(table_format).evolving_append_conf
    if conf and evolves_in_write and strategy in CONF_EVOLVED_STRATEGIES:
        settings.append((conf, "true"))
    if partitioned and strategy in PARTITION_OVERWRITE_STRATEGIES:
        settings.append(PARTITION_OVERWRITE)
    return tuple(settings)


class WritePath(Enum):
    NO_CHANGE = "no schema change"
    IN_WRITE = "schema change inside the write (one commit)"
    MULTI_STEP = "schema change in steps under a durable intent"
    REPLACE = "schema change written by the table's rebuild (one replace)"


@dataclass(frozen=True)
class WriteDecision:
    """`path`, plus why a change could not ride in the write (for the plan and the README)."""

    path: WritePath
    reason: str = ""

    evolves_in_write = Is("path", WritePath.IN_WRITE)
    multi_step = Is("path", WritePath.MULTI_STEP)


def _in_write_leaf(path: tuple[str, ...], old: SparkType, new: SparkType) -> SparkType:
    return new if (type_kind(old), type_kind(new)) in IN_WRITE_WIDENINGS else old


# What an evolving write does to a schema (merge.py): deployed fields in place (widened where
# the write widens), new fields appended at the end of their struct.
EVOLVING_WRITE = MergeRules(
    top=Order.DEPLOYED_NEW_LAST,
    nested=Order.DEPLOYED_NEW_LAST,
    leaf=_in_write_leaf,
    map_key=lambda old, new: old,
    deep_nullable=False,
)


def merged_by_name(deployed: Struct, source: Struct) -> Struct:
    """The schema an evolving write leaves: deployed fields in place (widened where the source
    is wider), fields new in the source appended at the end of their struct."""
    return merge_structs(deployed, source, EVOLVING_WRITE)


def decide_write_path(
    plan: Plan,
    table_format: str,
    strategy: str,
    deployed: Struct,
    source: Struct,
    column_lists_configured: bool = False,
) -> WriteDecision:
    """IN_WRITE when every operation of `plan` is one the evolving write performs exactly as
    planned; `source` is the schema the load reads (the compiled model, or the contract's
    target). `column_lists_configured`: merge_update_columns / merge_exclude_columns are set,
    which an evolving `UPDATE SET *` would not honour."""
    if not plan.operations:
        return WriteDecision(WritePath.NO_CHANGE)
    if strategy == REBUILD:
        return WriteDecision(WritePath.REPLACE)
    if strategy not in IN_WRITE_STRATEGIES.get(table_format, ()):
        why = f"{table_format} cannot evolve the schema inside a {strategy} write"
        return WriteDecision(WritePath.MULTI_STEP, why)
    if strategy == "merge" and column_lists_configured:
        return WriteDecision(WritePath.MULTI_STEP, "merge column lists are configured")
    for op in plan.operations:
        if isinstance(op, AddColumns):
            if any(c.default is not None for c in op.columns):
                return WriteDecision(WritePath.MULTI_STEP, "a new column has a default")
        elif isinstance(op, AlterColumnType):
            pair = (type_kind(op.old_type), type_kind(op.new_type))
            if pair not in IN_WRITE_WIDENINGS:
                why = f"widening {pair[0]} -> {pair[1]} is not done by an evolving write"
                return WriteDecision(WritePath.MULTI_STEP, why)
        else:
            return WriteDecision(WritePath.MULTI_STEP, f"{type(op).__name__} needs its own step")
    missing = [f.name for f in deployed.fields if source.field(f.name) is None]
    if missing:
        why = f"the load does not write {', '.join(missing)}"
        return WriteDecision(WritePath.MULTI_STEP, why)
    after = merged_by_name(deployed, source)
    if any(isinstance(c, FieldsReordered) for c in diff_schemas(after, source)):
        return WriteDecision(WritePath.MULTI_STEP, "a new struct field is not last in its struct")
    return WriteDecision(WritePath.IN_WRITE)


# Loads whose one statement reads its source twice. Iceberg's (copy-on-write) MERGE with a key (a
# keyless merge is written as an append: core/materialization/run_plan.load_strategy) first runs a
# runtime group filter, a join of the source with the table that finds the files to rewrite
# (Spark's RowLevelOperationRuntimeGroupFiltering), then reads the source again to rewrite them:
# measured on Spark 4.1.1 + Iceberg 1.12, 2 evaluations of the model per row
# (tests/functional/evolution/test_one_evaluation.py). Delta's MERGE materializes its source.
SOURCE_READ_TWICE: frozenset[tuple[str, str]] = frozenset({("iceberg", "merge")})


def quarantine_pends(load: LoadSql | None, strategy: str = "") -> bool:
    """The run writes its discarded rows to a pending table before its load and moves them into
    the quarantine after it (core/recovery/pending.py), the model's output read once into that table
    (every row, with its reasons). Every quarantining run, a microbatch batch too (each batch
    its own pending table, its rows told apart by their commit tag: core/recovery/pending.py)."""
    return load is not None and load.quarantine_row is not None


def needs_stage(
    write: WriteDecision,
    load: LoadSql | None,
    observable: bool,
    table_format: str = "",
    strategy: str = "",
) -> bool:
    """Stage the model's output once when more than one statement reads it (freeze check,
    quarantine not collected in the load, and the discard counts where the connection cannot
    observe them in the load), when the load statement itself reads it twice
    (`SOURCE_READ_TWICE`), or when changes precede the load (a query failing at run time then
    changes nothing). `observable`: the connection reports metrics observed while a statement
    runs."""
    if write.multi_step or (table_format, strategy) in SOURCE_READ_TWICE:
        return True
    if load is None:
        return False
    counted_apart = bool(load.discard_metrics) and not observable
    quarantine_apart = bool(load.quarantine_select) and not quarantine_pends(load, strategy)
    return bool(load.violation_sample_sql or quarantine_apart or counted_apart)


def plan_change(
    deployed: Struct,
    compiled: Struct,
    table_format: str,
    properties: Mapping[str, str],
    settings: EvolutionSettings,
    contract: ContractDecision | None,
    diff: SchemaDiff | None = None,
) -> tuple[SchemaDiff, Plan, str]:
    """The plan for this run and how it was chosen: towards the contract's target, or by
    `schema_evolution`, or by dbt's `on_schema_change`. `diff`: `diff_schemas(deployed,
    compiled)` when the caller has it already."""
    if diff is None:
        diff = diff_schemas(deployed, compiled)
    if contract is not None and contract.target is not None:
        plan = plan_schema_change(
            contract.evolve_diff,
            table_format,
            properties,
            settings.policy,
            deployed,
            contract.target,
        )
        return diff, plan, f"schema_contract {contract.contract.to_dict()}"
    if settings.uses_evolution:
        plan = plan_schema_change(
            diff, table_format, properties, settings.policy, deployed, compiled
        )
        return diff, plan, f"schema_evolution (strategy {settings.policy.strategy})"
    plan = plan_on_schema_change(
        settings.on_schema_change,
        diff,
        table_format,
        properties,
        deployed,
        compiled,
        settings.policy,
    )
    return diff, plan, f"on_schema_change: {settings.on_schema_change}"
