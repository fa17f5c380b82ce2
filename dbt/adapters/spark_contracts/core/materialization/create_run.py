"""The run that creates the table under a contract that can discard, planned as a run. Pure.

A build that creates the table (the incremental model's first build, the table
materialization's, a `--full-refresh`) writes the model's query coerced and checked by the
declared rules of its `pydantic_contract`. Where those rules discard rows or values, that
build is planned here as a run of the table strategy (`REBUILD`) over no deployed table, and the
`Runner` carries it out as it carries out a table model's rebuild: the model's output is read
once into the run's stage, where its discards are counted, or, with `quarantine: true`, into the
run's pending table, every row with its reasons (core/recovery/pending.py); the CREATE reads the kept
rows from it and the discarded rows follow into the quarantine after it. A failure leaves no
table (or the old one) and no quarantine rows of the run.

A full refresh that a run's own plan decides (`allow_full_refresh`, `schema_evolution.strategy:
full_refresh`) creates the table too: `plan_refresh` plans it as the same creating run, its
report keeping the plan that decided it.

Where nothing can be discarded (no declared class, `freeze`, no rules), `plan_create` plans no
run: the CREATE writes the checked query itself (`freeze` fails it).
"""

from __future__ import annotations

from dataclasses import replace

from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode
from dbt.adapters.spark_contracts.core.contracts.enforce import decide
from dbt.adapters.spark_contracts.core.contracts.load_select import (
    PENDING_KEPT,
    check_quarantine_columns,
    render_load_select,
)
from dbt.adapters.spark_contracts.core.contracts.quarantine import QUARANTINE_SUFFIX
from dbt.adapters.spark_contracts.core.contracts.set_tests import GatedLoad
from dbt.adapters.spark_contracts.core.evolution.operations import Plan
from dbt.adapters.spark_contracts.core.evolution.render import suffixed
from dbt.adapters.spark_contracts.core.materialization.microbatch import MICROBATCH
from dbt.adapters.spark_contracts.core.materialization.run_plan import (
    RunDecision,
    RunInputs,
    stage_name,
)
from dbt.adapters.spark_contracts.core.materialization.write_path import (
    REBUILD,
    WriteDecision,
    WritePath,
    quarantine_pends,
)
from dbt.adapters.spark_contracts.core.recovery.pending import pending_name
from dbt.adapters.spark_contracts.core.schema.diff import SchemaDiff
from dbt.adapters.spark_contracts.core.schema.types import Struct


def plan_create(inputs: RunInputs) -> RunDecision | None:
    """The creating run of a model under a `pydantic_contract` (`inputs.declared`) whose load
    discards rows or values, or whose data tests gate the load (`inputs.data_tests`); None where the CREATE writes the checked query itself (no declared
    class, nothing to discard, a violation the CREATE's own check raises, a dry run).
    `inputs.deployed` is empty (there is no table to evolve) and `inputs.strategy` is ignored:
    the load is the table's CREATE (`REBUILD`)."""
    i = replace(inputs, strategy=REBUILD)
    if i.contract is None or i.settings.dry_run:
        return None
    # `tables` was decided before the build (a skipped model never gets here)
    creating = replace(i.contract, tables=ContractMode.EVOLVE)
    decision = decide(creating, None, i.compiled, SchemaDiff(), i.table_format, i.declared)
    if decision.violations or decision.target is None:
        return None
    # they bind on this run too; `unique` too: its rows are all the table holds
    decision = decision.with_gates(i.data_tests, i.compiled, GatedLoad(whole=True))
    stage = stage_name(i.relation, i.invocation_id)
    load = render_load_select(decision, stage, None, i.compiled, i.invocation_id)
    # a data test's freeze is checked on the stage, before the CREATE
    if not (load.discard_metrics or decision.gates.frozen()):
        return None
    if decision.contract.quarantine:
        check_quarantine_columns(i.relation, i.compiled)
    # a quarantining run writes the model's output once, from the executors, to its pending
    # table; else the output is staged once (a CTAS's observed metrics never reach the
    # session) and counted there
    pending = quarantine_pends(load, REBUILD)
    if pending:
        stage = pending_name(suffixed(i.relation, QUARANTINE_SUFFIX), i.invocation_id)
        load = render_load_select(
            decision, stage, None, i.compiled, i.invocation_id, False, PENDING_KEPT
        )
    mode = f"schema_contract {decision.contract.to_dict()} (the run creates the table)"
    return RunDecision(
        SchemaDiff(),
        Plan(i.table_format),
        mode,
        WriteDecision(WritePath.NO_CHANGE),
        (),
        stage,
        None,
        decision,
        load,
        quarantine_pending=pending,
        creates=True,
    )


def creating_inputs(inputs: RunInputs) -> RunInputs:
    """The facts of the run that creates the table: no deployed table (nothing to evolve); its
    load is the table's CREATE (`REBUILD`)."""
    return replace(inputs, strategy=REBUILD, deployed=Struct(()), properties={})


def plan_refresh(inputs: RunInputs, decided: RunDecision) -> tuple[RunInputs, RunDecision]:
    """The run `decided` (planned from `inputs`) as it is carried out. A full refresh its own
    plan decided, under a `pydantic_contract` whose load discards, is the run that creates the
    table (`plan_create` over `creating_inputs(inputs)`: its discards counted and quarantined),
    which keeps the diff, the plan and the mode that decided it, for the report; any other run
    (no full refresh, a dry run, nothing to discard, a microbatch batch) is
    `(inputs, decided)` unchanged."""
    if decided.plan.full_refresh is None:  # a blocked plan has none
        return inputs, decided
    if inputs.strategy == MICROBATCH:  # a batch refuses it (microbatch.check_batch_plan)
        return inputs, decided
    creating = creating_inputs(inputs)
    created = plan_create(creating)
    if created is None:
        return inputs, decided
    mode = f"{decided.mode} (a full refresh: the run creates the table)"
    return creating, replace(created, diff=decided.diff, plan=decided.plan, mode=mode)
