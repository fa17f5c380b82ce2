"""A full refresh that a run's own plan decides, under a `pydantic_contract` whose load discards,
is the run that creates the table (core/materialization/create_run.plan_refresh): planned over
no table, its discards counted (and, with `quarantine: true`, read once into its pending table),
its report keeping the plan that decided it. Any other run is left as it was planned."""

from __future__ import annotations

from typing import Any, Optional

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from dbt.adapters.spark_contracts.core.contracts.contract import resolve_contract
from dbt.adapters.spark_contracts.core.contracts.load_select import PENDING_KEPT
from dbt.adapters.spark_contracts.core.contracts.pydantic_contract import (
    as_declared,
    contract_from_class,
)
from dbt.adapters.spark_contracts.core.evolution.plan import Policy
from dbt.adapters.spark_contracts.core.materialization.create_run import (
    creating_inputs,
    plan_refresh,
)
from dbt.adapters.spark_contracts.core.materialization.microbatch import MICROBATCH
from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs, plan_run
from dbt.adapters.spark_contracts.core.materialization.write_path import REBUILD, WritePath
from dbt.adapters.spark_contracts.core.schema.types import Field as SField
from dbt.adapters.spark_contracts.core.schema.types import Primitive, Struct
from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings
from dbt.adapters.spark_contracts.run.model_run import ModelRun

M = "model.p.orders"
BIG, STR = Primitive("bigint"), Primitive("string")


class Small(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int = Field(ge=1)
    qty: Optional[int] = Field(default=None, le=100)


def struct(*fields: tuple[str, Any], not_null: tuple[str, ...] = ()) -> Struct:
    return Struct(tuple(SField(n, t, nullable=n not in not_null) for n, t in fields))


DEPLOYED = struct(("id", BIG), ("qty", BIG))
WITH_COUPON = struct(("id", BIG), ("qty", BIG), ("coupon", STR))


def inputs(
    data_type: str = "discard_row",
    quarantine: bool = False,
    strategy: str = "merge",
    policy: Policy = Policy(strategy="full_refresh"),
    compiled: Struct = WITH_COUPON,
    dry_run: bool = False,
) -> RunInputs:
    batch = "tag-of-the-batch" if strategy == MICROBATCH else ""
    c = contract_from_class(M, "x:Small", Small)
    override: dict[str, Any] = {"columns": "evolve", "data_type": data_type}
    if quarantine:
        override["quarantine"] = True
    return RunInputs(
        relation="s.orders",
        view="orders__dbt_tmp",
        invocation_id="0123456789abcdef",
        table_format="delta",
        strategy=strategy,
        deployed=DEPLOYED,
        properties={},
        compiled=compiled,
        settings=EvolutionSettings(policy, "ignore", True, dry_run),
        contract=resolve_contract(M, override, None, c.base_contract()),
        declared=as_declared(c),
        batch_tag=batch,
    )


def test_a_full_refresh_the_plan_decides_is_the_creating_run() -> None:
    i = inputs(quarantine=True)
    decided = plan_run(i)
    assert decided.plan.full_refresh is not None and not decided.quarantine_pending
    run_inputs, run = plan_refresh(i, decided)
    assert run_inputs == creating_inputs(i)
    assert run_inputs.strategy == REBUILD and run_inputs.deployed == Struct(())
    assert run.creates and run.violation is None
    # the plan that decided it, for the report and the response's schema_changes
    assert (run.plan, run.diff) == (decided.plan, decided.diff)
    assert run.mode.startswith(decided.mode) and "the run creates the table" in run.mode
    # every row once into the run's pending table; the CREATE reads the kept rows from it
    assert run.quarantine_pending and run.stage == "s.orders__quarantine__pending_0123456789ab"
    assert run.load is not None and run.load.select.endswith(f"WHERE {PENDING_KEPT}")
    assert run.write.path is WritePath.NO_CHANGE and run.statements == ()
    # without the quarantine: staged once and counted there
    _, counted = plan_refresh(inputs(), plan_run(inputs()))
    assert counted.creates and not counted.quarantine_pending
    assert counted.stage == "s.orders__dbt_stage_0123456789ab"
    assert counted.load is not None and counted.load.discard_count_sql is not None


def test_the_creating_run_loads_through_its_create_not_the_table_statement() -> None:
    i = inputs(quarantine=True)
    run_inputs, decided = plan_refresh(i, plan_run(i))
    run = ModelRun.planned(run_inputs, decided, M, "tag")
    # not the build's table statement (PlanExecutor: `full_refresh`), but the run's own load
    assert run.creates and not run.full_refresh and run.rebuilds
    full = ModelRun.planned(i, plan_run(i), M, "tag")
    assert full.full_refresh and not full.rebuilds and full.load is None


def test_a_refresh_that_discards_nothing_or_is_not_carried_out_is_left_as_planned() -> None:
    # nothing to discard, a violation (a required column the model no longer outputs), a dry
    # run: unchanged, as the table statement carries it out
    cases = [
        inputs(data_type="evolve"),
        inputs(compiled=struct(("qty", BIG), ("coupon", STR))),
        inputs(dry_run=True),
        inputs(policy=Policy()),  # no full refresh: the column is added
        # the contract's target keeps a new column nullable: no full refresh either
        inputs(
            policy=Policy(allow_full_refresh=True),
            compiled=struct(("id", BIG), ("qty", BIG), ("coupon", STR), not_null=("coupon",)),
        ),
        inputs(strategy=MICROBATCH),  # a batch refuses it (microbatch.check_batch_plan)
    ]
    for i in cases:
        decided = plan_run(i)
        assert plan_refresh(i, decided) == (i, decided), i


@settings(max_examples=60, deadline=None)
@given(
    data_type=st.sampled_from(["evolve", "freeze", "discard_row", "discard_value"]),
    quarantine=st.booleans(),
    strategy=st.sampled_from(["append", "merge", "insert_overwrite", MICROBATCH, REBUILD]),
    refresh=st.booleans(),
    dry_run=st.booleans(),
)
def test_only_a_planned_full_refresh_that_discards_is_changed(
    data_type: str, quarantine: bool, strategy: str, refresh: bool, dry_run: bool
) -> None:
    policy = Policy(strategy="full_refresh") if refresh else Policy()
    i = inputs(data_type, quarantine, strategy, policy, dry_run=dry_run)
    decided = plan_run(i)
    run_inputs, run = plan_refresh(i, decided)
    if (run_inputs, run) == (i, decided):
        discards = data_type.startswith("discard")
        assert not (decided.plan.full_refresh and discards and strategy != MICROBATCH) or dry_run
        return
    # changed: a full refresh the plan decided, which now counts (and quarantines) its discards
    assert decided.plan.full_refresh is not None and not dry_run and strategy != MICROBATCH
    assert run.creates and run.plan == decided.plan and run.stage is not None
    assert run.quarantine_pending == quarantine
    assert run_inputs.strategy == REBUILD and run_inputs.deployed == Struct(())
