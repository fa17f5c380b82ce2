"""The scripted fault matrix of a run that quarantines what its contract discards (no Spark), on
the one recovery protocol (core/pending.py): the discarded rows go to the run's pending table
before the load, the load's commit carries the run's tag, the rows move into the quarantine
after it. An in-memory Delta table, its quarantine and the pending tables die at each statement
in turn, as a process killed by SIGKILL would. Then the next run (another invocation) settles
the dead run's pending table from the model table's own log and runs. At the end:

- every load in the table has its discarded rows in the quarantine exactly once, and no run
  whose load is not in the table has any there;
- no pending table is left;
- whatever happened to the quarantine meanwhile (dropped and recreated, replaced, emptied, its
  history gone) never takes a load back.

CI's real SIGKILL between the load and the move: tests/functional/evolution/test_kill.py.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.core.config import EvolutionSettings
from dbt.adapters.spark_contracts.core.contract import ContractMode, SchemaContract
from dbt.adapters.spark_contracts.core.intent import commit_tag
from dbt.adapters.spark_contracts.core.parse import parse_type
from dbt.adapters.spark_contracts.core.pending import is_pending_of
from dbt.adapters.spark_contracts.core.plan import Policy
from dbt.adapters.spark_contracts.core.run_plan import RunInputs
from dbt.adapters.spark_contracts.run import (
    ModelRun,
    QuarantineMismatch,
    QuarantinePending,
    Runner,
    RunReport,
)
from dbt.adapters.spark_contracts.run.commit_tag import CommitTags
from dbt.adapters.spark_contracts.run.lease import LEASE_ENV, ModelKey
from dbt.adapters.spark_contracts.run.model_run import DELTA_USER_METADATA
from tests.unit.test_fault_matrix import MODEL, TABLE, FakeDelta, Killed, Version, planned_run

DEPLOYED = parse_type("struct<id:bigint,n:bigint>")
COMPILED = parse_type("struct<id:bigint,n:string>")
CONTRACT = SchemaContract(data_type=ContractMode.DISCARD_ROW, quarantine=True)
SETTINGS = EvolutionSettings(Policy(), "ignore", False, False)
QUARANTINE = f"{TABLE}__quarantine"
DISCARDED = 3  # rows each load discards
BEATS = itertools.count(1)  # a live run's heartbeats


@dataclass
class Pending:
    rows: List[str]  # run ids, a row each
    properties: Dict[str, str]


@dataclass
class FakeTables(FakeDelta):
    """The model's Delta table (FakeDelta), its quarantine and the pending tables."""

    quarantine: Optional[List[str]] = None  # run ids, a row each; None: no table
    quarantine_n: str = "string"  # the quarantine's `n` (its type)
    pendings: Dict[str, Pending] = field(default_factory=dict)
    beating: set = field(default_factory=set)  # pending tables whose run is alive
    taken: Dict[str, str] = field(default_factory=dict)  # pending tables taken over, by whom
    discards: int = DISCARDED
    loads: List[str] = field(default_factory=list)  # the run ids of the loads, as committed

    def run(self, sql: str) -> Any:
        text = " ".join(sql.split())
        low = text.lower()
        if re.match(r"(create or replace temporary view|drop view if exists|uncache table)", low):
            self._statement()
            return None
        if m := re.match(
            r"create table (\S+__pending_\w+) using parquet tblproperties \((.*?)\) as ", text, re.I
        ):
            self._statement()
            pairs = self.holder(dict(re.findall(r"'([^']+)' = '([^']*)'", m.group(2))))
            # made at the model table's version then (read just before), never a clock
            assert pairs["dbt_spark_contracts.created_version"] == str(len(self.versions) - 1)
            run_id = re.search(r"'([^']+)' AS `_dbt_run_id`", text).group(1)  # type: ignore[union-attr]
            self.pendings[m.group(1).lower()] = Pending([run_id] * self.discards, pairs)
            return None
        if low.startswith(f"create table if not exists {QUARANTINE} using delta"):
            self._statement()
            if self.quarantine is None:
                self.quarantine, self.quarantine_n = [], "string"
            return None
        if m := re.match(
            rf"insert into {re.escape(QUARANTINE)} by name select \* from (\S+) "
            r"where `_contract_reason` is not null$",
            low,
        ):
            self._statement()
            if self.quarantine is None:
                raise DbtDatabaseError(f"table not found: {QUARANTINE}")
            self.quarantine += self.pendings[m.group(1)].rows
            return None
        if m := re.match(
            rf"merge into {re.escape(QUARANTINE)} q using \(select \* from (\S+) where "
            r"`_contract_reason` is not null\) p on q.`_dbt_run_id` = p.`_dbt_run_id` "
            r"when matched and q.`_dbt_run_id` is null then delete "
            r"when not matched then insert \(`id`, `n`, `_contract_reason`, `_dbt_run_id`\) "
            r"values \(p.`id`, p.`n`, p.`_contract_reason`, p.`_dbt_run_id`\)$",
            low,
        ):
            self._statement()
            if self.quarantine is None:
                raise DbtDatabaseError(f"table not found: {QUARANTINE}")
            rows = self.pendings[m.group(1)].rows
            if not set(rows) & set(self.quarantine):
                self.quarantine += rows
            return None
        if m := re.match(r"drop table if exists (\S+__pending_\w+)(?: purge)?$", low):
            self._statement()
            self.pendings.pop(m.group(1), None)
            return None
        if m := re.match(r"alter table (\S+__pending_\w+) set tblproperties \((.*)\)$", text, re.I):
            self._statement()
            pairs = re.findall(r"'([^']+)' = '([^']*)'", m.group(2))
            self.pendings[m.group(1).lower()].properties.update(pairs)
            self.taken.update((m.group(1).lower(), v) for k, v in pairs if k.endswith("taken_by"))
            return None
        if low.startswith(f"insert into {TABLE} "):
            response = super().run(sql)
            self.loads.append(str(self.conf.get(DELTA_USER_METADATA)).split(":")[1])
            return response
        if m := re.match(r"restore table db\.t to version as of (\d+)$", low):
            kept = self.versions[int(m.group(1))].rows.count("|insert")
            response = super().run(sql)
            self.loads = self.loads[:kept]
            return response
        return super().run(sql)

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        low = " ".join(sql.split()).lower()
        if low.startswith("select count_if("):
            self._statement()
            return [{"rows_discarded": self.discards, "values_discarded": 0}]
        if m := re.match(r"show tblproperties (\S+__pending_\w+)$", low):
            self._statement()
            if m.group(1) not in self.pendings:
                raise DbtDatabaseError(f"Table or view not found: {m.group(1)}")
            properties = self.pendings[m.group(1)].properties
            if m.group(1) in self.beating:  # its run is alive: each read sees a new beat
                properties["dbt_spark_contracts.heartbeat"] = str(next(BEATS))
            return [{"key": k, "value": v} for k, v in properties.items()]
        if m := re.match(r"show tables in db like '(t__quarantine__pending_\w+)'$", low):
            self._statement()
            return [{"tableName": m.group(1)}] if f"db.{m.group(1)}" in self.pendings else []
        if low == f"describe history {TABLE}":
            self._statement()
            return [
                {"version": i, "operation": v.operation, "userMetadata": v.tag}
                for i, v in enumerate(self.versions)
            ][::-1]
        if m := re.match(
            rf"select 1 as held from {re.escape(QUARANTINE)} where `_dbt_run_id` = '([^']+)' limit 1$",
            low,
        ):
            self._statement()
            return [{"held": 1}] if m.group(1) in (self.quarantine or []) else []
        return super().fetch(sql)

    def relation_schema(self, relation: str, describable: bool) -> Any:
        if relation.lower() in self.pendings:
            assert describable  # a parquet table
            return parse_type(
                "struct<id:bigint,n:string,_contract_reason:string,_dbt_run_id:string>"
            )
        assert relation == QUARANTINE and self.quarantine is not None, relation
        return parse_type(
            f"struct<id:bigint,n:{self.quarantine_n},_contract_reason:string,_dbt_run_id:string>"
        )


def model_run(table: FakeTables, invocation: str) -> ModelRun:
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
        observable=False,  # counted by a query over the pending table, as over Thrift
    )
    run = planned_run(inputs, MODEL)
    assert run.quarantine_pending and run.observed is None, run
    # dbt's relation cache, as adapter_run reads it: the quarantine's format once it exists
    return replace(run, quarantine_format="delta" if table.quarantine is not None else None)


def a_run(table: FakeTables, invocation: str, tmp_path: Path) -> Any:
    """As adapter_run.plan_model and execute_model_run do it: the repair step (other runs'
    pending tables, as dbt's relation cache lists them), the plan, the run."""
    runner = Runner(table, RunReport(), tmp_path)
    CommitTags().set(table, commit_tag(invocation, MODEL))
    others = [n for n in table.pendings if is_pending_of(n.split(".")[-1], "t__quarantine")]
    own = model_run(table, invocation).pending_table.lower()
    key = ModelKey(TABLE, invocation, "delta", MODEL)
    runner.settle_pending(key, QUARANTINE, [n for n in others if n != own])
    run = model_run(table, invocation)
    return runner.execute(run, f"insert into {TABLE} select * from {run.source}")


def new_table(quarantine: bool = True) -> FakeTables:
    table = FakeTables([Version(("id", "n"), (), "v1", "CREATE TABLE AS SELECT", None)])
    table.quarantine = [] if quarantine else None
    return table


def check(table: FakeTables, dropped: Tuple[str, ...] = ()) -> None:
    """Every load has its discarded rows in the quarantine once (but the runs whose rows went
    with a quarantine someone `dropped`); no other run has any; nothing is left pending."""
    assert not table.pendings, table.pendings
    held = sorted(table.quarantine or [])
    loads = [run for run in table.loads if run not in dropped]
    assert held == sorted(run for run in loads for _ in range(table.discards))


def scene(quarantine: bool, tmp_path: Path) -> FakeTables:
    """A finished run, then (`quarantine` False) its quarantine dropped by someone."""
    table = new_table()
    a_run(table, "inv-first", tmp_path)  # a finished run before: never taken back
    if not quarantine:
        table.quarantine = None
    table.sent = 0
    return table


def statements_of_a_run(tmp_path: Path, quarantine: bool) -> int:
    table = scene(quarantine, tmp_path)
    a_run(table, "inv-count", tmp_path)
    check(table, dropped=() if quarantine else ("inv-first",))
    return table.sent


# the statements of the dead run: with the quarantine there, and with it to be created again
STATEMENTS = {True: 7, False: 8}
KILL_POINTS = [(q, k) for q in (True, False) for k in range(1, STATEMENTS[q] + 1)]


@pytest.mark.parametrize(
    "quarantine, kill_at", KILL_POINTS, ids=[f"{'q' if q else 'new'}-{k}" for q, k in KILL_POINTS]
)
def test_a_quarantining_run_killed_at_any_statement_is_settled_by_the_next(
    quarantine: bool, kill_at: int, tmp_path: Path
):
    table = scene(quarantine, tmp_path)
    table.kill_at = kill_at
    with pytest.raises(Killed):
        a_run(table, "inv-dead", tmp_path)
    table.dead, table.kill_at = False, 0
    a_run(table, "inv-next", tmp_path)
    check(table, dropped=() if quarantine else ("inv-first",))
    assert table.loads[0] == "inv-first" and table.loads[-1] == "inv-next"


@pytest.mark.parametrize("quarantine", [True, False])
def test_the_matrix_covers_every_statement(quarantine: bool, tmp_path: Path):
    assert statements_of_a_run(tmp_path, quarantine) == STATEMENTS[quarantine]


@pytest.mark.parametrize("event", ["dropped", "recreated", "emptied", "history gone"])
def test_what_happens_to_the_quarantine_never_takes_a_load_back(event: str, tmp_path: Path):
    """The quarantine is people's: whatever they do to it, every load stays."""
    table = new_table()
    for run in ("inv-1", "inv-2", "inv-3"):
        a_run(table, run, tmp_path)
    if event == "dropped":
        table.quarantine = None
    elif event in ("recreated", "emptied"):
        table.quarantine = []
    # "history gone": the fake quarantine keeps no history, and nothing ever asks for it
    rows = table.current.rows
    a_run(table, "inv-4", tmp_path)
    assert table.current.rows.startswith(rows) and table.loads == [
        "inv-1",
        "inv-2",
        "inv-3",
        "inv-4",
    ]
    assert table.quarantine is not None and table.quarantine.count("inv-4") == DISCARDED


def test_a_live_runs_pending_table_is_left_to_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A run whose process still runs and renews its lease may be alive: another run of the
    model watches its pending table, sees it renewed, and leaves it alone (its own load goes
    ahead); once that run stops renewing it, a run watches it run out and settles it."""
    monkeypatch.setenv(LEASE_ENV, "0.5")
    table = new_table()
    table.alive = True  # the slow run's process runs on
    kill_at = STATEMENTS[True] - 1  # right after the load (the move, then the drop)
    table.kill_at = kill_at
    with pytest.raises(Killed):
        a_run(table, "inv-slow", tmp_path)
    assert table.loads == ["inv-slow"] and len(table.pendings) == 1
    table.beating = set(table.pendings)  # it renews its lease
    table.dead, table.kill_at, table.alive = False, 0, False
    a_run(table, "inv-other", tmp_path)
    assert len(table.pendings) == 1 and table.quarantine.count("inv-slow") == 0  # type: ignore[union-attr]
    table.beating = set()  # it stalls: its lease runs out while the next run watches
    a_run(table, "inv-later", tmp_path)
    check(table)
    assert "inv-later" in next(iter(table.taken.values()))


def test_a_quarantine_that_cannot_hold_the_rows_fails_the_run_before_its_load(tmp_path: Path):
    table = new_table()
    table.quarantine_n = "array<int>"  # nothing a string can go into
    with pytest.raises(QuarantineMismatch):
        a_run(table, "inv-1", tmp_path)
    assert table.loads == [] and not table.pendings and table.quarantine == []


def test_a_move_that_fails_after_the_load_keeps_the_rows_for_the_next_run(tmp_path: Path):
    table = new_table()
    real = table.run

    def quarantine_gone(sql: str) -> Any:
        if sql.lower().startswith(f"insert into {QUARANTINE} by name select * from"):
            table.quarantine = None  # dropped by someone between the check and the move
        return real(sql)

    table.run = quarantine_gone  # type: ignore[method-assign]
    with pytest.raises(QuarantinePending) as raised:
        a_run(table, "inv-1", tmp_path)
    assert "the load committed" in str(raised.value) and raised.value.pending in table.pendings
    assert table.loads == ["inv-1"]
    assert table.pendings[raised.value.pending].properties["dbt_spark_contracts.heartbeat"] == "0"
    table.run = real  # type: ignore[method-assign]
    table.quarantine = []  # recreated
    a_run(table, "inv-2", tmp_path)
    check(table)
