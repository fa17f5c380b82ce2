"""The runtime fence (run/lease.py, run/heartbeat.py, the Runner's and the repair's use of it)
against a scripted catalogue that records every statement; no Spark.

A run whose lease another run took over while it was stalled sends nothing more to the model's
table: not its next step, not a restore, not a repair's next statement. While its last beat is
fresh the fence reads nothing; past that it beats once and reads its lease back."""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional

import pytest
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.core.evolution.operations import AddColumns, NewColumn
from dbt.adapters.spark_contracts.core.evolution.render import render_operation
from dbt.adapters.spark_contracts.core.evolution.steps import Step
from dbt.adapters.spark_contracts.core.recovery.history_guard import guarded
from dbt.adapters.spark_contracts.core.recovery.intent import INTENT_PROPERTY, Intent
from dbt.adapters.spark_contracts.core.recovery.late import LATE_PROPERTY, LateWatch
from dbt.adapters.spark_contracts.core.recovery.lease import State as LeaseState
from dbt.adapters.spark_contracts.core.recovery.pending import (
    APP_PROPERTY,
    BEAT_PROPERTY,
    RUN_PROPERTY,
    Application,
    lease_name,
)
from dbt.adapters.spark_contracts.core.recovery.record import (
    CLIENT_PROPERTY,
    PENDING_PROPERTY,
    SHARED_PROPERTY,
    TAKEN_PROPERTY,
)
from dbt.adapters.spark_contracts.core.recovery.txn_fence import marker_sql
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.run import Runner, RunReport
from dbt.adapters.spark_contracts.run import heartbeat as heartbeat_module
from dbt.adapters.spark_contracts.run.heartbeat import Heartbeat, this_client
from dbt.adapters.spark_contracts.run.lease import Leases, ModelKey, confirm
from dbt.adapters.spark_contracts.run.model_run import DELTA_USER_METADATA
from dbt.adapters.spark_contracts.run.outcome_events import Executed
from dbt.adapters.spark_contracts.run.run_errors import LateCommits, LeaseLost, RunUndone
from dbt.adapters.spark_contracts.run.settle import settle_pending
from tests.unit import history_fake

TAG = "dbt-spark-contracts:inv:model.p.m"
REPAIR_TAG = "dbt-spark-contracts:inv2:model.p.m"
LEASE = "db.t__dbt_lease_inv2"


class Catalogue:
    """Tables as the lease and restore paths see them: `create table if not exists`, `drop
    table`, `alter table ... set/unset tblproperties`, `show tables`, `show tblproperties`;
    the model table `db.t` with a Delta history (`describe history`, `restore table`) or an
    Iceberg one (its `refs` and `snapshots`). `sent`: every statement; `when(pattern,
    hook)`: `hook()` runs after the first statement matching `pattern` is sent."""

    def __init__(self, model_properties: Optional[Dict[str, str]] = None) -> None:
        self.tables: Dict[str, Dict[str, str]] = {"db.t": dict(model_properties or {})}
        self.sent: List[str] = []
        self.history = [(0, "CREATE TABLE AS SELECT", None), (1, "WRITE", None)]
        self.history.append((2, "ADD COLUMNS", TAG))
        self.snapshot = 2  # Iceberg: the current snapshot
        self.snapshots = [(1, None, None), (2, 1, TAG)]  # Iceberg: (id, parent, tag)
        self.here = Application("thrift://server:10000", "app-1")  # where statements run
        self.columns = ["id", "note"]
        self.hooks: List[tuple] = []
        self.fail: Optional[str] = None  # statements matching it fail
        self.failure: Any = RuntimeError  # how (not a DbtDatabaseError: Spark gave no answer)
        self.cached: Dict[str, Dict[str, str]] = {}  # Iceberg tables as the catalog cached them
        self.conf: Dict[str, Optional[str]] = {}  # the session's settings
        self.restored: Dict[int, int] = {}  # Delta: a RESTORE's version and its target
        self.rollbacks = 0  # Iceberg: each adds a history entry

    def when(self, pattern: str, hook: Callable[[], None]) -> None:
        self.hooks.append((pattern, hook))

    @contextlib.contextmanager
    def own_connection(self, name: str):  # a heartbeat's: the same catalogue
        yield self

    def application(self) -> Application:
        return self.here

    def leave_session(self, carried: Any = ()) -> bool:
        """One session, whose failed statement is over (as the embedded one's)."""
        return False

    def get_conf(self, key: str) -> Optional[str]:
        # the session's commit tag: a RESTORE it makes carries it
        return self.conf.get(key, REPAIR_TAG)

    def set_conf(self, key: str, value: Optional[str]) -> None:
        self.sent.append(f"set {key}={value}")
        self.conf[key] = value

    def relation_schema(self, relation: str, describable: bool) -> Any:
        return parse_type(f"struct<{','.join(c + ':string' for c in self.columns)}>")

    def fingerprint(self) -> str:  # Iceberg: the history a guarded ALTER is sent behind
        return repr((self.snapshot, sorted(self.snapshots, key=repr), self.rollbacks))

    def run(self, sql: str) -> None:
        self.sent.append(sql)
        if self.fail and re.search(self.fail, sql):
            raise self.failure(f"failed: {sql}")
        self._apply(history_fake.unwrapped(sql, self.fingerprint()) or sql)
        for hook in [h for h in self.hooks if re.search(h[0], sql)]:
            self.hooks.remove(hook)
            hook[1]()

    def _apply(self, sql: str) -> None:
        created = re.match(r"create table if not exists (\S+) .*tblproperties \((.*)\)$", sql)
        if created:
            props = dict(re.findall(r"'([^']+)' = '([^']*)'", created.group(2)))
            self.tables.setdefault(created.group(1).lower(), props)
            return
        dropped = re.match(r"drop table if exists (\S+)(?: purge)?$", sql)
        if dropped:
            self.tables.pop(dropped.group(1).lower(), None)
            return
        altered = re.match(r"alter table (\S+) set tblproperties \((.*)\)$", sql)
        if altered and altered.group(1).lower() in self.tables:
            props = re.findall(r"'([^']+)' = '([^']*)'", altered.group(2))
            self.tables[altered.group(1).lower()].update(props)
        unset = re.match(r"alter table (\S+) unset tblproperties if exists \('([^']+)'\)$", sql)
        if unset:
            self.tables[unset.group(1).lower()].pop(unset.group(2), None)
        restore = re.match(r"restore table db\.t to version as of (\d+)", sql)
        if restore:  # it carries the session's tag
            self.restored[len(self.history)] = int(restore.group(1))
            tag = self.conf.get(DELTA_USER_METADATA) or REPAIR_TAG
            self.history.append((len(self.history), "RESTORE", tag))
        if sql == marker_sql("db.t"):  # a lease taker's empty marker commit, as it is tagged
            self.history.append((len(self.history), "MERGE", self.conf[DELTA_USER_METADATA]))
        if " drop columns " in sql:
            self.columns = ["id"]
        rollback = re.search(r"rollback_to_snapshot\('[^']+', (\d+)\)", sql)
        if rollback:
            self.snapshot = int(rollback.group(1))
            self.rollbacks += 1

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        if history_fake.is_read(sql):
            return [{"fingerprint": self.fingerprint()}]
        listed = re.match(r"show tables in (\S+) like '(\S+?)\*?'$", sql)
        if listed:
            schema, prefix = listed.groups()
            return [
                {"tableName": t.rsplit(".", 1)[1]}
                for t in self.tables
                if t.startswith(f"{schema}.{prefix}".lower())
            ]
        refresh = re.match(r"refresh table (\S+)$", sql)
        if refresh:  # the session catalog's cached copy dropped
            if refresh.group(1).lower() not in self.tables:
                raise RuntimeError(f"Table or view not found: {refresh.group(1)}")
            self.cached.pop(refresh.group(1).lower(), None)
            return []
        props = re.match(r"show tblproperties (\S+)$", sql)
        if props:
            name = props.group(1).lower()
            table = self.tables.get(name)
            if name.startswith("iceberg.") and name != "iceberg.db.t":
                # Iceberg's catalog caches the table it loaded: its properties as first read,
                # until a refresh (a stale copy outlives the table's drop too)
                table = (
                    self.cached.setdefault(name, dict(table)) if table else self.cached.get(name)
                )
            if table is None:
                raise RuntimeError(f"Table or view not found: {props.group(1)}")
            return [{"key": k, "value": v} for k, v in table.items()]
        if sql.startswith("describe history db.t"):  # newest first, as Delta lists it
            rows = [
                {
                    "version": v,
                    "operation": o,
                    "userMetadata": t,
                    "operationParameters": {"version": str(self.restored[v])}
                    if v in self.restored
                    else {},
                }
                for v, o, t in sorted(self.history, reverse=True)
            ]
            return rows[:1] if sql.endswith(" limit 1") else rows
        if "from iceberg.db.t.refs where name = 'main'" in sql:  # the current snapshot
            return [{"snapshot_id": self.snapshot}]
        if "from iceberg.db.t.snapshots" in sql:  # every snapshot, with its parent
            return [
                {"snapshot_id": i, "parent_id": p, "operation": "overwrite", "tag": t}
                for i, p, t in self.snapshots
            ]
        raise AssertionError(sql)


def stall(leases: Leases) -> None:
    """The holder was paused past its lease: its last beat is old on its own clock."""
    assert leases.held is not None
    leases.held.last -= 1_000.0


def take_over(catalogue: Catalogue, table: str, by: str = "inv3") -> None:
    """Another run marks `table` taken over (run/lease.take_over_sql)."""
    catalogue.tables[table][TAKEN_PROPERTY] = by
    catalogue.tables[table][BEAT_PROPERTY] = "0"


def stall_and_take_over_at(catalogue: Catalogue, pattern: str, leases: Leases, table: str) -> None:
    """When a statement matching `pattern` is sent, its holder stalls past its lease and another
    run takes `table` (the lease) over."""

    def stalled() -> None:
        stall(leases)
        take_over(catalogue, table)

    catalogue.when(pattern, stalled)


def after(catalogue: Catalogue, pattern: str) -> List[str]:
    """The statements sent after the first one matching `pattern`."""
    index = next(i for i, s in enumerate(catalogue.sent) if re.search(pattern, s))
    return catalogue.sent[index + 1 :]


@pytest.fixture(autouse=True)
def _short_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(heartbeat_module.LEASE_ENV, "30")  # beats every 10 s: none in a test


# -- Heartbeat.fresh / renew


def test_a_beat_is_fresh_for_nine_tenths_of_a_lease_on_the_holders_own_clock():
    beat = Heartbeat(Catalogue(), LEASE, since=time.monotonic())
    assert beat.fresh()
    beat.last = time.monotonic() - 0.85 * 30
    assert beat.fresh()
    beat.last = time.monotonic() - 0.95 * 30
    assert not beat.fresh()


def test_renew_sends_nothing_while_fresh_and_one_beat_once_stale():
    catalogue = Catalogue()
    beat = Heartbeat(catalogue, LEASE, since=time.monotonic())
    beat.renew(catalogue)
    assert catalogue.sent == []
    beat.last -= 1_000.0
    beat.renew(catalogue)
    assert len(catalogue.sent) == 1 and BEAT_PROPERTY in catalogue.sent[0]
    assert beat.fresh()


def test_a_failed_renewal_is_tried_again_and_the_last_failure_raised():
    catalogue = Catalogue()
    beat = Heartbeat(catalogue, LEASE, since=time.monotonic() - 1_000.0)
    catalogue.fail = "heartbeat"
    with pytest.raises(RuntimeError, match="failed"):
        beat.renew(catalogue, attempts=3)
    assert len(catalogue.sent) == 3 and not beat.fresh()


# -- confirm and Leases.check


def lease_table(catalogue: Catalogue, owner: Any) -> Leases:
    leases = Leases(catalogue)  # type: ignore[arg-type]
    leases.take(owner)
    return leases


def key(invocation_id: str = "inv2", table_format: str = "delta") -> ModelKey:
    relation = "iceberg.db.t" if table_format == "iceberg" else "db.t"
    return ModelKey(relation, invocation_id, table_format, "model.p.m")


def test_the_fence_reads_nothing_while_the_beat_is_fresh():
    catalogue = Catalogue()
    leases = lease_table(catalogue, key())
    try:
        take_over(catalogue, LEASE)  # not seen: no run can take a fresh lease over
        sent = len(catalogue.sent)
        leases.check(key())
        assert len(catalogue.sent) == sent
    finally:
        leases.let_go(key())


def test_a_stale_lease_still_held_is_renewed_and_read_back():
    catalogue = Catalogue()
    leases = lease_table(catalogue, key())
    try:
        stall(leases)
        sent = len(catalogue.sent)
        leases.check(key())  # no error: still its own
        assert len(catalogue.sent) == sent + 1  # one beat (the read is a fetch)
        assert leases.held is not None and leases.held.fresh()
    finally:
        leases.let_go(key())


@pytest.mark.parametrize("how", ["taken over", "dropped"])
def test_a_lease_taken_over_while_stalled_is_lost_and_dropped_by_its_holder(how):
    catalogue = Catalogue()
    leases = lease_table(catalogue, key())
    beat = leases.held
    assert beat is not None
    stall(leases)
    if how == "taken over":
        take_over(catalogue, LEASE)
    else:
        del catalogue.tables[LEASE]
    with pytest.raises(LeaseLost) as lost:
        leases.check(key())
    assert lost.value.taken_by == ("inv3" if how == "taken over" else None)
    assert leases.held is None and not beat._thread.is_alive()  # it beats no more
    assert LEASE not in catalogue.tables  # the mark was for it alone: dropped (it holds none)


def test_a_lease_that_cannot_be_renewed_is_not_confirmed():
    """Its beat fails (the connection is gone): the lease reads as its own, but a beat older
    than a lease may have been seen unchanged by another run, which may take it over any
    moment: not held."""
    catalogue = Catalogue()
    beat = Heartbeat(catalogue, LEASE, since=time.monotonic() - 1_000.0)
    catalogue.tables[LEASE] = {RUN_PROPERTY: "inv2", BEAT_PROPERTY: "5.0"}
    catalogue.fail = "heartbeat"
    found = confirm(catalogue, beat)  # type: ignore[arg-type]
    assert not found.held and found.taken_by is None


# -- the Runner's fence


def model_run(relation: str = "db.t", table_format: str = "delta") -> SimpleNamespace:
    return SimpleNamespace(
        relation=relation,
        invocation_id="inv2",
        table_format=table_format,
        unique_id="model.p.m",
        batch_tag="",
        report=lambda out: {"restored": out.restored},
    )


def test_a_step_after_the_lease_was_lost_is_not_sent_and_nothing_is_restored(tmp_path: Path):
    catalogue = Catalogue()
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    run = model_run()
    runner.leases.take(run)  # type: ignore[arg-type]
    runner.state.intent = Intent("inv2", "model.p.m", "db.t", "delta", 1, TAG)
    stall(runner.leases)
    take_over(catalogue, LEASE)
    sent = []
    with pytest.raises(LeaseLost) as lost:
        runner._step(run, "the load", lambda: sent.append("the load"))  # type: ignore[arg-type]
    assert lost.value.taken_by == "inv3"
    assert sent == []  # the step was never carried out
    assert not [s for s in catalogue.sent if re.search(r"db\.t(\s|$)", s)]  # the model's
    assert runner.state.intent is None  # no longer its own to put back
    assert runner.out.restored.startswith("NOT RESTORED"), runner.out.restored


def test_a_step_that_fails_while_the_lease_is_held_is_undone(tmp_path: Path):
    """The control: the same failure with the lease still held restores the table."""
    catalogue = Catalogue()
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    run = model_run()
    runner.leases.take(run)  # type: ignore[arg-type]
    runner.state.intent = Intent("inv2", "model.p.m", "db.t", "delta", 1, TAG)
    stall(runner.leases)

    def failing() -> None:
        raise DbtDatabaseError("the load failed")

    with pytest.raises(RunUndone):
        runner._step(run, "the load", failing)  # type: ignore[arg-type]
    assert "restore table db.t to version as of 1" in catalogue.sent


def test_the_undo_of_a_run_that_lost_its_lease_puts_nothing_back(tmp_path: Path):
    """A step failed (the stalled run's statement, rejected after another run's repair); by
    then its lease is taken over: it restores nothing (`LeaseLost`, not `RunUndone`)."""
    catalogue = Catalogue()
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    run = model_run()
    runner.leases.take(run)  # type: ignore[arg-type]
    runner.state.intent = Intent("inv2", "model.p.m", "db.t", "delta", 1, TAG)

    def failing_after_a_takeover() -> None:
        stall(runner.leases)
        take_over(catalogue, LEASE)
        raise DbtDatabaseError("concurrent modification")

    with pytest.raises(LeaseLost):
        runner._step(run, "the load", failing_after_a_takeover)  # type: ignore[arg-type]
    assert not [s for s in catalogue.sent if s.startswith("restore")]


class TakenOverAfterTheFence(Catalogue):
    """Once `armed`, right after the holder's fence read its lease and found it its own,
    another run takes the lease `lease` over and commits its empty marker snapshot; the holder
    stalled past its lease meanwhile (`stalled`, called before its next statement)."""

    def __init__(self, lease: str) -> None:
        super().__init__()
        self.lease: str = lease
        self.armed, self.stall_next = False, False
        self.stalled: Callable[[], None] = lambda: None

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        rows = super().fetch(sql)
        if self.armed and sql == f"show tblproperties {self.lease}":
            self.armed, self.stall_next = False, True
            take_over(self, self.lease)
            self.snapshots.append((9, self.snapshot, "dbt-spark-contracts-fence:taker"))
            self.snapshot = 9
        return rows

    def run(self, sql: str) -> None:
        if self.stall_next:
            self.stall_next = False
            self.stalled()
        super().run(sql)


def test_an_iceberg_alter_reads_the_history_before_its_fence_so_a_takeover_after_it_fails_it(
    tmp_path: Path,
):
    """A run's Iceberg ALTER step is sent behind the table's history read before the fence
    (runner `_steps`, `_step(first=...)`): another run that takes the lease over right after
    that fence, and commits its marker, makes the ALTER's guard fail, and the run ends on its
    lost lease with the column kept. Read after the fence, the history would hold the marker
    and the ALTER would land."""
    lease = lease_name("iceberg.db.t", "inv2")
    catalogue = TakenOverAfterTheFence(lease)
    catalogue.tables["iceberg.db.t"] = catalogue.tables.pop("db.t")
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    drop = Step("alter table iceberg.db.t drop columns (note)")
    run = model_run("iceberg.db.t", "iceberg")
    run.statements = (drop,)
    runner.leases.take(run)  # type: ignore[arg-type]
    runner.state.intent = Intent("inv2", "model.p.m", "iceberg.db.t", "iceberg", 2, TAG)
    stall(runner.leases)  # the step's fence reads the lease
    catalogue.armed, catalogue.stalled = True, lambda: stall(runner.leases)
    with pytest.raises(LeaseLost) as lost:
        runner._steps(run, after_load=False)  # type: ignore[arg-type]
    assert lost.value.taken_by == "inv3", catalogue.sent
    assert catalogue.columns == ["id", "note"], catalogue.sent  # the late DROP did not land
    script = next(s for s in catalogue.sent if s.startswith("BEGIN"))
    assert "drop columns (note)" in script


class Applied(TakenOverAfterTheFence):
    """As `TakenOverAfterTheFence`, keeping every statement the table carried out (a guarded
    one unwrapped, once its guard passed)."""

    def __init__(self, lease: str) -> None:
        super().__init__(lease)
        self.applied: List[str] = []

    def _apply(self, sql: str) -> None:
        self.applied.append(sql)
        super()._apply(sql)


def rebuild_run(table_format: str = "iceberg", **changed: Any) -> SimpleNamespace:
    """A table model's rebuild by one `create or replace` of the deployed table."""
    from dbt.adapters.spark_contracts.core.materialization.run_plan import Build

    relation = "iceberg.db.t" if table_format == "iceberg" else "db.t"
    facts = dict(
        rebuilds=True,
        replace_by=Build.REPLACE,
        load_settings=(),
        first_pass=None,
        commit_tag=f"dbt-spark-contracts:inv2:x:model.p.m:{table_format}",
    )
    return SimpleNamespace(**{**vars(model_run(relation, table_format)), **facts, **changed})


@pytest.mark.parametrize("taken", [False, True])
def test_an_iceberg_rebuild_reads_the_history_before_its_fence_so_a_takeover_after_it_fails_it(
    tmp_path: Path, taken: bool
):
    """A rebuild's Iceberg `create or replace` under the run's lease is sent behind the
    table's history read before the load's fence (`Runner._behind_history`): another run that
    takes the lease over right after that fence and commits makes it fail, and the run ends on
    its lost lease, the replace never carried out. The control (`taken=False`) replaces."""
    from dbt.adapters.spark_contracts.run.run_errors import LOAD_STEP

    catalogue = Applied(lease_name("iceberg.db.t", "inv2"))
    catalogue.tables["iceberg.db.t"] = catalogue.tables.pop("db.t")
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    run = rebuild_run()
    runner.leases.take(run)  # type: ignore[arg-type]
    replace_sql = "create or replace table iceberg.db.t using iceberg as select 1 as id"
    first = runner._behind_history(run, replace_sql)  # type: ignore[arg-type]
    assert first is not None
    stall(runner.leases)  # the load's fence reads the lease
    catalogue.armed, catalogue.stalled = taken, lambda: stall(runner.leases)
    load = lambda: runner.spark.run(replace_sql)  # noqa: E731  (never sent: `first` gives it)
    if taken:
        with pytest.raises(LeaseLost) as lost:
            runner._step(run, LOAD_STEP, load, True, True, first)  # type: ignore[arg-type]
        assert lost.value.taken_by == "inv3", catalogue.sent
    else:
        runner._step(run, LOAD_STEP, load, True, True, first)  # type: ignore[arg-type]
    assert (replace_sql in catalogue.applied) is not taken, catalogue.sent
    assert replace_sql not in catalogue.sent  # only ever inside its guard
    assert [s for s in catalogue.sent if s.startswith("BEGIN") and replace_sql in s]


class CommittedAfterTheFence(Applied):
    """Once `armed`, right after the holder's fence read its lease and found it its own,
    another run's load commits on the table (a new current snapshot), no lease taken over: a
    settler takes no Iceberg pending table's lease over while its run may still run."""

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        rows = Catalogue.fetch(self, sql)
        if self.armed and sql == f"show tblproperties {self.lease}":
            self.armed = False
            self.snapshots.append((9, None, "dbt-spark-contracts:inv3:x:model.p.m"))
            self.snapshot = 9
        return rows


@pytest.mark.parametrize("committed", [False, True])
def test_a_rebuild_whose_table_took_a_commit_after_its_fence_replaces_nothing(
    tmp_path: Path, committed: bool
):
    """Through the runner's load (`Runner._load`): an Iceberg rebuild under the run's lease
    whose table takes another run's commit right after the load's fence (the run stalled
    there, past its lease; nobody took the lease over) fails on the guard, its replace never
    carried out, and lets go of its lease. Without that commit (the control) it replaces."""
    from dbt_common.exceptions import DbtDatabaseError

    catalogue = CommittedAfterTheFence(lease_name("iceberg.db.t", "inv2"))
    catalogue.tables["iceberg.db.t"] = catalogue.tables.pop("db.t")
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    runner.report.queue_run_history = lambda run, out: None  # type: ignore[method-assign]
    said = dict(outcome_line=lambda out: "", response=lambda *args, **kwargs: args[0])
    run = rebuild_run(evolves_in_write=False, strategy="table", **said)
    runner.leases.take(run)  # type: ignore[arg-type]
    stall(runner.leases)  # the load's fence reads the lease
    catalogue.armed = committed
    replace_sql = "create or replace table iceberg.db.t using iceberg as select 1 as id"
    if committed:
        with pytest.raises(DbtDatabaseError, match="history changed"):
            runner._load(run, replace_sql)  # type: ignore[arg-type]
        assert runner.leases.held is None, catalogue.sent  # let go of
    else:
        runner._load(run, replace_sql)  # type: ignore[arg-type]
    assert (replace_sql in catalogue.applied) is not committed, catalogue.sent
    assert replace_sql not in catalogue.sent  # only ever inside its guard


def test_only_a_rebuilds_replace_under_a_lease_is_sent_behind_the_history(tmp_path: Path):
    """No guard (the load as it is) for a run that holds no lease, a load that is no
    rebuild's, a rebuild that creates the table or builds it beside; and on Delta the log's
    `behind_history` sends it as it is (the transaction id fences it: measured in
    benchmarks/experiments/delta_txn_statements.py)."""
    from dbt.adapters.spark_contracts.core.materialization.run_plan import Build

    catalogue = Catalogue()
    catalogue.tables["iceberg.db.t"] = {}
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    sql = "create or replace table iceberg.db.t using iceberg as select 1 as id"
    assert runner._behind_history(rebuild_run(), sql) is None  # type: ignore[arg-type]  (no lease)
    runner.leases.take(rebuild_run())  # type: ignore[arg-type]
    assert runner._behind_history(rebuild_run(), sql) is not None  # type: ignore[arg-type]
    for other in (dict(rebuilds=False), dict(replace_by=Build.CREATE), dict(replace_by=Build.SWAP)):
        assert runner._behind_history(rebuild_run(**other), sql) is None, other  # type: ignore[arg-type]
    delta = runner._behind_history(rebuild_run("delta"), sql)  # type: ignore[arg-type]
    assert delta is not None
    before = len(catalogue.sent)
    delta()
    assert not [s for s in catalogue.sent[before:] if "history" in s], catalogue.sent[before:]


# -- the repair's own restore


def dead_intent(table_format: str = "delta") -> Intent:
    relation = "iceberg.db.t" if table_format == "iceberg" else "db.t"
    added = (("note",),) if table_format == "iceberg" else ()
    return Intent("inv", "model.p.m", relation, table_format, 1, TAG, added)


def record_of(intent: Intent) -> str:
    return lease_name(intent.relation, intent.invocation_id)


def repair_catalogue(intent: Intent) -> Catalogue:
    """The model's table and the record of the run that wrote `intent`: released (its run let
    go of it), so no run waits for it."""
    catalogue = Catalogue()
    catalogue.tables[intent.relation] = catalogue.tables.pop("db.t")
    catalogue.tables[record_of(intent)] = {
        RUN_PROPERTY: intent.invocation_id,
        BEAT_PROPERTY: "0",
        INTENT_PROPERTY: intent.to_property(),
    }
    return catalogue


@pytest.mark.parametrize("lost", [False, True])
def test_a_repair_that_loses_the_lease_while_it_restores_restores_nothing_more(
    tmp_path: Path, lost: bool
):
    """Delta: the repairing run stalls past its lease after dropping the dead run's stage, and a
    third run takes the lease over: its RESTORE is never sent, nor the drop of the dead run's
    pending table (`LeaseLost`, naming the third run). The control (`lost=False`) restores."""
    intent = dead_intent()
    catalogue = repair_catalogue(intent)
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    if lost:
        stall_and_take_over_at(
            catalogue, r"^drop table if exists db\.t__dbt_stage", runner.leases, LEASE
        )
        with pytest.raises(LeaseLost) as caught:
            runner.repair(key(), False)
        assert caught.value.taken_by == "inv3"
        later = after(catalogue, r"^drop table if exists db\.t__dbt_stage")
        assert not [s for s in later if s.startswith("restore") or "pending" in s], later
        assert LEASE not in catalogue.tables
        assert INTENT_PROPERTY in catalogue.tables[record_of(intent)]  # for the third run
    else:
        assert "restored to Delta version 1" in (runner.repair(key(), False) or "")
        assert "restore table db.t to version as of 1" in catalogue.sent
        # repaired: the record stays only as a watch for a late commit of its run (its
        # application not recorded: nothing proves it can no longer commit)
        record = catalogue.tables[record_of(intent)]
        assert not record.get(INTENT_PROPERTY) and record.get(LATE_PROPERTY), record


@pytest.mark.parametrize("lost", [False, True])
def test_an_iceberg_repair_stops_between_its_own_statements(tmp_path: Path, lost: bool):
    """Iceberg's restore is two statements (drop the columns the dead run added, then roll
    back): a lease lost after the first sends not the second."""
    intent = dead_intent("iceberg")
    catalogue = repair_catalogue(intent)
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    lease = lease_name("iceberg.db.t", "inv2")
    if lost:
        stall_and_take_over_at(catalogue, " drop columns ", runner.leases, lease)
        with pytest.raises(LeaseLost):
            runner.repair(key(table_format="iceberg"), False)
        assert not [s for s in catalogue.sent if "rollback_to_snapshot" in s], catalogue.sent
        assert INTENT_PROPERTY in catalogue.tables[record_of(intent)]  # left for the third run
    else:
        done = runner.repair(key(table_format="iceberg"), False) or ""
        assert "rolled back to Iceberg snapshot 1" in done, done
        # the dead run's statements may still run (its record names no application that is
        # provably gone): its record stays, its intent cleared, watched for a late commit
        record = catalogue.tables[record_of(intent)]
        assert not record.get(INTENT_PROPERTY), record
        assert LateWatch.from_property(record[LATE_PROPERTY]) == LateWatch(1, TAG)


def late_catalogue(tmp_path: Path, app: str = "app-1") -> tuple:
    """An Iceberg table repaired after run `inv` by run `inv2`, which left `inv`'s record with
    its watch (snapshot 1, `inv`'s tag) where `inv` ran in the Spark application `app` the
    server (`Catalogue.here`) runs now; another one: the server restarted since, so no
    statement of `inv` can still run."""
    intent = dead_intent("iceberg")
    catalogue = repair_catalogue(intent)
    catalogue.tables[record_of(intent)][APP_PROPERTY] = f"thrift://server:10000 {app}"
    Runner(catalogue, RunReport(), tmp_path).repair(key(table_format="iceberg"), False)  # type: ignore[arg-type]
    return catalogue, record_of(intent)


def test_a_late_snapshot_of_a_repaired_iceberg_run_is_rolled_back_by_the_next_repair(
    tmp_path: Path,
):
    """The dead run's statement past its fence commits after the repair (snapshot 3 on 1, its
    tag): the next run's repair step rolls it back to 1 and drops the record."""
    catalogue, record = late_catalogue(tmp_path)
    assert LATE_PROPERTY in catalogue.tables[record]
    catalogue.snapshots.append((3, 1, TAG))
    catalogue.snapshot = 3
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    done = runner.repair(key("inv4", "iceberg"), False) or ""
    assert "rolled back snapshot 3 of run inv" in done and "to snapshot 1" in done, done
    assert catalogue.snapshot == 1
    assert record not in catalogue.tables


def test_a_late_snapshot_under_another_writers_is_named_and_nothing_undone(tmp_path: Path):
    catalogue, record = late_catalogue(tmp_path)
    catalogue.snapshots += [(3, 1, TAG), (4, 3, "streaming-job")]
    catalogue.snapshot = 4
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    with pytest.raises(LateCommits) as failed:
        runner.repair(key("inv4", "iceberg"), False)
    assert failed.value.theirs[0].version == 3 and failed.value.under[0].version == 4
    assert "rollback_to_snapshot('db.t', <the parent" in str(failed.value), str(failed.value)
    assert catalogue.snapshot == 4  # nothing undone
    assert LATE_PROPERTY in catalogue.tables[record]  # still watched, for a person to settle


def delta_late_catalogue(tmp_path: Path, app: str = "app-1") -> tuple:
    """A Delta table repaired after run `inv` (its intent: a DROP COLUMNS) by run `inv2`,
    where `inv` ran in the Spark application `app` the server runs now (its statement past
    the fence may still land); another one: the server restarted since."""
    intent = replace(dead_intent("delta"), steps=(Step("ALTER TABLE db.t DROP COLUMNS (note)"),))
    catalogue = repair_catalogue(intent)
    catalogue.tables[record_of(intent)][APP_PROPERTY] = f"thrift://server:10000 {app}"
    done = Runner(catalogue, RunReport(), tmp_path).repair(key(), False) or ""  # type: ignore[arg-type]
    assert "restored to Delta version 1" in done, done
    return catalogue, record_of(intent)


def test_a_late_delta_commit_is_watched_and_put_back_by_the_next_repair(tmp_path: Path):
    """Delta fences rows' writes inside the commit, not an ALTER nor its own undo's RESTORE: a
    dead run that may still commit leaves its record watched from the repair's RESTORE
    (version 3). Its DROP COLUMNS lands after that (version 4, its tag): the next repair
    RESTOREs to 3, which brings the column's values back, and drops the record."""
    catalogue, record = delta_late_catalogue(tmp_path)
    assert LateWatch.from_property(catalogue.tables[record][LATE_PROPERTY]) == LateWatch(3, TAG)
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    assert not runner.repair(key("inv3"), False)  # nothing landed yet: nothing done
    assert record in catalogue.tables
    catalogue.history.append((4, "DROP COLUMNS", TAG))
    done = Runner(catalogue, RunReport(), tmp_path).repair(key("inv4"), False) or ""  # type: ignore[arg-type]
    assert "rolled back version 4 of run inv" in done and "to version 3" in done, done
    assert catalogue.sent[-3:].count("restore table db.t to version as of 3") == 1, catalogue.sent
    assert record not in catalogue.tables


def test_a_late_delta_commit_under_another_writers_is_named_and_nothing_undone(tmp_path: Path):
    catalogue, record = delta_late_catalogue(tmp_path)
    catalogue.history += [(4, "RESTORE", TAG), (5, "WRITE", "streaming-job")]
    sent = len(catalogue.sent)
    with pytest.raises(LateCommits) as failed:
        Runner(catalogue, RunReport(), tmp_path).repair(key("inv4"), False)  # type: ignore[arg-type]
    assert failed.value.theirs[0].version == 4 and failed.value.under[0].version == 5
    assert not [s for s in catalogue.sent[sent:] if s.startswith("restore")]
    assert LATE_PROPERTY in catalogue.tables[record]  # still watched, for a person to settle


def test_no_delta_watch_where_the_dead_runs_application_is_gone(tmp_path: Path):
    catalogue, record = delta_late_catalogue(tmp_path, app="app-0")
    assert record not in catalogue.tables  # repaired, and nothing of it can commit any more


@pytest.mark.parametrize("gone", [False, True])
def test_a_watch_with_nothing_landed_stays_until_its_run_can_no_longer_commit(
    tmp_path: Path, gone: bool
):
    catalogue, record = late_catalogue(tmp_path)
    if gone:  # the server restarted: another Spark application runs there now
        catalogue.here = Application("thrift://server:10000", "app-2")
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    assert not runner.repair(key("inv4", "iceberg"), False)
    assert (record in catalogue.tables) is not gone
    assert catalogue.snapshot == 1  # nothing rolled back


def test_no_watch_where_the_dead_runs_application_is_gone(tmp_path: Path):
    catalogue, record = late_catalogue(tmp_path, app="app-0")
    assert record not in catalogue.tables  # repaired, and nothing of it can commit any more


@pytest.mark.parametrize("lost", [False, True])
def test_a_runs_own_undo_stops_between_its_restores_statements(tmp_path: Path, lost: bool):
    """Iceberg: a failed step's undo drops the columns the run's ADD COLUMNS added, then rolls
    back; a run that loses its lease after the first sends not the second (`LeaseLost`, the
    intent left for the run that took over). The control (`lost=False`) rolls back."""
    intent = replace(dead_intent("iceberg"), invocation_id="inv2")
    catalogue = Catalogue()
    catalogue.tables["iceberg.db.t"] = catalogue.tables.pop("db.t")
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    run = model_run("iceberg.db.t", "iceberg")
    runner.leases.take(run)  # type: ignore[arg-type]
    runner.leases.write(run, {INTENT_PROPERTY: intent.to_property()})  # type: ignore[arg-type]
    runner.state.intent = intent
    add = AddColumns((NewColumn(("note",), parse_type("string")),))
    runner.events.add(Executed(*render_operation(add, "iceberg.db.t", "iceberg")))
    lease = lease_name("iceberg.db.t", "inv2")
    if lost:
        stall_and_take_over_at(catalogue, " drop columns ", runner.leases, lease)

    def failing() -> None:  # Spark refused it: over (one without an answer: test_fault_matrix)
        raise DbtDatabaseError("the load failed")

    with pytest.raises(LeaseLost if lost else RunUndone):
        runner._step(run, "the load", failing)  # type: ignore[arg-type]
    rolled_back = [s for s in catalogue.sent if "rollback_to_snapshot" in s]
    assert bool(rolled_back) is not lost, catalogue.sent
    if lost:
        assert runner.out.restored.startswith("NOT RESTORED"), runner.out.restored
        assert INTENT_PROPERTY in catalogue.tables[record_of(intent)]  # left for the taker
    else:
        assert record_of(intent) not in catalogue.tables


# -- leases taken over: who drops them


def marked(pid: int, host: Optional[str] = None, app: str = "thrift://spark:10000 app-1"):
    return {
        RUN_PROPERTY: f"run-{pid}",
        BEAT_PROPERTY: "0",
        CLIENT_PROPERTY: f"{host or this_client().host}/{pid}",
        APP_PROPERTY: app,
        TAKEN_PROPERTY: "inv1",
    }


def gone_pid() -> int:
    """A pid that runs no process on this host."""
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid += 1


def test_leases_taken_over_are_dropped_once_their_holder_is_gone_from_this_host():
    """Found by the next run that takes the model's lease: a taken-over lease whose holder's
    process on this host has ended is dropped (also over a server: only the holder read it);
    one whose holder still runs (a stalled run, here this very process) or ran on another host
    stays marked, for its holder to find."""
    catalogue = Catalogue()
    catalogue.tables["db.t__dbt_lease_gone"] = marked(gone_pid())
    catalogue.tables["db.t__dbt_lease_alive"] = marked(os.getpid())
    catalogue.tables["db.t__dbt_lease_away"] = marked(gone_pid(), host="elsewhere")
    leases = Leases(catalogue)  # type: ignore[arg-type]
    leases.alone(key())
    leases.let_go(key())
    assert sorted(t for t in catalogue.tables if "__dbt_lease_" in t) == [
        "db.t__dbt_lease_alive",
        "db.t__dbt_lease_away",
    ]


def test_an_expired_lease_of_a_client_gone_from_this_host_is_taken_over_and_dropped(
    monkeypatch: pytest.MonkeyPatch,
):
    """Over a server: the client's process here has ended, its statements ran on the server
    (watched to its end, not taken at once); once expired it is marked, then dropped, as no one
    can read the mark."""
    from dbt.adapters.spark_contracts.run import lease as lease_module

    monkeypatch.setenv(heartbeat_module.LEASE_ENV, "0.3")
    sleep = lease_module.time.sleep
    monkeypatch.setattr(lease_module.time, "sleep", lambda s: sleep(min(s, 0.1)))
    catalogue = Catalogue()
    expired = marked(gone_pid())
    del expired[TAKEN_PROPERTY]
    expired[BEAT_PROPERTY] = "12.5"
    catalogue.tables["db.t__dbt_lease_dead"] = expired
    leases = Leases(catalogue)  # type: ignore[arg-type]
    leases.alone(key())
    leases.let_go(key())
    assert any(
        s.startswith("alter table db.t__dbt_lease_dead") and TAKEN_PROPERTY in s
        for s in catalogue.sent
    ), catalogue.sent  # marked first
    assert "db.t__dbt_lease_dead" not in catalogue.tables


@pytest.mark.parametrize(
    "fmt,app,taken",
    [
        # over a server: the client's process here ended, its statement may still run there
        ("delta", "thrift://server:10000 app-1", True),  # fenced off inside the commit
        ("parquet", "thrift://server:10000 app-1", False),  # no log: nothing could guard it
        ("parquet", "thrift://server:10000 app-0", True),  # the server restarted since: gone
        ("parquet", f"session://{this_client().host}/{{pid}} local-1", True),  # died with it
    ],
)
def test_a_lease_whose_holder_may_still_write_to_a_parquet_table_is_never_taken_over(
    monkeypatch: pytest.MonkeyPatch, fmt: str, app: str, taken: bool
):
    """A run out lease proves only a silent holder. Where the model's format can neither fence
    its late write off nor take it back (Parquet), it is taken over only on positive evidence
    that no statement of its holder can run any more; else the run fails naming it, with the
    repair by hand, having marked nothing (its own record let go)."""
    from dbt.adapters.spark_contracts.run import lease as lease_module
    from dbt.adapters.spark_contracts.run.run_errors import UnguardedTakeover

    monkeypatch.setenv(heartbeat_module.LEASE_ENV, "0.3")
    sleep = lease_module.time.sleep
    monkeypatch.setattr(lease_module.time, "sleep", lambda s: sleep(min(s, 0.1)))
    catalogue = Catalogue()
    pid = gone_pid()
    expired = marked(pid, app=app.format(pid=pid))
    del expired[TAKEN_PROPERTY]
    expired[BEAT_PROPERTY] = "12.5"
    catalogue.tables["db.t__dbt_lease_dead"] = expired
    leases = Leases(catalogue)  # type: ignore[arg-type]
    owner = key(table_format=fmt)
    marks = lambda: [  # noqa: E731
        s for s in catalogue.sent if s.startswith("alter table db.t__dbt_lease_dead")
    ]
    if taken:
        leases.alone(owner)
        leases.let_go(owner)
        assert any(TAKEN_PROPERTY in s for s in marks()), catalogue.sent
        return
    with pytest.raises(UnguardedTakeover) as refused:
        leases.alone(owner)
    message = str(refused.value)
    assert f"run run-{pid}" in message and "then DROP TABLE db.t__dbt_lease_dead" in message
    assert "SET TBLPROPERTIES" not in message, message  # its record holds no change half done
    assert "parquet table keeps no log" in message, message
    assert marks() == [], catalogue.sent  # nothing marked: its holder finds its lease its own
    assert catalogue.tables["db.t__dbt_lease_dead"][BEAT_PROPERTY] == "12.5"
    assert leases.held is None  # the run's own lease let go


@pytest.mark.parametrize(
    "app,marker",
    [
        ("thrift://server:10000 app-1", True),  # its statement may still run on the server
        (f"session://{this_client().host}/{{pid}} local-1", False),  # they died with it
    ],
)
def test_an_iceberg_lease_taken_over_gets_an_empty_marker_snapshot_its_holders_alter_fails_on(
    monkeypatch: pytest.MonkeyPatch, app: str, marker: bool
):
    """Iceberg fences no ALTER inside its commit: its holder sends each behind the table's
    history (core/recovery/history_guard.py), and the taker of a lease whose holder may still
    send statements commits an empty snapshot under its marker tag right after marking it, so
    the guard of an ALTER the holder read before sees another history and fails."""
    from dbt.adapters.spark_contracts.core.recovery.txn_fence import marker_tag
    from dbt.adapters.spark_contracts.run import lease as lease_module
    from dbt.adapters.spark_contracts.run.model_run import ICEBERG_SNAPSHOT_TAG

    monkeypatch.setenv(heartbeat_module.LEASE_ENV, "0.3")
    sleep = lease_module.time.sleep
    monkeypatch.setattr(lease_module.time, "sleep", lambda s: sleep(min(s, 0.1)))
    catalogue = Catalogue()
    catalogue.tables["iceberg.db.t"] = catalogue.tables.pop("db.t")
    pid = gone_pid()
    expired = marked(pid, app=app.format(pid=pid))
    del expired[TAKEN_PROPERTY]
    expired[BEAT_PROPERTY] = "12.5"
    record = "iceberg.db.t__dbt_lease_dead"
    catalogue.tables[record] = expired
    read_before = catalogue.fingerprint()
    drop = "alter table iceberg.db.t drop columns (note)"
    holders_alter = guarded(drop, "iceberg.db.t", read_before)  # read before the takeover
    committed = []
    catalogue.when(  # what the fake does with the empty commit: a snapshot under the tag
        r"^insert into iceberg\.db\.t select \* from iceberg\.db\.t limit 0$",
        lambda: (
            committed.append(catalogue.conf.get(ICEBERG_SNAPSHOT_TAG))
            or catalogue.snapshots.append((9, catalogue.snapshot, committed[-1]))
        ),
    )
    leases = Leases(catalogue)  # type: ignore[arg-type]
    leases.alone(key(table_format="iceberg"))
    leases.let_go(key(table_format="iceberg"))
    mark = next(i for i, s in enumerate(catalogue.sent) if s.startswith(f"alter table {record}"))
    empty = [i for i, s in enumerate(catalogue.sent) if s.startswith("insert into iceberg.db.t")]
    if not marker:
        assert empty == [] and catalogue.fingerprint() == read_before, catalogue.sent
        return
    assert len(empty) == 1 and empty[0] > mark, catalogue.sent  # after the mark
    assert committed == [marker_tag(record)]
    with pytest.raises(DbtDatabaseError, match="not sent"):  # the holder's late ALTER
        catalogue.run(holders_alter)
    assert catalogue.columns == ["id", "note"]


# -- settling other runs' pending tables


@pytest.mark.parametrize("legacy", [False, True], ids=["record", "on-pending-table"])
@pytest.mark.parametrize("lost", [False, True])
def test_a_settler_that_loses_its_lease_moves_nothing_more(
    tmp_path: Path, lost: bool, legacy: bool
):
    """A run settling a dead run's pending table (its load is in the table's log: moved) holds
    the model's settling lease; stalled past it after marking the dead run's record taken over,
    and the settling lease taken over by a third run, it sends nothing more: no quarantine
    made, no MERGE, no drop (`LeaseLost`). The control moves the rows and drops the record.
    `legacy`: the bookkeeping on the pending table itself, as builds before the record wrote it."""
    from dbt.adapters.spark_contracts.core.recovery.pending import (
        SETTLE_SUFFIX,
        TAG_PROPERTY,
        Application,
    )
    from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
    from dbt.adapters.spark_contracts.run.record_io import read_lease

    catalogue = Catalogue()
    catalogue.history.append((3, "WRITE", TAG))  # the dead run's load
    dead = gone_pid()
    pending = "db.t__quarantine__pending_inv"
    record = pending if legacy else "db.t__dbt_lease_inv"
    says = {
        TAG_PROPERTY: TAG,
        RUN_PROPERTY: "inv",
        BEAT_PROPERTY: "5.0",
        CLIENT_PROPERTY: f"{this_client().host}/{dead}",
        APP_PROPERTY: f"session://{this_client().host}/{dead} local-1",
    }
    catalogue.tables[pending] = {}
    catalogue.tables[record] = {**says, **({} if legacy else {PENDING_PROPERTY: pending})}
    here = Application(f"session://{this_client().host}/{os.getpid()}", "local-2")
    catalogue.application = lambda: here  # type: ignore[attr-defined]
    catalogue.relation_schema = lambda relation, describable: _pending_schema()  # type: ignore[method-assign]
    catalogue.fetch = _holds_nothing(catalogue.fetch)  # type: ignore[method-assign]
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    records: List[RunRecord] = [] if legacy else [read_lease(catalogue, record)]  # type: ignore[arg-type, list-item]
    settle = lease_name("db.t", "inv2", SETTLE_SUFFIX)
    if lost:
        stall_and_take_over_at(
            catalogue, rf"^alter table {record} set tblproperties", runner.leases, settle
        )
        with pytest.raises(LeaseLost):
            settle_pending(
                runner.spark,
                runner.leases,
                runner.book,
                key(),
                "db.t__quarantine",
                records,
                [pending],
            )
        later = after(catalogue, rf"^alter table {record} set tblproperties")
        assert not [s for s in later if "quarantine" in s and "heartbeat" not in s], later
        assert pending in catalogue.tables and record in catalogue.tables  # left for the taker
    else:
        done = settle_pending(
            runner.spark, runner.leases, runner.book, key(), "db.t__quarantine", records, [pending]
        )
        assert done and "moved" in done[0], done
        assert any(s.startswith("merge into db.t__quarantine") for s in catalogue.sent)
        assert pending not in catalogue.tables and record not in catalogue.tables


def _pending_schema() -> Any:
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type

    return parse_type("struct<id:int,_dbt_run_id:string>")


def _holds_nothing(fetch: Callable[[str], List[Dict[str, Any]]]):
    """The quarantine holds no row of the dead run yet."""

    def fetched(sql: str) -> List[Dict[str, Any]]:
        if sql.startswith("select 1 as held from"):
            return []
        return fetch(sql)

    return fetched


# -- a beat after a lapse; the move of a run's own rows after a takeover


def test_a_thread_beat_after_a_lapse_does_not_make_the_lease_fresh_again():
    """Resumed after a stop, the heartbeat thread's beat may land on a lease another run has
    marked taken over (a beat does not see the mark): only a fence that beats and then reads the
    lease back may call it fresh again. Continuous beats keep it fresh (the control)."""
    catalogue = Catalogue()
    catalogue.tables[LEASE] = {RUN_PROPERTY: "inv2", BEAT_PROPERTY: "5.0"}
    lapsed = Heartbeat(catalogue, LEASE, interval=0.02, since=time.monotonic() - 1_000.0)
    steady = Heartbeat(catalogue, LEASE, interval=0.02, since=time.monotonic())
    started = steady.last
    lapsed.start(), steady.start()
    try:
        deadline = time.monotonic() + 10
        while len(catalogue.sent) < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        lapsed.stop(), steady.stop()
    assert len(catalogue.sent) >= 6  # both beat
    assert not lapsed.fresh()
    assert steady.fresh() and steady.last > started


@pytest.mark.parametrize("lost", [False, True])
def test_a_move_that_fails_after_the_pending_table_was_taken_over_is_a_lost_lease(
    tmp_path: Path, lost: bool
):
    """The run stalled between its fence and the move of its own discarded rows; another run
    took the pending table over, moved the rows and dropped it; resumed, the run's INSERT fails.
    It fails with `LeaseLost` (the rows are in the quarantine, moved by that run), not with
    `QuarantinePending`, which would say they wait in a table that is gone. The control
    (`lost=False`: the same failure, the lease still held) keeps the rows pending."""
    from dbt.adapters.spark_contracts.run.outcome_events import Counted
    from dbt.adapters.spark_contracts.run.run_errors import QuarantinePending

    catalogue = Catalogue()
    pending = "iceberg.db.t__quarantine__pending_inv2"
    record = "iceberg.db.t__dbt_lease_inv2"  # the run's record, which names its pending table
    catalogue.tables[pending] = {}
    catalogue.tables[record] = {
        RUN_PROPERTY: "inv2",
        BEAT_PROPERTY: "5.0",
        PENDING_PROPERTY: pending,
        SHARED_PROPERTY: "true",
    }
    catalogue.fail = r"^(insert|merge) into"  # the move (Iceberg: a MERGE on the run's id)
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    run = SimpleNamespace(
        relation="iceberg.db.t",
        table_format="iceberg",
        quarantine_table="iceberg.db.t__quarantine",
        invocation_id="inv2",
        unique_id="model.p.m",
        batch_tag="",
    )
    runner.events.add(Counted(3, 0))
    runner.state.pending = pending
    runner.leases.held = Heartbeat(catalogue, record, since=time.monotonic() - 1_000.0)
    if lost:
        del catalogue.tables[pending]  # moved and dropped by the run that took it over
        catalogue.tables[record][TAKEN_PROPERTY] = "inv3"
        with pytest.raises(LeaseLost):
            runner.quarantine.finish(run)  # type: ignore[arg-type]
        assert runner.state.pending is None
        assert record in catalogue.tables  # it names rows: the run that took it over drops it
    else:
        with pytest.raises(QuarantinePending):
            runner.quarantine.finish(run)  # type: ignore[arg-type]
        assert pending in catalogue.tables  # the rows wait, named by the record, released
        assert catalogue.tables[record][BEAT_PROPERTY] == "0"


@pytest.mark.parametrize("swapping", [False, True])
def test_a_run_that_fails_after_telling_its_swap_keeps_its_record(tmp_path: Path, swapping: bool):
    """A quarantining rebuild swapped in keeps one record, which the swap and the runner share
    (run/swap.building passes the runner's leases): a failure after the swap told the record
    keeps it, released, for the next run's recovery of the swap; the control (no swap told)
    drops it."""
    from dbt.adapters.spark_contracts.core.recovery.record import SWAP_PROPERTY

    catalogue = Catalogue()
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    run = model_run()
    runner.leases.take(run)  # type: ignore[arg-type]
    record = runner.leases.held.table  # type: ignore[union-attr]
    if swapping:
        runner.leases.write(run, {SWAP_PROPERTY: "db.t"})  # type: ignore[arg-type]
    runner.let_go(run)  # type: ignore[arg-type]
    assert runner.leases.held is None
    if swapping:
        assert catalogue.tables[record][SWAP_PROPERTY] == "db.t"
        assert catalogue.tables[record][BEAT_PROPERTY] == "0"
    else:
        assert record not in catalogue.tables


@pytest.mark.parametrize("dropped", [False, True])
def test_an_iceberg_holder_reads_its_record_past_the_catalogs_cache(tmp_path: Path, dropped: bool):
    """Iceberg's catalog caches a table it loaded: a holder that read its record once would see
    that copy, not the mark (or the drop) of the run that took it over, and commit on. The
    record is refreshed before each read, so the fence holds (`LeaseLost`)."""
    catalogue = Catalogue()
    run = model_run("iceberg.db.t", "iceberg")
    leases = Leases(catalogue)  # type: ignore[arg-type]
    leases.take(run)  # type: ignore[arg-type]
    record = leases.held.table  # type: ignore[union-attr]
    catalogue.fetch(f"show tblproperties {record}")  # loaded (and cached) by its session
    if dropped:
        del catalogue.tables[record]  # taken over, settled and dropped by another run
    else:
        take_over(catalogue, record)
    stall(leases)
    with pytest.raises(LeaseLost):
        leases.check(run)  # type: ignore[arg-type]


def test_a_renewal_slower_than_the_lease_is_an_unconfirmed_loss_not_a_takeover(monkeypatch):
    """The holder's beats were late (a busy server): before its step it beats again, but that
    beat takes longer than the lease allows, so another run may have judged the lease expired
    meanwhile. Nothing marks it taken over: the fence fails with `LeaseLost`, unconfirmed (how
    long since its last beat went through), and the message says so rather than naming a run
    that took it over, and says to raise the lease. The control: the same renewal, fast, is
    confirmed. The lease is taken at the default length (the thread's first beat comes after
    10 s, so only the fence's own beat is slowed), then shortened to 1 s."""
    for slow in (False, True):
        monkeypatch.delenv(heartbeat_module.LEASE_ENV, raising=False)
        catalogue = Catalogue()
        leases = lease_table(catalogue, key())
        beat = leases.held
        assert beat is not None
        monkeypatch.setenv(heartbeat_module.LEASE_ENV, "1")
        stall(leases)
        if slow:  # the renewing beat returns after more than the lease
            catalogue.when("heartbeat", lambda: time.sleep(1.0))
        try:
            if not slow:
                leases.check(key())
                assert leases.held is beat and beat.fresh()
                continue
            with pytest.raises(LeaseLost) as lost:
                leases.check(key())
        finally:
            leases.let_go(key())
        assert lost.value.taken_by is None and lost.value.renew_error is None
        assert lost.value.unconfirmed_after is not None
        assert lost.value.unconfirmed_after >= 0.9, lost.value.unconfirmed_after
        message = str(lost.value)
        assert "could not confirm its lease" in message and "took it over" not in message
        assert "too slowly" in message and "raise " + heartbeat_module.LEASE_ENV in message


def test_a_failed_renewal_is_an_unconfirmed_loss_that_names_its_error():
    """The fence's renewal fails every time (the connection is gone): the lease still reads
    as the run's own, but it is not confirmed. `LeaseLost` carries the renewal's error and says
    it, not that the server was slow."""
    catalogue = Catalogue()
    leases = lease_table(catalogue, key())
    try:
        stall(leases)
        catalogue.fail = "heartbeat"
        with pytest.raises(LeaseLost) as lost:
            leases.check(key())
    finally:
        catalogue.fail = None
        leases.let_go(key())
    assert lost.value.taken_by is None and lost.value.unconfirmed_after is not None
    assert lost.value.renew_error and "failed: alter table" in lost.value.renew_error
    message = str(lost.value)
    assert "renewing it failed (failed: alter table" in message, message
    assert "too slowly" not in message and "raise " not in message


def slow_beats(catalogue: Catalogue, table: str, seconds: float, sent_at: List[float]) -> None:
    """Every beat on `table` takes `seconds`; `sent_at` gets each beat's time."""

    def slow_beat() -> None:
        sent_at.append(time.monotonic())
        catalogue.when(f"alter table {table} .*heartbeat", slow_beat)
        time.sleep(seconds)

    catalogue.when(f"alter table {table} .*heartbeat", slow_beat)


def test_beats_slower_than_the_interval_keep_the_lease_fresh_on_a_steady_cadence(monkeypatch):
    """A beat that takes longer than the interval (a busy server) is followed by only a short
    wait: beats are sent every `interval` or every beat, not every `interval` plus the beat, so
    a 2-s lease (beats every 2/3 s) stays fresh throughout under 0.7-s beats (at most 2 beats
    and a tenth of an interval since the last one went through: 1.47 s of its 1.8-s window;
    with the wait after the beat it would be 2.73 s). Under 1.2-s beats (over four tenths of
    the lease) it lapses: the limit is the beats' time, as docs/run-guarantees.md says."""
    monkeypatch.setenv(heartbeat_module.LEASE_ENV, "2")
    catalogue = Catalogue()
    tables = {"db.t__dbt_lease_fast": 0.7, "db.t__dbt_lease_slow": 1.2}
    sent: Dict[str, List[float]] = {}
    beats = {}
    for table, seconds in tables.items():
        catalogue.tables[table] = {RUN_PROPERTY: "inv2", BEAT_PROPERTY: "5.0"}
        sent[table] = []
        slow_beats(catalogue, table, seconds, sent[table])
        beats[table] = Heartbeat(catalogue, table, since=time.monotonic())
    stale: Dict[str, List[bool]] = {table: [] for table in tables}
    for beat in beats.values():
        beat.start()
    try:
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:
            for table, beat in beats.items():
                stale[table].append(not beat.fresh())
            time.sleep(0.01)
    finally:
        for beat in beats.values():
            beat.stop()
    fast, slow = "db.t__dbt_lease_fast", "db.t__dbt_lease_slow"
    assert len(sent[fast]) >= 5, sent[fast]
    gaps = [b - a for a, b in zip(sent[fast], sent[fast][1:], strict=False)]
    assert max(gaps) < 1.0, gaps  # every beat (0.7 s) and a short wait, not 0.67 + 0.7 s
    assert not any(stale[fast]), "a lease under 0.7-s beats lapsed"
    assert any(stale[slow]), "a lease under 1.2-s beats stayed fresh"


def test_a_snapshot_rolled_back_before_is_no_race_of_the_late_rollback(tmp_path: Path):
    """Another writer's snapshot taken off the lineage before the watch looked (4 on 1, not
    current) is not one that raced the rollback of the late snapshot 3: no `ForeignCommits`."""
    catalogue, record = late_catalogue(tmp_path)
    catalogue.snapshots += [(4, 1, "streaming-job"), (3, 1, TAG)]
    catalogue.snapshot = 3
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    done = runner.repair(key("inv4", "iceberg"), False) or ""
    assert "rolled back snapshot 3" in done and catalogue.snapshot == 1, done
    assert record not in catalogue.tables


def test_a_watch_is_acted_on_only_when_its_run_committed_late_or_is_gone(tmp_path: Path):
    """The repair step looks without the lease first (`late.to_do`, reads only): a watch with
    nothing landed and its run's application alive takes no lease (a concurrent run of the
    model is not held up); a late snapshot, or the application gone, does."""
    from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
    from dbt.adapters.spark_contracts.run import late

    catalogue, record_table = late_catalogue(tmp_path)

    def record() -> RunRecord:
        return RunRecord.from_properties(record_table, catalogue.tables[record_table])

    sent = len(catalogue.sent)
    assert not late.to_do(catalogue, record(), "iceberg.db.t", "iceberg")  # type: ignore[arg-type]
    assert not [s for s in catalogue.sent[sent:] if not s.startswith(("refresh", "select"))]
    catalogue.snapshots.append((3, 1, TAG))
    catalogue.snapshot = 3
    assert late.to_do(catalogue, record(), "iceberg.db.t", "iceberg")  # type: ignore[arg-type]
    catalogue.snapshot = 1
    catalogue.here = Application("thrift://server:10000", "app-2")  # the server restarted
    assert late.to_do(catalogue, record(), "iceberg.db.t", "iceberg")  # type: ignore[arg-type]


def test_the_settler_leaves_a_record_whose_late_commit_is_watched(tmp_path: Path):
    """A record with pending rows and a watch is its repair's first (a late load rolled back is
    no load): no claim of the settler names it or its pending table."""
    from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
    from dbt.adapters.spark_contracts.run.settle import claims

    properties = {
        RUN_PROPERTY: "inv",
        BEAT_PROPERTY: "0",
        PENDING_PROPERTY: "iceberg.db.t__quarantine__pending_inv",
        LATE_PROPERTY: f"1 {TAG}",
    }
    watched = RunRecord.from_properties("iceberg.db.t__dbt_lease_inv", properties)
    assert watched.pending is not None and watched.late is not None
    pendings = ["iceberg.db.t__quarantine__pending_inv"]
    assert claims(Catalogue(), [watched], pendings, "model.p.m") == []  # type: ignore[arg-type]
    unwatched = RunRecord.from_properties(
        "iceberg.db.t__dbt_lease_inv", {k: v for k, v in properties.items() if k != LATE_PROPERTY}
    )
    assert [c.lease for c in claims(Catalogue(), [unwatched], pendings, "m")] == [  # type: ignore[arg-type]
        "iceberg.db.t__dbt_lease_inv"
    ]


def test_a_late_snapshot_landing_during_the_repair_is_watched_from_the_restore_point(
    tmp_path: Path,
):
    """The dead run's statement commits right after the repair's rollback (snapshot 3 on 1):
    the watch starts at the snapshot the repair went back to (1), not at the one current after
    it, so the next repair finds snapshot 3 and rolls it back."""
    intent = dead_intent("iceberg")
    catalogue = repair_catalogue(intent)
    catalogue.tables[record_of(intent)][APP_PROPERTY] = "thrift://server:10000 app-1"

    def lands() -> None:
        catalogue.snapshots.append((3, 1, TAG))
        catalogue.snapshot = 3

    catalogue.when("rollback_to_snapshot", lands)
    Runner(catalogue, RunReport(), tmp_path).repair(key(table_format="iceberg"), False)  # type: ignore[arg-type]
    watch = LateWatch.from_property(catalogue.tables[record_of(intent)][LATE_PROPERTY])
    assert watch == LateWatch(1, TAG)
    done = Runner(catalogue, RunReport(), tmp_path).repair(key("inv4", "iceberg"), False) or ""  # type: ignore[arg-type]
    assert "rolled back snapshot 3" in done and catalogue.snapshot == 1, done


@pytest.mark.parametrize("state", list(LeaseState))
@pytest.mark.parametrize("guarded", [False, True])
@pytest.mark.parametrize("gone", [False, True])
def test_only_an_unguarded_format_with_a_holder_not_proven_gone_refuses_a_takeover(
    state, guarded, gone
):
    from dbt.adapters.spark_contracts.core.recovery.lease import unguarded_takeover

    expected = not guarded and not gone and state is not LeaseState.DEAD
    assert unguarded_takeover(state, guarded, gone) is expected


def test_the_formats_that_guard_a_late_write():
    from dbt.adapters.spark_contracts.core.evolution.capabilities import row_of

    assert [f for f in ("delta", "iceberg", "parquet") if row_of(f).guards_late_writes] == [
        "delta",
        "iceberg",
    ]


def test_only_iceberg_moves_a_runs_own_discarded_rows_by_a_merge():
    """Delta fences the append inside its commit; Parquet checks no commit; Iceberg checks a
    MERGE's commit against appends since it read, and fences no append."""
    from dbt.adapters.spark_contracts.core.evolution.capabilities import row_of

    formats = ("delta", "iceberg", "parquet")
    assert [f for f in formats if row_of(f).moves_own_rows_by_merge] == ["iceberg"]


def test_a_refused_lease_whose_record_holds_work_is_released_by_hand_not_dropped(
    monkeypatch: pytest.MonkeyPatch,
):
    """The record of a Parquet swap stopped between its renames is what the next run puts the
    old table back from: the repair by hand releases the lease and keeps the record."""
    from dbt.adapters.spark_contracts.core.recovery.record import SWAP_PROPERTY
    from dbt.adapters.spark_contracts.run import lease as lease_module
    from dbt.adapters.spark_contracts.run.run_errors import UnguardedTakeover

    monkeypatch.setenv(heartbeat_module.LEASE_ENV, "0.3")
    sleep = lease_module.time.sleep
    monkeypatch.setattr(lease_module.time, "sleep", lambda s: sleep(min(s, 0.1)))
    catalogue = Catalogue()
    expired = marked(gone_pid(), app="thrift://server:10000 app-1")
    del expired[TAKEN_PROPERTY]
    expired[BEAT_PROPERTY] = "12.5"
    expired[SWAP_PROPERTY] = "db.t"
    catalogue.tables["db.t__dbt_lease_dead"] = expired
    with pytest.raises(UnguardedTakeover) as refused:
        Leases(catalogue).alone(key(table_format="parquet"))  # type: ignore[arg-type]
    release = f"ALTER TABLE db.t__dbt_lease_dead SET TBLPROPERTIES ('{BEAT_PROPERTY}' = '0')"
    assert release in str(refused.value) and "DROP TABLE" not in str(refused.value)


def test_a_settler_claims_a_watched_delta_records_fenced_rows_and_keeps_its_watch():
    """A Delta record kept for its watch whose pending rows' load carries the transaction id
    (the marker made the log final for it) is the settler's; once settled, the record stays,
    without its pending table, for the watch (an Iceberg one waits for its watch first)."""
    from dbt.adapters.spark_contracts.core.recovery.pending import FENCED_PROPERTY
    from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
    from dbt.adapters.spark_contracts.run.settle import claims, settled

    pending = "db.t__quarantine__pending_inv"
    says = {
        RUN_PROPERTY: "inv",
        BEAT_PROPERTY: "0",
        PENDING_PROPERTY: pending,
        LATE_PROPERTY: f"3 {TAG}",
        FENCED_PROPERTY: "dbt-spark-contracts-lease:t__dbt_lease_inv:abc",
    }
    watched = RunRecord.from_properties("db.t__dbt_lease_inv", says)
    assert watched.pending is not None and watched.pending.fenced_writes and watched.late
    assert [c.lease for c in claims(Catalogue(), [watched], [pending], "m")] == [  # type: ignore[arg-type]
        "db.t__dbt_lease_inv"
    ]
    unfenced = RunRecord.from_properties(
        "db.t__dbt_lease_inv", {k: v for k, v in says.items() if k != FENCED_PROPERTY}
    )
    assert claims(Catalogue(), [unfenced], [pending], "m") == []  # type: ignore[arg-type]

    catalogue = Catalogue()
    catalogue.tables["db.t__dbt_lease_inv"] = dict(says)
    settled(catalogue, watched, "delta")  # type: ignore[arg-type]
    kept = RunRecord.from_properties("db.t__dbt_lease_inv", catalogue.tables["db.t__dbt_lease_inv"])
    assert kept.pending is None and kept.late == watched.late
    plain = RunRecord.from_properties(
        "db.t__dbt_lease_inv", {k: v for k, v in says.items() if k != LATE_PROPERTY}
    )
    settled(catalogue, plain, "delta")  # type: ignore[arg-type]
    assert "db.t__dbt_lease_inv" not in catalogue.tables
