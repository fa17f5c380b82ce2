"""A scripted fault matrix (no Spark): the `Runner` carries a multi-step Delta run out (the
column-defaults feature, ADD COLUMNS, SET DEFAULT, one UPDATE per backfill, the load, the intent
cleared) against an in-memory Delta table that dies at each statement in turn, as a process
killed by SIGKILL would: the statement and everything after it never run, no cleanup runs. Then:

- the table is as before, as after, or carries the dead run's intent (never a half-applied plan
  without it);
- the next run repairs it first (RESTORE to the intent's version) and carries the plan out again:
  the table ends exactly like a run that was never killed;
- with another writer's commit after the kill, the repair refuses (`ForeignCommits`) and that
  commit stays.

CI's real SIGKILLs (tests/functional/evolution/test_kill.py) cover one kill per format on Spark.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from dbt.adapters.spark_contracts.connection.errors import ConnectionLostError
from dbt.adapters.spark_contracts.core.evolution.plan import ColumnEvolution, Policy
from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs, plan_run
from dbt.adapters.spark_contracts.core.recovery.intent import INTENT_PROPERTY, commit_tag, is_marker
from dbt.adapters.spark_contracts.core.recovery.pending import Application
from dbt.adapters.spark_contracts.core.recovery.txn_fence import TXN_APP_ID, TXN_VERSION, marker_sql
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings
from dbt.adapters.spark_contracts.run import (
    DELTA_USER_METADATA,
    ForeignCommits,
    LeaseLost,
    ModelRun,
    Runner,
    RunReport,
    RunUndone,
    StepUnanswered,
)
from dbt.adapters.spark_contracts.run.commit_tag import CommitTags
from dbt.adapters.spark_contracts.run.lease import ModelKey
from dbt.adapters.spark_contracts.run.repair import repair

TABLE = "db.t"
MODEL = "model.p.t"
DEPLOYED = parse_type("struct<id:bigint>")
COMPILED = parse_type("struct<id:bigint,note:string,twice:bigint>")
POLICY = Policy(
    columns={"note": ColumnEvolution(default="'n'"), "twice": ColumnEvolution(backfill="id * 10")}
)
SETTINGS = EvolutionSettings(POLICY, "ignore", True, False)


class Killed(BaseException):
    """The process died (SIGKILL): nothing after this runs, not even `finally` blocks' SQL."""


@dataclass(frozen=True)
class Version:
    columns: Tuple[str, ...]
    properties: Tuple[Tuple[str, str], ...]
    rows: str  # the data, as the sequence of data commits that made it
    operation: str
    tag: Optional[str]

    def state(self) -> Tuple[Any, ...]:
        """What a reader sees: columns, properties, rows (not who committed)."""
        return self.columns, self.properties, self.rows


ENDED_PID = 4_194_999  # above Linux's highest pid: no process has it


@dataclass
class FakeDelta:
    """One Delta table's log, spoken to in the SQL the Runner sends; any other statement fails
    the test (nothing is accepted silently). `kill_at`: the statement (1-based) that never runs."""

    versions: List[Version]
    conf: Dict[str, Optional[str]] = field(default_factory=dict)
    kill_at: int = 0
    sent: int = 0
    dead: bool = False
    stages: set = field(default_factory=set)
    leases: Dict[str, Dict[str, str]] = field(default_factory=dict)  # lease tables' properties
    alive: bool = False  # leases made from here on name this (running) process as their holder
    # Delta's idempotent writes: each application id's highest version committed (`txn`)
    txn: Dict[str, int] = field(default_factory=dict)

    def holder(self, pairs: Dict[str, str]) -> Dict[str, str]:
        """Each run is a dbt process of its own: once killed (or ended), its process is gone,
        as its lease's client says; `alive` keeps the real (running) process."""
        if "dbt_spark_contracts.client" in pairs and not self.alive:
            pairs["dbt_spark_contracts.client"] = f"{socket.gethostname()}/{ENDED_PID}"
        return pairs

    @property
    def current(self) -> Version:
        return self.versions[-1]

    def _commit(self, operation: str, **changes: Any) -> None:
        tag = self.conf.get(DELTA_USER_METADATA)
        self.versions.append(replace(self.current, operation=operation, tag=tag, **changes))

    def _write(self, operation: str, **changes: Any) -> None:
        """A data write to the table, as Delta's idempotent writes take it (`goes_in`)."""
        if self.goes_in(self.txn):
            self._commit(operation, **changes)

    def goes_in(self, txn: Dict[str, int]) -> bool:
        """A data write to a Delta table whose log holds `txn` (application ids' versions):
        with a transaction id (both settings, or neither: else refused) whose version the log
        holds already (or a higher one), skipped: it returns, and nothing is committed."""
        app, version = self.conf.get(TXN_APP_ID), self.conf.get(TXN_VERSION)
        if (app is None) != (version is None):
            raise RuntimeError("DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS")
        if app is not None and version is not None:
            if txn.get(app, -1) >= int(version):
                return False
            txn[app] = int(version)
        return True

    def _properties(self, update: Dict[str, Optional[str]]) -> Tuple[Tuple[str, str], ...]:
        props = dict(self.current.properties)
        for key, value in update.items():
            if value is None:
                props.pop(key, None)
            else:
                props[key] = value
        return tuple(sorted(props.items()))

    def _statement(self) -> None:
        if self.dead:
            raise Killed()
        self.sent += 1
        if self.sent == self.kill_at:
            self.dead = True
            raise Killed()

    # -- runs.Spark
    def deployed(self, table: str, describable: bool) -> Tuple[Any, Dict[str, str]]:
        """The table's schema (every column bigint, as the runs here plan it) and properties: a
        catalog read, which changes nothing and is not counted as a statement."""
        assert table == TABLE, table
        columns = ",".join(f"{c}:bigint" for c in self.current.columns)
        return parse_type(f"struct<{columns}>"), dict(self.current.properties)

    def run(self, sql: str) -> Any:
        self._statement()
        text = " ".join(sql.split())
        low = text.lower()
        if m := re.match(r"alter table db\.t set tblproperties \((.*)\)$", text, re.I):
            pairs = re.findall(r"'([^']+)' = '((?:[^'\\]|\\.)*)'", m.group(1))
            update = {k: v.replace("\\'", "'").replace("\\\\", "\\") for k, v in pairs}
            return self._commit("SET TBLPROPERTIES", properties=self._properties(update))
        if low.startswith("alter table db.t unset tblproperties if exists"):
            key = re.search(r"\('([^']+)'\)", text).group(1)  # type: ignore[union-attr]
            return self._commit("UNSET TBLPROPERTIES", properties=self._properties({key: None}))
        if m := re.match(r"alter table db\.t add columns \((.*)\)$", text, re.I):
            names = tuple(c.strip().split()[0].strip("`") for c in m.group(1).split(","))
            return self._commit("ADD COLUMNS", columns=self.current.columns + names)
        if re.match(r"alter table db\.t alter column `\w+` set default", low):
            return self._commit("CHANGE COLUMN")
        if m := re.match(r"update db\.t set `(\w+)` = (.*)$", text, re.I):
            return self._write("UPDATE", rows=f"{self.current.rows}|update {m.group(1)}")
        if low == marker_sql(TABLE):  # a lease taker's empty marker: no row changes
            return self._write("MERGE")
        if low.startswith("merge into db.t"):
            return self._write("MERGE", rows=f"{self.current.rows}|merge")
        if low.startswith("insert into db.t "):
            return self._write("WRITE", rows=f"{self.current.rows}|insert {text}")
        if m := re.match(r"restore table db\.t to version as of (\d+)$", low):
            old = self.versions[int(m.group(1))]
            return self._commit(
                "RESTORE", columns=old.columns, properties=old.properties, rows=old.rows
            )
        if m := re.match(
            r"create table if not exists (db\.t__dbt_(?:lease|settle)_\w+) \(lease int\) "
            r"using \w+ tblproperties \((.*)\)$",
            text,
            re.I,
        ):  # the run's lease (its heartbeat thread never beats here)
            pairs = dict(re.findall(r"'([^']+)' = '([^']*)'", m.group(2)))
            self.leases.setdefault(m.group(1).lower(), self.holder(pairs))
            return None
        if m := re.match(
            r"alter table (db\.t__dbt_(?:lease|settle)_\w+) set tblproperties \((.*)\)$", text, re.I
        ):
            self.leases[m.group(1).lower()].update(re.findall(r"'([^']+)' = '([^']*)'", m.group(2)))
            return None
        if m := re.match(r"drop table if exists (\S+)(?: purge)?$", low):
            self.stages.discard(m.group(1))
            self.leases.pop(m.group(1), None)
            return None
        if m := re.match(r"create table (db\.t__dbt_stage_\w+) using parquet as select", low):
            self.stages.add(m.group(1))
            return None
        raise AssertionError(f"the fake Delta table does not know: {sql}")

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        self._statement()
        low = " ".join(sql.split()).lower()
        # a run's own lease, or the repair step's listing (its pending tables: none here)
        if m := re.match(
            r"show tables in db like '(t__dbt_(?:lease|settle)_\w*)(\*?)"
            r"(?:\|t__quarantine__pending_\*)?'$",
            low,
        ):
            name, prefix = m.groups()
            return [
                {"tableName": t.split(".", 1)[1]}
                for t in self.leases
                if (t.split(".", 1)[1].startswith(name) if prefix else t == f"db.{name}")
            ]
        if m := re.match(r"show tblproperties (db\.t__dbt_(?:lease|settle)_\w+)$", low):
            if m.group(1) not in self.leases:
                raise RuntimeError(f"Table or view not found: {m.group(1)}")
            return [{"key": k, "value": v} for k, v in self.leases[m.group(1)].items()]
        if low == "show tables in db like 't'":  # the model table is there
            return [{"tableName": "t"}]
        if low == "show tblproperties db.t":
            return [{"key": k, "value": v} for k, v in self.current.properties]
        if low.startswith("describe history db.t"):
            rows = [
                {"version": i, "operation": v.operation, "userMetadata": v.tag}
                for i, v in enumerate(self.versions)
            ][::-1]
            return rows[:1] if low.endswith("limit 1") else rows
        raise AssertionError(f"the fake Delta table cannot answer: {sql}")

    def set_conf(self, key: str, value: Optional[str]) -> None:
        if self.dead:
            raise Killed()
        self.conf[key] = value

    def leave_session(self, carried: Any = ()) -> bool:
        """One session, whose failed statement is over (as the embedded one's)."""
        return False

    def get_conf(self, key: str) -> Optional[str]:
        return self.conf.get(key)

    def runs_here(self) -> bool:
        """The embedded session: a statement is over once its call returned."""
        return True

    def application(self) -> Application:
        """An embedded session in a process that has ended (SIGKILL here is simulated): the
        dead run's statements can no longer run."""
        return Application(f"session://{socket.gethostname()}/{ENDED_PID}", "local-fake")

    def can_observe(self) -> bool:
        return False


def model_run(table: FakeDelta, invocation: str) -> ModelRun:
    """What the adapter's plan_model plans for this run (core/materialization/run_plan.plan_run, no Spark)."""
    deployed = parse_type("struct<" + ",".join(f"{c}:bigint" for c in table.current.columns) + ">")
    inputs = RunInputs(
        TABLE, "t__dbt_tmp", invocation, "delta", "merge", deployed, {}, COMPILED, SETTINGS
    )
    return planned_run(inputs, MODEL)


def planned_run(inputs: RunInputs, unique_id: str) -> ModelRun:
    """The `ModelRun` the adapter's plan_model builds from `inputs` (core/materialization/run_plan.plan_run, no Spark)."""
    return ModelRun.planned(
        inputs, plan_run(inputs), unique_id, commit_tag(inputs.invocation_id, unique_id)
    )


def a_run(
    table: FakeDelta, invocation: str, tmp_path: Path, runner: Optional[Runner] = None
) -> None:
    """One dbt run of the model: the repair step first (run/repair.py: a dead run's record),
    then plan and execute."""
    runner = runner or Runner(table, RunReport(), tmp_path)
    CommitTags().set(table, commit_tag(invocation, MODEL))  # before the repair, as adapter_run does
    key = ModelKey(TABLE, invocation, "delta", MODEL)
    deployed = table.deployed(TABLE, True)
    repair(table, runner, key, deployed, lambda: table.deployed(TABLE, True))
    run = model_run(table, invocation)
    runner.execute(run, f"merge into {TABLE} using {run.source} on false")


def new_table() -> FakeDelta:
    return FakeDelta([Version(("id",), (), "v1", "CREATE TABLE AS SELECT", None)])


def control(tmp_path: Path) -> Tuple[Any, ...]:
    table = new_table()
    a_run(table, "inv-control", tmp_path)
    return table.current.state()


def has_intent(table: FakeDelta) -> bool:
    """A run's record that carries its intent is there (core/recovery/record.py)."""
    return any(INTENT_PROPERTY in props for props in table.leases.values())


def statements_of_a_run(tmp_path: Path) -> int:
    table = new_table()
    a_run(table, "inv-count", tmp_path)
    return table.sent


BEFORE = new_table().current.state()
KILL_POINTS = range(1, 26)  # every statement of the run (checked below)


@pytest.mark.parametrize("kill_at", KILL_POINTS)
def test_a_run_killed_at_any_statement_is_repaired_by_the_next(kill_at: int, tmp_path: Path):
    table = new_table()
    table.kill_at = kill_at
    with pytest.raises(Killed):
        a_run(table, "inv-dead", tmp_path)
    intent = has_intent(table)
    assert INTENT_PROPERTY not in dict(table.current.properties)  # the table carries none
    after = control(tmp_path)
    assert table.current.state() in (BEFORE, after) or intent, (kill_at, table.versions)
    if table.current.state() == after:
        return  # the run had finished its work (the kill stopped its cleanup): nothing to repair
    table.dead, table.kill_at = False, 0  # the next dbt process
    a_run(table, "inv-next", tmp_path)
    assert table.current.state() == after, (kill_at, table.versions)
    if intent:  # the repair drops the dead run's stage (a kill before the intent leaves it)
        assert not table.stages, table.stages


def test_the_matrix_covers_every_statement(tmp_path: Path):
    """The repair step's listing of the model's run records; stage (drop, create); the run's record (its lease) made,
    other runs' records read, the table's version read, the intent written into the record; then each step (feature,
    ADD COLUMNS, SET DEFAULT, two UPDATEs), the version it produced read and the record told; MERGE; the record
    dropped; the stage dropped: a kill point per statement (the fence reads nothing while the lease is fresh)."""
    assert statements_of_a_run(tmp_path) == max(KILL_POINTS)


# after the feature committed, before the second UPDATE, before the record is dropped
@pytest.mark.parametrize("kill_at", [11, 20, 24])
def test_another_writers_commit_after_the_kill_is_never_undone(kill_at: int, tmp_path: Path):
    table = new_table()
    table.kill_at = kill_at
    with pytest.raises(Killed):
        a_run(table, "inv-dead", tmp_path)
    assert has_intent(table), table.versions
    table.dead, table.kill_at = False, 0
    table.conf[DELTA_USER_METADATA] = "streaming-job"
    table.run("insert into db.t values (99)")  # the other writer
    table.conf.clear()
    with pytest.raises(ForeignCommits):
        a_run(table, "inv-next", tmp_path)
    # the other writer's commit stays, the last but the taker's empty marker
    *_, foreign, marker = table.versions
    assert foreign.operation == "WRITE" and foreign.tag == "streaming-job"
    assert is_marker(marker.tag) and marker.state() == foreign.state()


def test_a_run_that_repaired_first_and_then_fails_keeps_the_repair(tmp_path: Path):
    """The repair's RESTORE carries the repairing run's tag; when that run then fails, its undo
    goes back to the version before its own intent (the repaired table), not before the
    repair (the dead run's half-done table)."""
    table = new_table()
    table.kill_at = 14  # the dead run: its record, feature, ADD COLUMNS on the table
    with pytest.raises(Killed):
        a_run(table, "inv-dead", tmp_path)
    assert has_intent(table)
    table.dead, table.kill_at = False, 0
    original = table.run

    def failing_load(sql: str) -> Any:
        if sql.lower().startswith("merge into") and sql.lower() != marker_sql(TABLE):
            table._statement()
            raise RuntimeError("the load failed")
        return original(sql)

    table.run = failing_load  # type: ignore[method-assign]
    with pytest.raises(RunUndone):
        a_run(table, "inv-next", tmp_path)
    assert table.current.state() == BEFORE, table.versions


def test_a_write_sent_after_its_lease_was_taken_over_is_skipped_inside_its_commit(tmp_path: Path):
    """The window the fence before a step leaves open: run A passes its fence before its load,
    then stalls (past its lease); run B takes A's lease over, commits its marker under A's
    transaction id, repairs the table and carries the plan out itself; then A's load reaches
    the table. Delta skips it (A's version is below the marker's), and A's fence after the
    write finds the lease taken over: `LeaseLost`, no success, and the table ends as B left it
    (nothing of A's after the marker). Without the transaction id A's load would commit a
    second merge over B's run."""
    table = new_table()
    runner_a = Runner(table, RunReport(), tmp_path)
    original, stalled = table.run, []

    def stall_before_the_load(sql: str) -> Any:
        own = ":inv-a:" in str(table.conf.get(DELTA_USER_METADATA))
        load = sql.startswith(f"merge into {TABLE} using") and sql != marker_sql(TABLE)
        if load and own and not stalled:
            stalled.append(sql)  # A stalls here, its fence passed; its lease runs out
            assert runner_a.leases.held is not None
            runner_a.leases.held.last -= 3600
            a_conf, table.conf = table.conf, {}  # B: a dbt process (a session) of its own
            a_run(table, "inv-b", tmp_path)
            table.conf = a_conf
        return original(sql)

    table.run = stall_before_the_load  # type: ignore[method-assign]
    with pytest.raises(LeaseLost):
        a_run(table, "inv-a", tmp_path, runner_a)
    assert stalled, "A's load was never sent"
    assert table.current.rows.count("|merge") == 1, table.current.rows  # B's load, once
    assert table.current.state() == control(tmp_path)
    marker = next(i for i, v in enumerate(table.versions) if is_marker(v.tag))
    assert table.versions[marker].tag.endswith("t__dbt_lease_inva")  # A's record's, by B
    assert not [v for v in table.versions[marker:] if v.tag and ":inv-a:" in v.tag]


UNANSWERED = {  # the statement Spark gives no answer for, by its start; fenced: carries the id
    "load": (f"merge into {TABLE} using", True),
    "backfill": (f"update {TABLE} set", True),
    "alter": (f"alter table {TABLE} add columns", False),
}


@pytest.mark.parametrize("lands", [True, False], ids=["lands-late", "never-lands"])
@pytest.mark.parametrize(  # an ALTER carries no id: no marker is sent for it, either way
    "statement, marker",
    [
        (s, m)
        for s, (_, fenced) in UNANSWERED.items()
        for m in (["sent", "lost"] if fenced else ["none"])
    ],
)
def test_a_statement_spark_gave_no_answer_for_is_never_overtaken_by_a_restore(
    statement: str, lands: bool, marker: str, tmp_path: Path
):
    """The run changed the table in steps, then one of its statements to the table (its load, a
    backfill UPDATE, an ALTER) got no answer (a lost connection): the server may still commit
    it. A write of rows carries the lease's transaction id: the run fences it off with its own
    marker, then restores (a late write is skipped inside its commit). Where that marker cannot
    be sent either, or the statement carries no id (an ALTER: Delta takes none), it puts
    nothing back (a restore would be overtaken by the statement) and fails with
    `StepUnanswered`, its record kept: the next run repairs the table first, after its own
    marker. Either way the table ends as before that run, then as after the next, when the
    statement lands before it (or, a write of rows, whenever it lands)."""
    table = new_table()
    original, held = table.run, {}
    start, fenced = UNANSWERED[statement]

    def unanswered(sql: str) -> Any:
        low = " ".join(sql.split()).lower()
        if low.startswith(start) and low != marker_sql(TABLE) and not held:
            held.update(conf=dict(table.conf), sql=sql)  # reached the server, no answer back
            table._statement()
            raise ConnectionLostError("read timed out")
        if low == marker_sql(TABLE) and marker == "lost":  # the connection is down still
            raise ConnectionLostError("connection refused")
        return original(sql)

    def server_commits_it() -> None:
        conf, table.conf = table.conf, held["conf"]
        try:
            original(held["sql"])
        finally:
            table.conf = conf

    table.run = unanswered  # type: ignore[method-assign]
    restored = marker == "sent" and fenced
    with pytest.raises(RunUndone if restored else StepUnanswered) as failed:
        a_run(table, "inv-lost", tmp_path)
    assert held, "the statement was never sent"
    if restored:
        assert table.current.state() == BEFORE and not has_intent(table), table.versions
    else:  # nothing put back: the record stays for the next run
        assert has_intent(table), table.versions
        assert " ".join(held["sql"].split())[:60] in str(failed.value) or statement == "load"
    table.run = original  # type: ignore[method-assign]  # the connection is back
    if lands:
        server_commits_it()
    a_run(table, "inv-next", tmp_path)
    assert table.current.state() == control(tmp_path), table.versions
    assert not table.leases and not table.stages, (table.leases, table.stages)  # nothing left
    if fenced:  # (again) now: skipped inside its commit (an ALTER is not: see the docs)
        server_commits_it()
        assert table.current.state() == control(tmp_path), table.versions


class CarryingDelta(FakeDelta):
    """The same table, noting which statements carry the lease's transaction id."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.carried: List[Tuple[str, bool]] = []

    def run(self, sql: str) -> Any:
        self.carried.append((" ".join(sql.split()).lower(), self.conf.get(TXN_APP_ID) is not None))
        return super().run(sql)


def test_only_the_steps_that_write_rows_carry_the_transaction_id(tmp_path: Path):
    """An ALTER takes no transaction id in Delta: the run sends its ALTER steps without one (no
    settings to set and unset around them), and each step that writes rows (the backfills) and
    the load with it."""
    table = CarryingDelta(new_table().versions)
    a_run(table, "inv-carry", tmp_path)
    to_table = [(sql, carried) for sql, carried in table.carried if " db.t " in f"{sql} "]
    alters = [carried for sql, carried in to_table if sql.startswith("alter table db.t ")]
    writes = [
        carried for sql, carried in to_table if sql.startswith(("update db.t", "merge into db.t"))
    ]
    assert alters and not any(alters), to_table
    assert len(writes) == 3 and all(writes), to_table  # two backfills and the load
