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
from typing import Any

from dbt.adapters.spark_contracts.core.contracts.contract import SchemaContract
from dbt.adapters.spark_contracts.core.contracts.data_tests import AttachedTests
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
from dbt.adapters.spark_contracts.core.contracts.set_tests import gated_load
from dbt.adapters.spark_contracts.core.evolution.capabilities import logged
from dbt.adapters.spark_contracts.core.evolution.fit import (
    fits_view,
    fitted_schema,
    fitted_select,
    kept_for_load,
)
from dbt.adapters.spark_contracts.core.evolution.operations import Plan
from dbt.adapters.spark_contracts.core.evolution.render import render_plan, suffixed
from dbt.adapters.spark_contracts.core.evolution.steps import Step
from dbt.adapters.spark_contracts.core.materialization.microbatch import MICROBATCH
from dbt.adapters.spark_contracts.core.materialization.snapshot import plan_snapshot

# the build's decision (core/materialization/build_plan.py), named here too: a build is planned
# from its facts and, when it evolves, its run (`plan_model`)
from dbt.adapters.spark_contracts.core.materialization.write_path import (
    REBUILD,
    SOURCE_READ_TWICE,
    WriteDecision,
    WritePath,
    decide_write_path,
    load_settings,
    needs_stage,
    plan_change,
    quarantine_pends,
)
from dbt.adapters.spark_contracts.core.recovery.pending import pending_name, run_key
from dbt.adapters.spark_contracts.core.schema.diff import ColumnRemoved, SchemaDiff, diff_schemas
from dbt.adapters.spark_contracts.core.schema.types import Struct
from dbt.adapters.spark_contracts.core.settings.config import ConfigError, EvolutionSettings

STAGE_SUFFIX = "__dbt_stage_"

from dbt.adapters.spark_contracts.core.materialization.build_plan import (  # noqa: E402, F401
    INCREMENTAL,
    SNAPSHOT,
    TABLE,
    Build,
    BuildFacts,
    BuildPlan,
    Existing,
    creates_with_replace,
    load_strategy,
    plan_build,
    replacement,
    replaces_atomically,
)


def stage_name(relation: str, invocation_id: str) -> str:
    """The table a run stages the model's output in: named by its invocation, so a later run
    can drop a dead run's stage (and no live run's)."""
    return suffixed(relation, STAGE_SUFFIX + run_key(invocation_id))


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
    merge_narrowed: bool = False  # incremental_predicates or a column list (LoadOptions.narrowed)
    # the model's `partitioned by` clause: for a rewrite, and its insert_overwrite's settings
    table_options: str = ""
    observable: bool = False  # the connection reports metrics observed inside a statement
    # a microbatch batch's commit tag (unique per batch): its pending table and its discarded
    # rows carry it (core/recovery/pending.py); required for a batch that quarantines
    batch_tag: str = ""
    # the model's last quarantining run discarded rows (its quarantine's memory,
    # `DISCARDED_PROPERTY`): this run goes to the pending table straight away
    discarded_last: bool = False
    data_tests: AttachedTests | None = None  # the model's data tests (gates under a contract)


@dataclass(frozen=True)
class RunDecision:
    """One run's decisions. `violation`: the contract's first broken `freeze` (nothing else
    is decided then; the run must fail before any change)."""

    diff: SchemaDiff
    plan: Plan
    mode: str
    write: WriteDecision
    statements: tuple[Step, ...] = ()  # the multi-step run's steps (core/evolution/steps.py)
    stage: str | None = None  # the run stages the model's output here first
    observed: str | None = None  # the view whose first reader counts the discards
    contract: ContractDecision | None = None
    load: LoadSql | None = None
    violation: ContractViolation | None = None
    # the model's output is read once into the run's pending table (`stage` names it), every
    # row with its reasons; the load reads the kept rows from it, the quarantine the discarded
    # (core/recovery/pending.py)
    quarantine_pending: bool = False
    # the SELECT (over the model's view) of what fits the table, read by the run instead of
    # the view: where the model ignores a change (`on_*_change: ignore`; RunInputs.view of the
    # second pass names it), or an Iceberg struct field goes after the load, written NULL
    # (core/evolution/fit.py)
    fits: str | None = None
    # a quarantining run's first pass (`first_pass`): the load over the model's output as it
    # is, failing at the first row the contract discards; `load` is then the pending path's
    first_pass: LoadSql | None = None
    # the run creates the table, over no deployed table (core/materialization/create_run.py),
    # also where its plan is a full refresh: its load is the table's CREATE
    creates: bool = False
    # the SQL confs the load runs under, set with it (write_path.load_settings)
    load_settings: tuple[tuple[str, str], ...] = ()


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


def _snapshot_run(i: RunInputs) -> RunDecision:
    """A snapshot's run (core/materialization/snapshot.py): its contract, then the planner's
    additions and widenings as steps under the run's record before dbt's merge, which cannot
    evolve the table; nothing is staged, counted or quarantined (a snapshot refuses the modes
    that discard; dbt's merge reads the staging SELECT, which reads the table itself, within
    the merge's own statement). `i.compiled`: the staging relation's schema, dbt's helper
    columns included."""
    planned = plan_snapshot(
        i.relation, i.deployed, i.compiled, i.table_format, i.properties, i.settings, i.contract
    )
    diff = diff_schemas(i.deployed, planned.target)
    if planned.violations:
        write = WriteDecision(WritePath.NO_CHANGE)
        return RunDecision(diff, planned.plan, "", write, violation=planned.violations[0])
    plan = planned.plan
    steps = () if plan.is_blocked else render_plan(plan, i.relation, i.table_format, "")
    write = WriteDecision(WritePath.NO_CHANGE)
    if steps:
        write = WriteDecision(WritePath.MULTI_STEP, "dbt's snapshot merge does not evolve")
    return RunDecision(diff, plan, planned.mode, write, steps)


def _plan_run(inputs: RunInputs, fit: bool) -> RunDecision:
    i = inputs
    if i.strategy == SNAPSHOT:
        return _snapshot_run(i)
    diff = diff_schemas(i.deployed, i.compiled)
    decision = None
    if i.contract is not None:
        if i.contract.quarantine:
            check_quarantine_columns(i.relation, i.compiled, i.strategy == MICROBATCH)
        decision = decide(i.contract, i.deployed, i.compiled, diff, i.table_format, i.declared)
        keys = i.data_tests.unique_key if i.data_tests is not None else ()
        gated = gated_load(i.strategy, i.relation, keys, REBUILD, narrowed=i.merge_narrowed)
        decision = decision.with_gates(i.data_tests, i.compiled, gated)
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
    fits = None
    kept = None
    if not (plan.is_blocked or plan.full_refresh or write.path is WritePath.REPLACE):
        kept = kept_for_load(i.deployed, written, plan)
    if kept is not None:  # a struct's field dropped after the load: the load writes it NULL
        if decision is not None:
            decision = replace(decision, target=kept)
        else:
            fits = fitted_select(i.compiled, kept, i.view)
    dry_run = i.settings.dry_run
    # a dry run shows the DDL the plan amounts to, also when the write would carry it
    statements: tuple[Step, ...] = ()
    if not (
        plan.is_blocked
        or write.path is WritePath.REPLACE
        or (write.evolves_in_write and not dry_run)
    ):
        statements = render_plan(plan, i.relation, i.table_format, i.table_options.strip())
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
    first = None
    if decision is not None and pending and first_pass(i, write, bool(statements)):
        # over the model's output as it is (its coerced columns in a view of their own)
        args = (i.deployed, i.compiled, i.invocation_id)
        first = render_load_select(decision, i.view, *args, guard=True)
        first = render_load_select(
            decision, observed or first.coerced_view(i.view), *args, guard=True
        )
        if first.violation_sample_sql or (first.discards_values and not i.observable):
            first = None  # a freeze check, or value counts, would read the output again
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
        fits=fits,
        first_pass=first,
        load_settings=load_settings(
            i.strategy, i.table_format, write.evolves_in_write, bool(i.table_options.strip())
        ),
    )


def first_pass(i: RunInputs, write: WriteDecision, steps: bool) -> bool:
    """A quarantining run tries its load over the model's output first, failing the load's own
    job at the first row its contract discards (`render_load_select(guard=True)`): on a clean day
    that one statement is the whole run, at the cost of the same model without a contract.
    Only where that failure commits nothing and the table's own log can show it (one statement,
    one atomic commit, on a format with a log: no changes before the load, no staged output; not
    Parquet, whose append commits task by task and whose overwrite deletes first); not for a microbatch batch (the batches of one
    invocation would each try it: the quarantine's memory is read from dbt's cache, which holds
    the quarantine only from the model's next invocation on); and not when the model's last quarantining run
    discarded rows (that run's memory): then it goes to the pending table at once, so a day that
    discards evaluates the model once."""
    return not (
        i.discarded_last
        or steps
        or i.settings.dry_run
        or write.multi_step
        or i.strategy in (REBUILD, MICROBATCH)
        or (i.table_format, i.strategy) in SOURCE_READ_TWICE
        or not logged(i.table_format)
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
    if again.fits:  # a struct's field dropped after the load too: written NULL (`kept_for_load`)
        fitted = kept_for_load(i.deployed, fitted, again.plan) or fitted
    return replace(
        again,
        diff=diff,
        plan=replace(again.plan, judged=judged),
        fits=fitted_select(i.compiled, fitted, i.view),
    )
