"""How one model build goes, decided once before its first statement. Pure.

One decision, a frozen value: `plan_model(facts) -> ModelPlan`, made of `plan_build` (what the
materialization does with the relation) and, when the build evolves, `plan_run` (the run or
planned rebuild: the contract, the schema-change plan, the write path, the DDL, whether to stage
/ observe / quarantine, and the load's SELECT).

The table and incremental materializations ask once (the adapter's `plan_model`) and carry out
the `ModelPlan` they are handed: create the table,
replace it in one atomic statement, drop it first where its format cannot replace, or plan the
run against the deployed table (the incremental run path: `ModelRun`). Jinja holds no format or
strategy decision of its own: "can this format replace atomically" is
`FormatCapabilities.atomic_rewrite`, asked here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from dbt.adapters.spark_contracts.core.contracts.contract import SchemaContract
from dbt.adapters.spark_contracts.core.contracts.decision import (
    ContractDecision,
    ContractViolation,
)
from dbt.adapters.spark_contracts.core.contracts.enforce import (
    decide,
)
from dbt.adapters.spark_contracts.core.contracts.load_select import (
    PENDING_KEPT,
    LoadSql,
    check_quarantine_columns,
    render_load_select,
)
from dbt.adapters.spark_contracts.core.contracts.quarantine import QUARANTINE_SUFFIX
from dbt.adapters.spark_contracts.core.evolution.capabilities import CAPABILITIES, row_of
from dbt.adapters.spark_contracts.core.evolution.fit import fits_view, fitted_schema, fitted_select
from dbt.adapters.spark_contracts.core.evolution.operations import Plan
from dbt.adapters.spark_contracts.core.evolution.render import render_plan, suffixed
from dbt.adapters.spark_contracts.core.materialization.microbatch import MICROBATCH
from dbt.adapters.spark_contracts.core.materialization.write_path import (
    REBUILD,
    WriteDecision,
    WritePath,
    decide_write_path,
    needs_stage,
    plan_change,
    quarantine_pends,
)
from dbt.adapters.spark_contracts.core.recovery.pending import pending_name
from dbt.adapters.spark_contracts.core.recovery.swap import refused
from dbt.adapters.spark_contracts.core.schema.diff import ColumnRemoved, SchemaDiff, diff_schemas
from dbt.adapters.spark_contracts.core.schema.types import Struct
from dbt.adapters.spark_contracts.core.settings.config import ConfigError, EvolutionSettings

STAGE_SUFFIX = "__dbt_stage_"

TABLE = "table"
INCREMENTAL = "incremental"


class Build(Enum):
    CREATE = "create the table"
    REPLACE = "replace the table in one atomic statement"
    SWAP = (
        "build the table beside the relation, then swap them by two renames (core/recovery/swap.py)"
    )
    REFUSE = "refused: a table at a fixed path cannot be dropped and built over its files"
    DROP_AND_CREATE = "drop the relation, then create the table (a fixed path, Iceberg's catalog)"
    EVOLVE = "plan the run against the deployed table"


@dataclass(frozen=True)
class Existing:
    """The relation dbt found for the model: a view, or a table of `table_format`."""

    is_view: bool
    table_format: str  # delta, iceberg, or parquet for any file-source table


@dataclass(frozen=True)
class BuildPlan:
    action: Build
    file_format: str  # the model's configured format
    load_strategy: str  # the strategy the load runs (EVOLVE)
    result_format: str  # the table format of the relation once built

    @property
    def creates(self) -> bool:
        return self.action is not Build.EVOLVE

    @property
    def drop_first(self) -> bool:
        return self.action is Build.DROP_AND_CREATE

    @property
    def swaps(self) -> bool:
        return self.action is Build.SWAP

    @property
    def evolves(self) -> bool:
        return self.action is Build.EVOLVE

    @property
    def is_delta(self) -> bool:
        return self.result_format == "delta"

    @property
    def is_iceberg(self) -> bool:
        return self.result_format == "iceberg"


def replaces_atomically(existing: Existing | None, file_format: str) -> bool:
    """A `create or replace` of `existing` as `file_format` is one atomic statement: the table
    is of that format already and the format replaces atomically (Delta, Iceberg)."""
    if existing is None or existing.is_view or existing.table_format != file_format.lower():
        return False
    caps = CAPABILITIES.get(file_format.lower())
    return caps is not None and caps.atomic_rewrite


def replacement(existing: Existing | None, file_format: str, external: bool = False) -> Build:
    """How a rebuild as `file_format` replaces `existing`: in one statement where the format
    can; else built beside it and swapped in by two renames (a failed or killed build leaves
    the old relation); at a `location_root` (`external`: the new table's path is the old one's)
    or in a format's own catalog (Iceberg's Hadoop catalog cannot rename), dropped first."""
    if replaces_atomically(existing, file_format):
        return Build.REPLACE
    if external and existing is not None and not existing.is_view:
        return Build.REFUSE  # its table is external: DROP would leave its files (`refused`)
    if external or row_of(file_format).in_own_catalog:
        return Build.DROP_AND_CREATE
    return Build.SWAP


def creates_with_replace(file_format: str) -> bool:
    """The CTAS of a `file_format` table is `create or replace` (atomic over an existing table of
    the same format); other formats are created with a plain `create table`."""
    caps = CAPABILITIES.get(file_format.lower())
    return caps is not None and caps.atomic_rewrite


def load_strategy(strategy: str, file_format: str, unique_key: object) -> str:
    """A `merge` without a key only appends (dbt-spark joins `FALSE`, to its predicates if any:
    nothing matches): on Delta and Iceberg it is written as an append (a `MERGE ... ON FALSE`
    would scan the whole target; Iceberg 1.12 on Spark 4.1 fails planning one whose predicates
    fold to false, `NoSuchElementException: None.get`). Predicates do not change that: they
    only narrow what a key matches."""
    if strategy == "merge" and not unique_key and row_of(file_format).update:
        return "append"
    return strategy


@dataclass(frozen=True)
class BuildFacts:
    """What a `table` or `incremental` build is decided from before anything is read from the
    relation: the materialization, the model's format and config, and the relation dbt found
    (None: no relation)."""

    materialization: str
    file_format: str
    existing: Existing | None
    full_refresh: bool = False
    strategy: str = ""
    unique_key: object = None
    binds_contract: bool = False  # a schema contract or schema_evolution binds the model
    external: bool = False  # the model sets a location_root: the table's path is its name's

    @property
    def evolves(self) -> bool:
        """The build is planned against the deployed table (the run's facts are read):
        incremental over a table, or a table that binds a contract, without `--full-refresh`."""
        e = self.existing
        return (
            e is not None
            and not e.is_view
            and not self.full_refresh
            and (
                self.materialization == INCREMENTAL
                or (self.materialization == TABLE and self.binds_contract)
            )
        )

    @property
    def load_strategy(self) -> str:
        """The strategy an evolving build loads with (`table`: a rebuild planned like a run)."""
        if self.materialization == TABLE:
            return TABLE
        return load_strategy(self.strategy, self.file_format.lower(), self.unique_key)


def plan_build(facts: BuildFacts) -> BuildPlan:
    """What a `table` or `incremental` build does with the relation dbt found.

    - no relation: create it;
    - incremental over a table, no `--full-refresh`: evolve (plan against the deployed table,
      load with `load_strategy`); the relation keeps its own format;
    - table over a table that binds a schema contract / schema_evolution, no `--full-refresh`:
      evolve with the `table` strategy (a rebuild planned like an incremental run);
    - anything else rebuilds: replace atomically where the format can, else build beside and
      swap, else (a location_root, a format's own catalog) drop first (`replacement`)."""
    file_format = facts.file_format.lower()
    existing = facts.existing
    if existing is None:
        return BuildPlan(Build.CREATE, file_format, facts.strategy, file_format)
    if facts.evolves:
        result = file_format if facts.materialization == TABLE else existing.table_format
        return BuildPlan(Build.EVOLVE, file_format, facts.load_strategy, result)
    action = replacement(existing, file_format, facts.external)
    if action is Build.REFUSE:
        raise refused(existing.table_format, file_format)
    return BuildPlan(action, file_format, facts.strategy, file_format)


def stage_name(relation: str, invocation_id: str) -> str:
    """The table a run stages the model's output in: named by its invocation, so a later run
    can drop a dead run's stage (and no live run's)."""
    return suffixed(relation, STAGE_SUFFIX + invocation_id.replace("-", "")[:12])


@dataclass(frozen=True)
class RunInputs:
    """What one incremental run (or planned rebuild) is decided from: read before planning,
    after any repair of a dead run (`relation`'s `deployed` schema and `properties` are the
    repaired table's)."""

    relation: str
    view: str  # the model's query as a temporary view
    invocation_id: str
    table_format: str  # the deployed table's format
    strategy: str  # the load's strategy (`table`: a rebuild)
    deployed: Struct
    properties: Mapping[str, str]
    compiled: Struct
    settings: EvolutionSettings
    contract: SchemaContract | None = None
    declared: Any = None  # the `pydantic_contract`'s declared columns
    column_lists: bool = False  # merge_update_columns / merge_exclude_columns are set
    table_options: str = ""  # the model's `partitioned by` clause, for a rewrite
    observable: bool = False  # the connection reports metrics observed inside a statement
    # a microbatch batch's commit tag (unique per batch): its pending table and its discarded
    # rows carry it (core/recovery/pending.py); required for a batch that quarantines
    batch_tag: str = ""


@dataclass(frozen=True)
class RunDecision:
    """One run's decisions. `violation`: the contract's first broken `freeze` (nothing else
    is decided then; the run must fail before any change)."""

    diff: SchemaDiff
    plan: Plan
    mode: str
    write: WriteDecision
    statements: tuple[str, ...] = ()
    stage: str | None = None  # the run stages the model's output here first
    observed: str | None = None  # the view whose first reader counts the discards
    contract: ContractDecision | None = None
    load: LoadSql | None = None
    violation: ContractViolation | None = None
    # the model's output is read once into the run's pending table (`stage` names it), every
    # row with its reasons; the load reads the kept rows from it, the quarantine the discarded
    # (core/recovery/pending.py)
    quarantine_pending: bool = False
    # `on_*_change: ignore`: the SELECT (over the model's view) of what fits the table, read
    # by the run instead of the view (RunInputs.view of the second pass names it; core/evolution/fit.py)
    fits: str | None = None


def plan_run(inputs: RunInputs) -> RunDecision:
    """The contract (SPEC §3), the schema-change plan (§4), how the write goes, and the SQL
    around it; the schemas are diffed once (twice where the model ignores a change)."""
    return _plan_run(inputs, fit=True)


@dataclass(frozen=True)
class ModelPlan:
    """One build, decided once: what the materialization does with the relation, and, when it
    evolves, the run planned against the deployed table."""

    build: BuildPlan
    run: RunDecision | None = None


def plan_model(facts: BuildFacts, run: RunInputs | None = None) -> ModelPlan:
    """The one decision of a table or incremental build (SPEC §3, §4). `run`: the run's facts,
    read (and a dead run repaired) exactly when `facts.evolves`; their strategy is the build's
    load strategy."""
    build = plan_build(facts)
    if build.evolves != (run is not None):
        raise ValueError(
            f"plan_model: the run's facts are read when the build evolves and only then "
            f"(build: {build.action.value}; run facts {'given' if run else 'missing'})"
        )
    if run is None:
        return ModelPlan(build)
    return ModelPlan(build, plan_run(replace(run, strategy=build.load_strategy)))


def _plan_run(inputs: RunInputs, fit: bool) -> RunDecision:
    i = inputs
    diff = diff_schemas(i.deployed, i.compiled)
    decision = None
    if i.contract is not None:
        if i.contract.quarantine:
            check_quarantine_columns(i.relation, i.compiled, i.strategy == MICROBATCH)
        decision = decide(i.contract, i.deployed, i.compiled, diff, i.table_format, i.declared)
        if decision.violations:
            empty = Plan(i.table_format)
            write = WriteDecision(WritePath.NO_CHANGE)
            return RunDecision(
                diff, empty, "", write, contract=decision, violation=decision.violations[0]
            )
    diff, plan, mode = plan_change(
        i.deployed, i.compiled, i.table_format, i.properties, i.settings, decision, diff
    )
    if plan.ignored and fit:
        return _fitted_run(i, diff, plan, decision is not None)
    written = (
        decision.target if decision is not None and decision.target is not None else i.compiled
    )
    write = decide_write_path(plan, i.table_format, i.strategy, i.deployed, written, i.column_lists)
    dry_run = i.settings.dry_run
    # a dry run shows the DDL the plan amounts to, also when the write would carry it
    statements: tuple[str, ...] = ()
    if not (
        plan.is_blocked
        or write.path is WritePath.REPLACE
        or (write.evolves_in_write and not dry_run)
    ):
        statements = tuple(render_plan(plan, i.relation, i.table_format, i.table_options.strip()))
    stage = stage_name(i.relation, i.invocation_id)
    load = None
    if decision is not None and not dry_run:
        load = render_load_select(decision, stage, i.deployed, i.compiled, i.invocation_id)
    # a quarantining run writes the model's output once, from the executors, to its pending
    # table (never through the driver): the counts, the load and the quarantine all read it.
    # Nothing is hoisted: the pending table holds the model's columns only.
    pending = quarantine_pends(load, i.strategy) and not plan.full_refresh
    if decision is not None and pending:
        # a batch's own pending table, its rows carrying its tag: the batches of one
        # invocation share the run id their quarantined rows carry
        batch = i.batch_tag if i.strategy == MICROBATCH else ""
        if i.strategy == MICROBATCH and not batch:
            raise ValueError(f"{i.relation}: a microbatch batch that quarantines needs its tag")
        quarantine = suffixed(i.relation, QUARANTINE_SUFFIX)
        stage = pending_name(quarantine, i.invocation_id, batch)
        load = render_load_select(
            decision, stage, i.deployed, i.compiled, i.invocation_id, False, PENDING_KEPT, batch
        )
    # A table rebuild's `create or replace ... as select` runs its query in a nested execution
    # whose observed metrics never reach the session (Delta 4.3): it stages.
    observe = (
        load is not None and bool(load.discard_metrics) and i.observable and i.strategy != REBUILD
    )
    observed = suffixed(i.view, "__observed") if observe else None
    model_source = load.coerced_view(i.view) if load is not None else i.view
    staged = pending or (
        needs_stage(write, load, observe, i.table_format, i.strategy)
        and not (plan.full_refresh or dry_run)
    )
    if decision is not None and load is not None and not staged:
        load = render_load_select(
            decision, observed or model_source, i.deployed, i.compiled, i.invocation_id
        )
    return RunDecision(
        diff,
        plan,
        mode,
        write,
        statements,
        stage if staged else None,
        observed,
        decision,
        load,
        quarantine_pending=pending,
    )


def _fitted_run(i: RunInputs, diff: SchemaDiff, plan: Plan, contracted: bool) -> RunDecision:
    """`ignore`d changes: the run reads the model's output as it fits the table (each ignored
    change taken back, core/evolution/fit.py) and is planned again from that; the plan file shows the
    ignored changes beside what the second plan does."""
    if contracted:  # validation refuses this at parse; a run never gets here with one
        raise ConfigError(
            f"{i.relation}: `on_additive_change` / `on_destructive_change: ignore` with a "
            "schema_contract; the contract decides what reaches the table (discard_value)"
        )
    ignored = [j.change for j in plan.ignored]
    fitted = fitted_schema(i.deployed, i.compiled, ignored)
    # planned once more, not fitted again: a removed column the table keeps is ignored again
    again = _plan_run(replace(i, compiled=fitted, view=fits_view(i.view)), fit=False)
    removed = tuple(c.field for c in ignored if isinstance(c, ColumnRemoved))
    rebuilds = again.plan.full_refresh is not None or again.write.path is WritePath.REPLACE
    if removed and (rebuilds or i.strategy == REBUILD):
        # a rebuild writes every row from the output: a removed column the table keeps is in
        # it, NULL (every row of a rebuilt table is a new row)
        fitted = Struct((*fitted.fields, *removed))
        again = _plan_run(replace(i, compiled=fitted, view=fits_view(i.view)), fit=False)
    first = {j.change for j in plan.ignored}
    judged = (*plan.ignored, *(j for j in again.plan.judged if j.change not in first))
    return replace(
        again,
        diff=diff,
        plan=replace(again.plan, judged=judged),
        fits=fitted_select(i.compiled, fitted, i.view),
    )
