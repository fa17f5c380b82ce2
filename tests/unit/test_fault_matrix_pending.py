"""The scripted fault matrix of a run that quarantines what its contract discards (no Spark), on
the one recovery protocol (core/recovery/pending.py): the discarded rows go to the run's pending table
before the load, the load's commit carries the run's tag, the rows move into the quarantine
after it. An in-memory Delta table, its quarantine and the pending tables die at each statement
in turn, as a process killed by SIGKILL would. Then the next run (another invocation) settles
the dead run's pending table from the model table's own log and runs. At the end:

- every load in the table has its discarded rows in the quarantine exactly once, and no run
  whose load is not in the table has any there;
- no pending table is left;
- whatever happened to the quarantine meanwhile (dropped and recreated, replaced, emptied, its
  history gone) never takes a load back.

A microbatch model's batches follow the same protocol, each batch with its own pending table,
its rows carrying its commit tag (`_dbt_batch_tag`) beside the invocation id they share: two
batches of one invocation, the second killed at each of its statements, then the next
invocation; every committed batch's rows are in the quarantine once, none of a batch whose
load is not in the table.

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

from dbt.adapters.spark_contracts.connection.errors import ConnectionLostError
from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract
from dbt.adapters.spark_contracts.core.evolution.plan import Policy
from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs, plan_run
from dbt.adapters.spark_contracts.core.recovery.intent import commit_tag
from dbt.adapters.spark_contracts.core.recovery.pending import (
    BEAT_PROPERTY as BEAT,
)
from dbt.adapters.spark_contracts.core.recovery.pending import (
    CREATED_VERSION_PROPERTY,
    TAG_PROPERTY,
)
from dbt.adapters.spark_contracts.core.recovery.record import PENDING_PROPERTY
from dbt.adapters.spark_contracts.core.recovery.txn_fence import marker_sql
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings
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
from dbt.adapters.spark_contracts.run.repair import recovery_tables
from dbt.adapters.spark_contracts.run.settle import settle_pending
from tests.unit.test_fault_matrix import MODEL, TABLE, FakeDelta, Killed, Version

DEPLOYED = parse_type("struct<id:bigint,n:bigint>")
COMPILED = parse_type("struct<id:bigint,n:string>")
CONTRACT = SchemaContract(data_type=ContractMode.DISCARD_ROW, quarantine=True)
SETTINGS = EvolutionSettings(Policy(), "ignore", False, False)
QUARANTINE = f"{TABLE}__quarantine"
DISCARDED = 3  # rows each load discards
BEATS = itertools.count(1)  # a live run's heartbeats


@dataclass
class Pending:
    rows: List[str]  # a row each: its run id, and `#<commit tag>` for a batch's (row_key)
    properties: Dict[str, str]
    batch: bool = False  # a microbatch batch's: its rows carry `_dbt_batch_tag`


def row_key(tag: str) -> str:
    """Whose a quarantined row is, from the tag of the load it belongs to: the run's invocation
    id, and for a batch (a tag with a per-run part) the tag too."""
    _, invocation, *rest = tag.split(":")
    return f"{invocation}#{tag}" if len(rest) == 2 else invocation


def run_of(key: str) -> str:
    return key.split("#")[0]


@dataclass
class FakeTables(FakeDelta):
    """The model's Delta table (FakeDelta), its quarantine and the pending tables."""

    quarantine: Optional[List[str]] = None  # run ids, a row each; None: no table
    quarantine_n: str = "string"  # the quarantine's `n` (its type)
    quarantine_batch: bool = False  # the quarantine has `_dbt_batch_tag`
    pendings: Dict[str, Pending] = field(default_factory=dict)
    beating: set = field(default_factory=set)  # pending tables whose run is alive
    taken: Dict[str, str] = field(default_factory=dict)  # pending tables taken over, by whom
    discards: int = DISCARDED
    loads: List[str] = field(default_factory=list)  # the loads' `row_key`s, as committed
    quarantine_txn: Dict[str, int] = field(default_factory=dict)  # the quarantine's (Delta)

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
            name = m.group(1).lower()
            # a record names it first, with the model table's version then (read just before),
            # never a clock
            records = [p for p in self.leases.values() if p.get(PENDING_PROPERTY) == m.group(1)]
            assert len(records) == 1, (name, self.leases)
            assert records[0][CREATED_VERSION_PROPERTY] == str(len(self.versions) - 1)
            run_id = re.search(r"'([^']+)' AS `_dbt_run_id`", text).group(1)  # type: ignore[union-attr]
            batch = re.search(r"'([^']+)' AS `_dbt_batch_tag`", text)
            key = f"{run_id}#{batch.group(1)}" if batch else run_id
            assert key == row_key(str(self.conf.get(DELTA_USER_METADATA)))  # the run's own tag
            assert records[0][TAG_PROPERTY] == self.conf.get(DELTA_USER_METADATA)
            rows = [key] * self.discards
            # its own copy of the bookkeeping, its lease released: settled from it if its
            # record is ever gone
            copy = dict(re.findall(r"'([^']+)' = '([^']*)'", m.group(2)))
            assert copy[TAG_PROPERTY] == records[0][TAG_PROPERTY] and copy[BEAT] == "0", copy
            self.pendings[name] = Pending(rows, copy, batch is not None)
            return None
        if m := re.match(
            r"alter table (db\.t__dbt_lease_\w+) set tblproperties \((.*)\)$", text, re.I
        ):
            pairs = re.findall(r"'([^']+)' = '([^']*)'", m.group(2))
            self.taken.update((m.group(1).lower(), v) for k, v in pairs if k.endswith("taken_by"))
            return super().run(sql)
        if m := re.match(
            rf"create table if not exists {re.escape(QUARANTINE)} using delta as select \* from "
            r"\(?(?:select \* from )?(\S+?)\)? where false$",
            low,
        ):
            self._statement()
            if self.quarantine is None:  # shaped like the pending table's rows
                self.quarantine, self.quarantine_n = [], "string"
                self.quarantine_batch = self.pendings[m.group(1)].batch
            return None
        if low == f"alter table {QUARANTINE} add columns (`_dbt_batch_tag` string)":
            self._statement()
            assert self.quarantine is not None and not self.quarantine_batch
            self.quarantine_batch = True
            return None
        if m := re.match(
            rf"insert into {re.escape(QUARANTINE)} by name select \* from (\S+) "
            r"where `_contract_reason` is not null$",
            low,
        ):
            self._statement()
            if self.quarantine is None:
                raise DbtDatabaseError(f"table not found: {QUARANTINE}")
            if self.pendings[m.group(1)].batch and not self.quarantine_batch:
                raise DbtDatabaseError("cannot resolve `_dbt_batch_tag`")  # by name
            if self.goes_in(self.quarantine_txn):
                self.quarantine += self.pendings[m.group(1)].rows
            return None
        if low == marker_sql(QUARANTINE):  # a lease taker's empty marker on the quarantine
            self._statement()
            assert self.quarantine is not None
            self.goes_in(self.quarantine_txn)
            return None
        if m := re.match(
            rf"merge into {re.escape(QUARANTINE)} q using \(select \* from (\S+) where "
            r"`_contract_reason` is not null\) p on q.`_dbt_run_id` = p.`_dbt_run_id`"
            r" and q.`_dbt_run_id` = '([^']+)'"
            r"( and q.`_dbt_batch_tag` = p.`_dbt_batch_tag` and q.`_dbt_batch_tag` = '[^']+')? "
            r"when matched and q.`_dbt_run_id` is null then delete "
            r"when not matched then insert \(`id`, `n`, `_contract_reason`, `_dbt_run_id`"
            r"(?:, `_dbt_batch_tag`)?\) "
            r"values \(p.`id`, p.`n`, p.`_contract_reason`, p.`_dbt_run_id`"
            r"(?:, p.`_dbt_batch_tag`)?\)$",
            low,
        ):
            self._statement()
            if self.quarantine is None:
                raise DbtDatabaseError(f"table not found: {QUARANTINE}")
            pending = self.pendings[m.group(1)]
            # the run's id as a literal: the pending table's own run
            assert {run_of(r) for r in pending.rows} <= {m.group(2)}, (m.group(2), pending.rows)
            assert pending.batch == bool(m.group(3)) == ("`_dbt_batch_tag`)" in low)
            matches = set(pending.rows) if m.group(3) else {run_of(r) for r in pending.rows}
            held = set(self.quarantine) if m.group(3) else {run_of(r) for r in self.quarantine}
            if not matches & held and self.goes_in(self.quarantine_txn):
                self.quarantine += pending.rows
            return None
        if m := re.match(r"drop table if exists (\S+__pending_\w+)(?: purge)?$", low):
            self._statement()
            self.pendings.pop(m.group(1), None)
            return None
        if m := re.match(r"alter table (\S+__pending_\w+) set tblproperties \((.*)\)$", text, re.I):
            self._statement()  # a pending table without its record, taken over as its own lease
            pairs = re.findall(r"'([^']+)' = '([^']*)'", m.group(2))
            self.pendings[m.group(1).lower()].properties.update(pairs)
            self.taken.update((m.group(1).lower(), v) for k, v in pairs if k.endswith("taken_by"))
            return None
        if low.startswith(f"insert into {TABLE} "):
            before = len(self.versions)
            response = super().run(sql)
            if len(self.versions) > before:  # committed, not skipped (a fenced-off write)
                self.loads.append(row_key(str(self.conf.get(DELTA_USER_METADATA))))
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
            return [{"key": k, "value": v} for k, v in self.pendings[m.group(1)].properties.items()]
        if m := re.match(r"show tblproperties (db\.t__dbt_lease_\w+)$", low):
            if m.group(1) in self.beating:  # its run is alive: each read sees a new beat
                self.leases[m.group(1)]["dbt_spark_contracts.heartbeat"] = str(next(BEATS))
            return super().fetch(sql)
        if low == f"show tables in db like '{QUARANTINE.split('.')[1]}'":
            self._statement()
            return [{"tableName": QUARANTINE.split(".")[1]}] if self.quarantine is not None else []
        if m := re.match(r"show tables in db like '(t__quarantine__pending_\w+)'$", low):
            self._statement()
            return [{"tableName": m.group(1)}] if f"db.{m.group(1)}" in self.pendings else []
        if m := re.match(
            r"show tables in db like 't__dbt_lease_\*\|t__quarantine__pending_\*'$", low
        ):  # the repair step's one listing (run/repair.recovery_tables)
            self._statement()
            return [{"tableName": t.split(".", 1)[1]} for t in [*self.leases, *self.pendings]]
        if low == f"describe history {TABLE}":
            self._statement()
            return [
                {"version": i, "operation": v.operation, "userMetadata": v.tag}
                for i, v in enumerate(self.versions)
            ][::-1]
        if m := re.match(
            rf"select 1 as held from {re.escape(QUARANTINE)} where `_dbt_run_id` = '([^']+)'"
            r"(?: and `_dbt_batch_tag` = '([^']+)')? limit 1$",
            low,
        ):
            self._statement()
            if m.group(2):  # the batch's own rows
                held = f"{m.group(1)}#{m.group(2)}" in (self.quarantine or [])
            else:
                held = m.group(1) in {run_of(r) for r in self.quarantine or []}
            return [{"held": 1}] if held else []
        return super().fetch(sql)

    def relation_schema(self, relation: str, describable: bool) -> Any:
        if relation.lower() in self.pendings:
            assert describable  # a parquet table
            batch = ",_dbt_batch_tag:string" if self.pendings[relation.lower()].batch else ""
            return parse_type(
                f"struct<id:bigint,n:string,_contract_reason:string,_dbt_run_id:string{batch}>"
            )
        assert relation == QUARANTINE and self.quarantine is not None, relation
        batch = ",_dbt_batch_tag:string" if self.quarantine_batch else ""
        return parse_type(
            f"struct<id:bigint,n:{self.quarantine_n},_contract_reason:string,"
            f"_dbt_run_id:string{batch}>"
        )


def model_run(table: FakeTables, invocation: str, batch: str = "") -> ModelRun:
    """The planned run; `batch`: a microbatch batch's per-run part of its commit tag."""
    inputs = RunInputs(
        TABLE,
        "t__dbt_tmp",
        invocation,
        "delta",
        "microbatch" if batch else "append",
        DEPLOYED,
        {},
        COMPILED,
        SETTINGS,
        contract=CONTRACT,
        observable=False,  # counted by a query over the pending table, as over Thrift
        batch_tag=commit_tag(invocation, MODEL, batch) if batch else "",
        # the quarantine's memory says the last run discarded: the pending table at once (the
        # first pass, one statement that commits or fails whole, is test_quarantine_first_pass)
        discarded_last=True,
    )
    tag = commit_tag(invocation, MODEL, batch)
    run = ModelRun.planned(inputs, plan_run(inputs), MODEL, tag)
    assert run.quarantine_pending and run.observed is None, run
    # dbt's relation cache, as adapter_run reads it: the quarantine's format once it exists
    return replace(run, quarantine_format="delta" if table.quarantine is not None else None)


def a_run(table: FakeTables, invocation: str, tmp_path: Path, batch: str = "") -> Any:
    """As adapter_run.plan_model and execute_plan do it: the repair step (other runs' records
    and pending tables, as run/repair.recovery_tables lists them), the plan, the run.
    `batch`: one microbatch batch of the invocation (its tag's per-run part)."""
    runner = Runner(table, RunReport(), tmp_path)
    CommitTags().set(table, commit_tag(invocation, MODEL, batch))
    key = ModelKey(TABLE, invocation, "delta", MODEL)
    records, others = recovery_tables(table, key)
    settle_pending(runner.spark, runner.leases, runner.book, key, QUARANTINE, records, others)
    run = model_run(table, invocation, batch)
    return runner.execute(run, f"insert into {TABLE} select * from {run.source}")


def new_table(quarantine: bool = True) -> FakeTables:
    table = FakeTables([Version(("id", "n"), (), "v1", "CREATE TABLE AS SELECT", None)])
    table.quarantine = [] if quarantine else None
    return table


def check(table: FakeTables, dropped: Tuple[str, ...] = ()) -> None:
    """Every load has its discarded rows in the quarantine once (but the runs whose rows went
    with a quarantine someone `dropped`); no other run has any; nothing is left pending, and no
    run record."""
    assert not table.pendings, table.pendings
    assert not table.leases, table.leases
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


# the statements of the dead run (the repair step's listing first; its record made before its pending
# table, dropped after it): with the quarantine there, and with it to be created again
STATEMENTS = {True: 10, False: 11}
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
    kill_at = STATEMENTS[True] - 2  # right after the load: the move (then two drops)
    table.kill_at = kill_at
    with pytest.raises(Killed):
        a_run(table, "inv-slow", tmp_path)
    assert table.loads == ["inv-slow"] and len(table.pendings) == 1
    table.beating = set(table.leases)  # it renews its lease (its record's)
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
    (record,) = table.leases.values()  # the record naming it, released
    assert record[PENDING_PROPERTY] == raised.value.pending
    assert record["dbt_spark_contracts.heartbeat"] == "0"
    table.run = real  # type: ignore[method-assign]
    table.quarantine = []  # recreated
    a_run(table, "inv-2", tmp_path)
    check(table)


# -- microbatch batches: one pending table each, told apart by their commit tag


def batch_scene(tmp_path: Path, quarantine: bool = True) -> FakeTables:
    """A microbatch model: a finished invocation of one batch, then the first batch of the
    next invocation, finished; then (`quarantine` False) the quarantine dropped by someone."""
    table = new_table(quarantine=False)
    a_run(table, "inv-first", tmp_path, "b1")
    a_run(table, "inv-dead", tmp_path, "b1")
    if not quarantine:
        table.quarantine = None
    table.sent = 0
    return table


def gone_with_the_quarantine(quarantine: bool) -> Tuple[str, ...]:
    """The batches whose rows went with a quarantine someone dropped."""
    batches = (("inv-first", "b1"), ("inv-dead", "b1"))
    return () if quarantine else tuple(row_key(commit_tag(i, MODEL, b)) for i, b in batches)


def statements_of_a_batch(tmp_path: Path, quarantine: bool) -> int:
    table = batch_scene(tmp_path, quarantine)
    a_run(table, "inv-dead", tmp_path, "b2")
    check(table, gone_with_the_quarantine(quarantine))
    return table.sent


# the statements of the invocation's second batch: the quarantine there (its first batch's rows
# in it), or to be created again
BATCH_STATEMENTS = {True: 10, False: 11}
BATCH_KILL_POINTS = [(q, k) for q in (True, False) for k in range(1, BATCH_STATEMENTS[q] + 1)]


@pytest.mark.parametrize("quarantine", [True, False])
def test_the_batch_matrix_covers_every_statement(quarantine: bool, tmp_path: Path):
    assert statements_of_a_batch(tmp_path, quarantine) == BATCH_STATEMENTS[quarantine]


@pytest.mark.parametrize(
    "quarantine, kill_at",
    BATCH_KILL_POINTS,
    ids=[f"{'q' if q else 'new'}-{k}" for q, k in BATCH_KILL_POINTS],
)
def test_a_batch_killed_at_any_statement_is_settled_by_the_next_invocation(
    quarantine: bool, kill_at: int, tmp_path: Path
):
    """The second batch of an invocation dies at each of its statements: the next invocation
    moves each committed batch's discarded rows once (the first batch's are in the quarantine
    already, under the same run id), none of a batch whose load is not in the table, and
    leaves nothing pending; the first batch's rows are never taken out."""
    table = batch_scene(tmp_path, quarantine)
    first_of_dead = row_key(commit_tag("inv-dead", MODEL, "b1"))
    held = DISCARDED if quarantine else 0
    assert (table.quarantine or []).count(first_of_dead) == held
    table.kill_at = kill_at
    with pytest.raises(Killed):
        a_run(table, "inv-dead", tmp_path, "b2")
    table.dead, table.kill_at = False, 0
    a_run(table, "inv-next", tmp_path, "b1")
    a_run(table, "inv-next", tmp_path, "b2")
    check(table, gone_with_the_quarantine(quarantine))
    assert table.quarantine is not None and table.quarantine.count(first_of_dead) == held
    assert table.loads[-2:] == [row_key(commit_tag("inv-next", MODEL, b)) for b in ("b1", "b2")]
    # what users see in `_dbt_run_id` is the invocation: both its batches' rows carry it
    assert {run_of(r) for r in table.quarantine} <= {"inv-first", "inv-dead", "inv-next"}


def load_refused(table: FakeTables, message: str) -> Any:
    """From here on Spark refuses every load into the model's table (`message`); returns the
    table's own `run`, to put back."""
    real = table.run

    def refused(sql: str) -> Any:
        if sql.lower().startswith(f"insert into {TABLE} "):
            raise DbtDatabaseError(message)
        return real(sql)

    table.run = refused  # type: ignore[method-assign]
    return real


def test_a_failed_batch_takes_no_other_batchs_rows_out(tmp_path: Path):
    """A batch that fails in-process (its load refused) drops its own pending table and
    leaves the quarantined rows of its invocation's earlier batches as they are."""
    table = new_table()
    a_run(table, "inv-1", tmp_path, "b1")
    real = load_refused(table, "the load failed")
    with pytest.raises(DbtDatabaseError):
        a_run(table, "inv-1", tmp_path, "b2")
    table.run = real  # type: ignore[method-assign]
    assert not table.pendings
    assert table.quarantine == [row_key(commit_tag("inv-1", MODEL, "b1"))] * DISCARDED
    a_run(table, "inv-1", tmp_path, "b3")
    check(table)


@pytest.mark.parametrize("loaded", [True, False])
def test_a_pending_table_left_without_its_record_is_settled_from_its_own_copy(
    loaded: bool, tmp_path: Path
):
    """A run's record can go while its pending table stays (a server finished the CTAS after
    its client died and a settler dropped the record; a swap's recovery dropped it): the
    pending table's own copy of the bookkeeping, its lease released, settles it. Its load in
    the table: its rows moved once; not there and its process gone: dropped."""
    table = new_table()
    table.kill_at = STATEMENTS[True] - 2 if loaded else 5  # after the load / before it
    with pytest.raises(Killed):
        a_run(table, "inv-dead", tmp_path)
    assert len(table.pendings) == 1 and (table.loads == ["inv-dead"]) is loaded
    table.leases.clear()  # its record gone
    table.dead, table.kill_at = False, 0
    a_run(table, "inv-next", tmp_path)
    check(table)
    assert table.quarantine is not None
    assert table.quarantine.count("inv-dead") == (DISCARDED if loaded else 0)


class LostAnswer:
    """The model's load reaches the server, whose answer never reaches the run (the connection
    broke, a timeout's cancel came too late): the server may still commit it, `lands()`. The
    run's own marker (`marker`: what it meets) fences it off where it comes first."""

    def __init__(self, table: FakeTables, marker: str = "sent") -> None:
        self.table, self.real, self.marker = table, table.run, marker
        self.conf: Dict[str, Any] = {}
        self.sql = ""
        table.run = self.run  # type: ignore[method-assign]

    def run(self, sql: str) -> Any:
        low = " ".join(sql.split()).lower()
        if low.startswith(f"insert into {TABLE} ") and not self.sql:
            self.conf, self.sql = dict(self.table.conf), sql  # what the server still holds
            raise ConnectionLostError("read timed out")
        if low == marker_sql(TABLE) and self.marker != "sent":
            if self.marker == "lost":
                raise ConnectionLostError("connection refused")
            self.lands()  # "after the load": the server commits it before the marker
        return self.real(sql)

    def lands(self) -> None:
        conf, self.table.conf = self.table.conf, self.conf
        try:
            self.real(self.sql)
        finally:
            self.table.conf = conf


@pytest.mark.parametrize("lands", [True, False], ids=["lands-first", "never-lands"])
def test_a_load_spark_gave_no_answer_for_is_fenced_off_by_its_own_run(lands: bool, tmp_path: Path):
    """Delta: the failed run commits its own marker under its writes' transaction id, then
    reads the log, which is final for its load: in it (it committed first), the rows are moved;
    not in it, the pending table is dropped, and the load that arrives later is skipped."""
    table = new_table()
    lost = LostAnswer(table, "after the load" if lands else "sent")
    with pytest.raises(ConnectionLostError):
        a_run(table, "inv-lost", tmp_path)
    check(table)
    assert table.loads == (["inv-lost"] if lands else [])
    lost.lands()  # the load's commit, now or again: skipped inside its commit
    assert table.loads == (["inv-lost"] if lands else [])
    a_run(table, "inv-next", tmp_path)
    check(table)


@pytest.mark.parametrize("lands", [True, False], ids=["lands-late", "never-lands"])
def test_a_load_no_one_can_fence_off_yet_keeps_its_rows_until_the_log_decides(
    lands: bool, tmp_path: Path
):
    """The answer lost, and the run's own marker too (the connection is down): the load may
    still commit, so the run keeps its pending table (a drop would lose the discarded rows of a
    load that commits later) under its record, not released (its load may still come): the
    next run takes that lease over as a dead run's, commits its marker, and settles the table
    from its log: moved once if the load landed, else dropped."""
    table = new_table()
    lost = LostAnswer(table, "lost")
    with pytest.raises(ConnectionLostError):
        a_run(table, "inv-lost", tmp_path)
    assert table.loads == [] and len(table.pendings) == 1, table.pendings  # kept, not dropped
    (record,) = table.leases.values()  # the record naming it, left as a dead run's
    assert record[PENDING_PROPERTY] in table.pendings
    assert record["dbt_spark_contracts.heartbeat"] != "0", record  # not released
    lost.marker = "sent"
    if lands:
        lost.lands()
        assert table.loads == ["inv-lost"]
    a_run(table, "inv-next", tmp_path)
    check(table)
    assert table.quarantine is not None
    assert table.quarantine.count("inv-lost") == (DISCARDED if lands else 0)
    lost.lands()  # (again) after the next run's marker: skipped inside its commit
    assert table.loads == (["inv-lost", "inv-next"] if lands else ["inv-next"])


def test_a_load_spark_refused_drops_its_pending_rows_at_once(tmp_path: Path):
    """A load Spark answered with an error is over: the run drops its own pending table."""
    table = new_table()
    load_refused(table, "[DELTA_CONCURRENT_APPEND] refused")
    with pytest.raises(DbtDatabaseError):
        a_run(table, "inv-refused", tmp_path)
    assert table.loads == [] and not table.pendings and not table.leases
