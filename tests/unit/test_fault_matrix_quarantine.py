"""The scripted fault matrix of a run that quarantines what its load discards (no Spark): on the
session method the load collects the discarded rows (observed while it writes) and the quarantine
insert follows it, under the run's intent. An in-memory Delta table and its quarantine die at
each statement in turn, as a process killed by SIGKILL would. Then:

- the table is as before, or carries the dead run's intent (never a load whose discarded rows
  are not in the quarantine without it);
- the next run repairs it first (RESTORE) and runs again: the table and the quarantine end
  exactly like a run never killed, every discarded row quarantined once.

CI's real SIGKILL between the load and the quarantine insert:
tests/functional/evolution/test_kill.py::TestKillMidRun{Delta,Iceberg}.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.core.config import EvolutionSettings
from dbt.adapters.spark_contracts.core.contract import ContractMode, SchemaContract
from dbt.adapters.spark_contracts.core.intent import INTENT_PROPERTY, commit_tag, find_intent
from dbt.adapters.spark_contracts.core.load_select import QUARANTINE_METRIC
from dbt.adapters.spark_contracts.core.parse import parse_type
from dbt.adapters.spark_contracts.core.plan import Policy
from dbt.adapters.spark_contracts.core.run_plan import RunInputs
from dbt.adapters.spark_contracts.run import (
    ModelRun,
    QuarantineLost,
    QuarantineMismatch,
    Runner,
    RunReport,
    RunUndone,
)
from tests.unit.test_fault_matrix import MODEL, TABLE, FakeDelta, Killed, Version, planned_run

DEPLOYED = parse_type("struct<id:bigint,n:bigint>")
COMPILED = parse_type("struct<id:bigint,n:string>")
CONTRACT = SchemaContract(data_type=ContractMode.DISCARD_ROW, quarantine=True)
SETTINGS = EvolutionSettings(Policy(), "ignore", False, False)
QUARANTINE = f"{TABLE}__quarantine"
DISCARDED = 3  # rows the load discards, and the rows it collects for the quarantine
META = ("_contract_reason", "_dbt_run_id")


class Rows:
    """The discarded rows an observation collected (in Spark: a Scala sequence of rows)."""

    def __init__(self, count: int) -> None:
        self.count = count


@dataclass
class FakeObservingDelta(FakeDelta):
    """The fake Delta table over a connection that observes; it also keeps the quarantine
    (a Delta table: each insert one atomic commit)."""

    quarantine: Optional[List[str]] = None  # run ids, a row each; None: no table yet
    # the quarantine's columns: it lacks the model's `n` until the run adds it
    quarantine_columns: Tuple[str, ...] = ("id", "_contract_reason", "_dbt_run_id")
    n_type: str = "string"  # the quarantine's `n`, once it has one
    views: Dict[str, int] = field(default_factory=dict)
    observed: Dict[str, Any] = field(default_factory=dict)

    def run(self, sql: str) -> Any:
        text = " ".join(sql.split())
        low = text.lower()
        if low.startswith("create or replace temporary view"):
            self._statement()
            name, body = re.match(r"create or replace temporary view (\S+) as (.*)$", low).groups()  # type: ignore[union-attr]
            assert not re.search(rf"\bfrom {re.escape(name)}\b", body), f"{name} reads itself"
            return None
        if low.startswith(f"insert into {TABLE} "):  # the load: the observation fills
            response = super().run(sql)
            self.observed = {
                "rows_discarded": DISCARDED,
                "values_discarded": 0,
                QUARANTINE_METRIC: Rows(DISCARDED),
            }
            return response
        if m := re.match(
            rf"delete from {re.escape(QUARANTINE)} where `_dbt_run_id` = '([^']+)'$", low
        ):
            self._statement()
            assert self.quarantine is not None, "a delete from a quarantine never created"
            self.quarantine = [r for r in self.quarantine if r != m.group(1)]
            return None
        if low.startswith(f"create table if not exists {QUARANTINE} using delta"):
            self._statement()
            if self.quarantine is None:
                self.quarantine, self.quarantine_columns = [], ("id", "n", *META)
            return None
        if m := re.match(rf"alter table {re.escape(QUARANTINE)} add columns \((.*)\)$", low):
            self._statement()
            added = tuple(c.strip().split()[0].strip("`") for c in m.group(1).split(","))
            self.quarantine_columns += added
            return None
        if m := re.match(
            rf"insert into {re.escape(QUARANTINE)} by name select \*, '([^']+)' as", low
        ):
            self._statement()
            assert self.quarantine is not None, "the quarantine insert before its table"
            if "n" not in self.quarantine_columns or self.n_type != "string":
                raise DbtDatabaseError("the rows do not fit the quarantine")  # Spark refuses
            view = re.search(r"from (\S+)$", low).group(1)  # type: ignore[union-attr]
            self.quarantine += [m.group(1)] * self.views[view]
            return None
        return super().run(sql)

    def can_observe(self) -> bool:
        return True

    def relation_schema(self, relation: str, describable: bool) -> Any:
        assert relation == QUARANTINE and self.quarantine is not None, relation
        fields = ", ".join(
            f"{c}:{'bigint' if c == 'id' else self.n_type if c == 'n' else 'string'}"
            for c in self.quarantine_columns
        )
        return parse_type(f"struct<{fields}>")

    def observe(self, view: str, source: str, metrics: Tuple[Tuple[str, str], ...]) -> Any:
        self._statement()
        assert QUARANTINE_METRIC in dict(metrics), metrics
        self.observed = {}
        return lambda: self.observed or None

    def rows_view(self, view: str, rows: Any) -> int:
        self._statement()
        self.views[view.lower()] = rows.count
        return int(rows.count)


def model_run(table: FakeObservingDelta, invocation: str) -> ModelRun:
    """What plan_model_run builds for this run (core/run_plan.plan_run, no Spark)."""
    inputs = RunInputs(
        TABLE,
        "t__dbt_tmp",
        invocation,
        "delta",
        "append",
        DEPLOYED,
        {},
        COMPILED,
        SETTINGS,
        contract=CONTRACT,
        observable=True,
    )
    run = planned_run(inputs, MODEL)
    assert run.quarantine_in_load and run.stage is None, run
    # dbt's relation cache, as adapter_run reads it: the quarantine's format once it exists
    return replace(run, quarantine_format="delta" if table.quarantine is not None else None)


def a_run(table: FakeObservingDelta, invocation: str, tmp_path: Path) -> None:
    runner = Runner(table, RunReport(), tmp_path)
    runner.tag_commits(commit_tag(invocation, MODEL))  # before the repair, as adapter_run does
    dead = find_intent(dict(table.current.properties))
    if dead is not None and dead.invocation_id != invocation:
        runner.repair(dead, MODEL)
    run = model_run(table, invocation)
    runner.execute(run, f"insert into {TABLE} select * from {run.source}")


def new_table(quarantined_before: bool = False) -> FakeObservingDelta:
    """The table; `quarantined_before`: its quarantine exists, from before the model had `n`."""
    table = FakeObservingDelta([Version(("id", "n"), (), "v1", "CREATE TABLE AS SELECT", None)])
    if quarantined_before:
        table.quarantine = ["inv-old"]
    return table


def finished(table: FakeObservingDelta) -> Tuple[Any, ...]:
    """The table as a reader sees it, and how many rows each run quarantined."""
    runs = [r for r in table.quarantine or [] if r != "inv-old"]
    return table.current.state(), sorted(runs.count(r) for r in set(runs))


def control(tmp_path: Path, quarantined_before: bool = False) -> Tuple[Any, ...]:
    table = new_table(quarantined_before)
    a_run(table, "inv-control", tmp_path)
    return finished(table)


BEFORE = (new_table().current.state(), [])
# `created`: the run creates the quarantine (9 statements); `evolved`: an existing quarantine
# predates the model's `n`: its insert is refused, the column added, the insert run again (10)
KILL_POINTS = [(False, k) for k in range(1, 10)] + [(True, k) for k in range(1, 11)]


@pytest.mark.parametrize(
    "quarantined_before, kill_at",
    KILL_POINTS,
    ids=[f"{'evolved' if q else 'created'}-{k}" for q, k in KILL_POINTS],
)
def test_a_quarantining_run_killed_at_any_statement_is_repaired(
    kill_at: int, quarantined_before: bool, tmp_path: Path
):
    table = new_table(quarantined_before)
    table.kill_at = kill_at
    with pytest.raises(Killed):
        a_run(table, "inv-dead", tmp_path)
    intent = INTENT_PROPERTY in dict(table.current.properties)
    after = control(tmp_path, quarantined_before)
    assert after[1] == [DISCARDED]
    seen = finished(table)
    # a load without its quarantined rows is never left without the intent
    assert seen in (BEFORE, after) or intent, (kill_at, table.versions, table.quarantine)
    if seen == after:
        return  # the run had finished its work (the kill stopped its cleanup)
    table.dead, table.kill_at = False, 0  # the next dbt process
    a_run(table, "inv-next", tmp_path)
    assert finished(table) == after, (kill_at, table.versions, table.quarantine)
    assert "n" in table.quarantine_columns


@pytest.mark.parametrize("quarantined_before", [False, True], ids=["created", "evolved"])
def test_the_matrix_covers_every_statement(quarantined_before: bool, tmp_path: Path):
    """The coerced view, the observed view, the contract's view, the quarantine's table (or
    its missing column), the intent, the load, the rows' view, the quarantine insert, the
    intent cleared."""
    table = new_table(quarantined_before)
    a_run(table, "inv-count", tmp_path)
    assert table.sent == max(k for q, k in KILL_POINTS if q == quarantined_before)
    old = ["inv-old"] if quarantined_before else []
    assert table.quarantine == old + ["inv-count"] * DISCARDED
    assert "n" in table.quarantine_columns


def test_a_load_whose_discarded_rows_went_unreported_is_taken_back(tmp_path: Path):
    """No observation (Spark never reported it): the discarded rows exist nowhere else, so the
    load is taken back (RESTORE) and the run fails naming why."""
    table = new_table()
    original = table.run

    def run_without_metrics(sql: str) -> Any:
        response = original(sql)
        if sql.lower().startswith(f"insert into {TABLE} "):
            table.observed = {}
        return response

    table.run = run_without_metrics  # type: ignore[method-assign]
    with pytest.raises(RunUndone) as raised:
        a_run(table, "inv-lost", tmp_path)
    assert isinstance(raised.value.cause, QuarantineLost)
    assert table.current.state()[:2] == BEFORE[0][:2] and table.current.rows == "v1"
    assert table.current.operation == "RESTORE" and not table.quarantine


def test_a_quarantine_that_cannot_hold_the_rows_takes_the_load_back(tmp_path: Path):
    """The quarantine holds `n` as bigint (an older model's); the model now outputs strings
    there, which it could not store: the load is taken back and the run fails naming both
    types (QuarantineMismatch)."""
    table = new_table(quarantined_before=True)
    table.quarantine_columns += ("n",)
    table.n_type = "bigint"
    with pytest.raises(RunUndone) as raised:
        a_run(table, "inv-mismatch", tmp_path)
    assert isinstance(raised.value.cause, QuarantineMismatch)
    assert "`n` is BIGINT there, the model outputs STRING" in str(raised.value)
    assert table.current.state()[:2] == BEFORE[0][:2] and table.current.rows == "v1"
    assert table.current.operation == "RESTORE" and table.quarantine == ["inv-old"]
