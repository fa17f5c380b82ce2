"""The Iceberg repair's fence against a late rollback (run/rollback_fence.py), over a scripted
table that answers the statements the fence sends (no Spark): the empty commit, the check that
the current snapshot is that commit on the target, the watches re-anchored, the expiry, and a
late rollback landing in between."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Dict, List, Optional

import pytest

from dbt.adapters.spark_contracts.core.recovery.late import LATE_PROPERTY, LateWatch
from dbt.adapters.spark_contracts.run.model_run import ICEBERG_SNAPSHOT_TAG
from dbt.adapters.spark_contracts.run.rollback_fence import FenceNotBuilt, fence_off

TABLE = "iceberg.db.t"
RECORD = "iceberg.db.t__dbt_lease_dead"
OWN = "dbt-spark-contracts:taker:model.p.m:aaaa"


class Table:
    """Snapshots (id -> (parent, operation, tag)), the current one, the session's tag, and
    what was sent. `late_rollback_at_expiry`: a late rollback to the target lands right before
    the first expiry (which then fails: the target is current again)."""

    def __init__(self, chain: List[tuple], late_rollback_at_expiry: bool = False) -> None:
        self.snapshots: Dict[int, tuple] = {}
        parent: Optional[int] = None
        for sid, op, tag in chain:
            self.snapshots[sid] = (parent, op, tag)
            parent = sid
        self.current = parent
        self.conf: Dict[str, Optional[str]] = {ICEBERG_SNAPSHOT_TAG: OWN}
        self.sent: List[str] = []
        self.late = late_rollback_at_expiry
        self.next_id = 100

    def run(self, sql: str) -> None:
        self.sent.append(sql)
        if sql.startswith("insert into") and sql.endswith("where false"):
            self.next_id += 1
            tag = self.conf.get(ICEBERG_SNAPSHOT_TAG)
            self.snapshots[self.next_id] = (self.current, "append", tag)
            self.current = self.next_id
        elif "expire_snapshots" in sql:
            target = int(re.search(r"array\((\d+)\)", sql).group(1))  # type: ignore[union-attr]
            if self.late:
                self.late, self.current = False, target
            if target == self.current:
                raise RuntimeError(f"Cannot expire {target}. Still referenced by refs: [main]")
            del self.snapshots[target]

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        self.sent.append(sql)
        if ".refs" in sql:
            return [{"snapshot_id": self.current}]
        if ".snapshots" in sql:
            return [
                {"snapshot_id": sid, "parent_id": parent, "operation": op, "tag": tag}
                for sid, (parent, op, tag) in self.snapshots.items()
            ]
        if sql.startswith("show tables"):
            return []  # no other run's record
        if sql.startswith("refresh table"):  # before a record is dropped (record_io.drop_record)
            return []
        raise AssertionError(sql)

    def get_conf(self, key: str) -> Optional[str]:
        return self.conf.get(key)

    def set_conf(self, key: str, value: Optional[str]) -> None:
        self.conf[key] = value

    def writes(self) -> List[str]:
        return [s.split()[0] for s in self.sent if not s.startswith(("refresh", "select", "show"))]


def test_the_target_is_expired_behind_an_empty_commit_under_a_marker_tag():
    table = Table([(1, "append", "a"), (2, "append", "b")])  # the repair put it back to 2
    done = fence_off(table, TABLE, 2, RECORD, "taker")  # type: ignore[arg-type]
    assert done and "expired snapshot 2" in done
    assert table.writes() == ["insert", "call"]
    assert 2 not in table.snapshots and table.snapshots[table.current][0] == 2
    assert table.snapshots[table.current][2].startswith("dbt-spark-contracts-fence:")
    assert table.conf[ICEBERG_SNAPSHOT_TAG] == OWN  # the session's tag set back
    assert "older_than => timestamp '1970-01-01 00:00:01'" in table.sent[-1]


def test_a_commit_on_the_target_since_the_repair_expires_nothing():
    # 3: a late commit of the dead run, landed on the target after the rollback
    table = Table([(1, "append", "a"), (2, "append", "b"), (3, "overwrite", "late")])
    with pytest.raises(FenceNotBuilt, match="not this repair's empty commit"):
        fence_off(table, TABLE, 2, RECORD, "taker")  # type: ignore[arg-type]
    assert table.writes() == [] and 2 in table.snapshots


def test_a_target_gone_already_needs_nothing():
    table = Table([(1, "append", "a"), (2, "append", "b")])
    assert fence_off(table, TABLE, 7, RECORD, "taker") is None  # type: ignore[arg-type]
    assert table.writes() == []


def test_a_late_rollback_before_the_expiry_makes_both_again():
    table = Table([(1, "append", "a"), (2, "append", "b")], late_rollback_at_expiry=True)
    done = fence_off(table, TABLE, 2, RECORD, "taker")  # type: ignore[arg-type]
    assert done and table.writes() == ["insert", "call", "insert", "call"]
    assert 2 not in table.snapshots and table.snapshots[table.current][0] == 2


def test_a_refused_expiry_is_named_with_the_expiry_by_hand():
    class Tagged(Table):
        def run(self, sql: str) -> None:
            if "expire_snapshots" in sql:
                self.sent.append(sql)
                raise RuntimeError("Cannot expire 2. Still referenced by refs: [tag-x]")
            super().run(sql)

    table = Tagged([(1, "append", "a"), (2, "append", "b")])
    with pytest.raises(FenceNotBuilt) as raised:
        fence_off(table, TABLE, 2, RECORD, "taker")  # type: ignore[arg-type]
    assert "tag-x" in str(raised.value) and "snapshot_ids => array(2)" in str(raised.value)


def test_watches_the_expiry_would_cut_off_are_re_anchored(monkeypatch):
    """Another run's armed watch at the target or below it moves to the empty commit; one
    above it (none here) or unarmed stays."""
    from dbt.adapters.spark_contracts.run import rollback_fence

    records = [
        type("R", (), {"table": "iceberg.db.t__dbt_lease_x", "late": LateWatch(1, "tag-x")}),
        type("R", (), {"table": "iceberg.db.t__dbt_lease_y", "late": LateWatch(None, "tag-y")}),
        type("R", (), {"table": "iceberg.db.t__dbt_lease_z", "late": LateWatch(None, "z", False)}),
    ]
    monkeypatch.setattr(rollback_fence, "other_records", lambda *a, **k: records)
    table = Table([(1, "append", "a"), (2, "append", "b")])
    fence_off(table, TABLE, 2, RECORD, "taker")  # type: ignore[arg-type]
    moved = [s for s in table.sent if LATE_PROPERTY in s]
    assert len(moved) == 1 and "t__dbt_lease_x" in moved[0], moved
    assert f"{table.current} tag-x" in moved[0]


class Rollbacks(Table):
    """A table whose rollback sets the current snapshot, as Iceberg's does (no commit)."""

    def run(self, sql: str) -> None:
        found = re.search(r"rollback_to_snapshot\('db\.t', (\d+)\)", sql)
        if found:
            self.sent.append(sql)
            self.current = int(found.group(1))
            return
        super().run(sql)


def test_a_take_back_rolls_back_and_names_the_snapshot_to_fence():
    """A dead run's late snapshot (3, its tag) taken back by a repairer (run/late.take_back):
    the rollback alone, and the snapshot it went back to (2) returned, which the repair step
    fences off once every watch was looked at (run/restore.py), where a run whose lease it took
    over may still send the same rollback."""
    from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
    from dbt.adapters.spark_contracts.run import late

    table = Rollbacks([(1, "append", "a"), (2, "append", "b"), (3, "overwrite", "late")])
    record = RunRecord(RECORD, "dead", "12.5", late=LateWatch(2, "late"))
    taken = late.take_back(table, record, TABLE, "iceberg", "model.p.m")  # type: ignore[arg-type]
    assert taken is not None and "rolled back snapshot 3" in taken[0] and taken[1] == 2
    assert table.current == 2 and table.writes() == ["call"]
    done = fence_off(table, TABLE, taken[1], RECORD, "taker")  # type: ignore[arg-type]
    assert done and 2 not in table.snapshots and table.snapshots[table.current][0] == 2


class Killed(BaseException):
    """The process killed (`kill -9`) right before a statement: nothing after it runs."""


class Recorded(Rollbacks):
    """`Rollbacks` with the records' properties as the repair sets and unsets them, killed
    right before the first statement that starts with `kill_before`."""

    def __init__(self, chain: List[tuple], kill_before: Optional[str] = None) -> None:
        super().__init__(chain)
        self.kill_before = kill_before
        self.properties: Dict[str, Dict[str, str]] = {}

    def run(self, sql: str) -> None:
        if self.kill_before and sql.startswith(self.kill_before):
            raise Killed(sql)
        found = re.match(
            r"alter table (\S+) (set|unset) tblproperties (?:if exists )?\((.*)\)", sql
        )
        if found:
            self.sent.append(sql)
            said = self.properties.setdefault(found.group(1), {})
            if found.group(2) == "set":
                said.update(re.findall(r"'([^']+)' = '([^']*)'", found.group(3)))
            else:
                for name in re.findall(r"'([^']+)'", found.group(3)):
                    said.pop(name, None)
            return
        super().run(sql)

    def application(self) -> Any:
        """Where this run's statements run: a server, so nothing proves a run's gone."""
        from dbt.adapters.spark_contracts.core.recovery.pending import Application

        return Application("sc://spark:15002", "app-1")


class RepairLease:
    """The model's lease as the repair step holds it (run/lease.Leases): `undo_may_land`, a run
    whose lease it took over may still send a rollback."""

    def __init__(self, undo_may_land: bool) -> None:
        self.undo_may_land, self.watching = undo_may_land, []

    def check(self, key: Any) -> None:
        pass


def test_a_take_back_killed_between_its_rollback_and_its_fence_leaves_the_fence_due():
    """A repairer that takes a dead run's late snapshot (3) back, where a run whose lease it
    took over may still send the same rollback, notes on the watched record, before its
    rollback, the snapshot it rolls back to (2). Killed after the rollback, before its fence,
    it leaves that note: the next repair step has something to do for the record, builds the
    fence (2 expired behind an empty commit) although its own takeover found no run that may
    still send a rollback, and takes the note off. Without the note (a record as earlier builds
    left it) the next repair found nothing to do, and 2 stayed for a late rollback to go to."""
    from dbt.adapters.spark_contracts.core.recovery.late import FENCE_DUE_PROPERTY
    from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
    from dbt.adapters.spark_contracts.run import late
    from dbt.adapters.spark_contracts.run.lease import ModelKey
    from dbt.adapters.spark_contracts.run.restore import Restorer

    table = Recorded(
        [(1, "append", "a"), (2, "append", "b"), (3, "overwrite", "late")],
        kill_before="insert into",  # the fence's empty commit
    )
    watched = RunRecord(RECORD, "dead", "12.5", late=LateWatch(2, "late"))
    first = ModelKey(TABLE, "taker", "iceberg", "model.p.m")
    with pytest.raises(Killed):
        Restorer(table, RepairLease(True))._repaired(first, False, [watched])  # type: ignore[arg-type]
    assert table.current == 2 and 2 in table.snapshots  # rolled back, not fenced off
    noted = next(i for i, s in enumerate(table.sent) if FENCE_DUE_PROPERTY in s)
    rolled = next(i for i, s in enumerate(table.sent) if "rollback_to_snapshot" in s)
    assert noted < rolled and table.properties[RECORD] == {FENCE_DUE_PROPERTY: "2"}

    table.kill_before = None
    said = {**table.properties[RECORD], LATE_PROPERTY: "2 late"}
    left = RunRecord.from_properties(RECORD, said)
    assert left.fence_due == 2 and late.to_do(table, left, TABLE, "iceberg")  # type: ignore[arg-type]
    before = replace(left, fence_due=None)  # as an earlier build left it: nothing to do
    assert not late.to_do(table, before, TABLE, "iceberg")  # type: ignore[arg-type]
    nxt = ModelKey(TABLE, "next", "iceberg", "model.p.m")
    done = Restorer(table, RepairLease(False))._repaired(nxt, False, [left])  # type: ignore[arg-type]
    assert done and "expired snapshot 2" in done
    assert 2 not in table.snapshots and table.snapshots[table.current][0] == 2
    assert FENCE_DUE_PROPERTY not in table.properties[RECORD]


def test_a_due_fence_whose_snapshot_left_the_lineage_is_passed_over():
    """A fence due on a snapshot the table was rolled back past (a later take-back went lower):
    no rollback can name it (it must be an ancestor of the current snapshot), nothing is sent."""
    table = Recorded([(1, "append", "a"), (2, "append", "b")])
    table.current = 1  # 2 left the lineage
    assert fence_off(table, TABLE, 2, RECORD, "taker") is None  # type: ignore[arg-type]
    assert table.writes() == [] and 2 in table.snapshots


def test_fences_due_are_built_nearest_the_current_snapshot_first():
    """A note left on one record (snapshot 2: a take-back killed before its fence) and, this
    run, a take-back of a late commit (4) to 3, another writer's commit on 2. Fencing 2 first
    would find that commit on it and fail every run (`FenceNotBuilt`, the note staying); 3,
    nearest the current snapshot, is fenced first, which cuts 2 off the lineage: passed over.
    Both notes are taken off (the taken-back record is dropped)."""
    from dbt.adapters.spark_contracts.core.recovery.late import FENCE_DUE_PROPERTY
    from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
    from dbt.adapters.spark_contracts.run.lease import ModelKey
    from dbt.adapters.spark_contracts.run.restore import Restorer

    table = Recorded(
        [(1, "append", "a"), (2, "append", "b"), (3, "append", "other"), (4, "overwrite", "late")]
    )
    noted = RunRecord(RECORD + "_a", "a", "12.5", late=LateWatch(2, "gone"), fence_due=2)
    watched = RunRecord(RECORD, "dead", "12.5", late=LateWatch(3, "late"))
    key = ModelKey(TABLE, "taker", "iceberg", "model.p.m")
    done = Restorer(table, RepairLease(True))._repaired(key, False, [noted, watched])  # type: ignore[arg-type]
    assert done and "rolled back snapshot 4" in done and "expired snapshot 3" in done, done
    assert 3 not in table.snapshots and 2 in table.snapshots
    assert FENCE_DUE_PROPERTY not in table.properties[RECORD + "_a"]
    assert any(s.startswith(f"drop table if exists {RECORD} ") for s in table.sent), table.sent


def test_lease_takers_markers_on_the_target_stand_for_the_empty_commit():
    """A takeover commits an empty snapshot under its marker tag on whatever is current
    (run/fence.history_marker): two runs that took leases over after the rollback left two on
    the target. They change nothing, so the fence expires the target behind them, with no
    commit of its own; a commit that is no marker among them expires nothing."""
    from dbt.adapters.spark_contracts.core.recovery.txn_fence import marker_tag

    mark = marker_tag(RECORD)
    table = Table(
        [(1, "append", "a"), (2, "append", "b"), (3, "append", mark), (4, "append", mark)]
    )
    done = fence_off(table, TABLE, 2, RECORD, "taker")  # type: ignore[arg-type]
    assert done and "expired snapshot 2" in done and "empty commit 4" in done, done
    assert table.writes() == ["call"] and 2 not in table.snapshots
    chain = [(1, "append", "a"), (2, "append", "b"), (3, "overwrite", "late"), (4, "append", mark)]
    foreign = Table(chain)
    with pytest.raises(FenceNotBuilt, match="not this repair's empty commit"):
        fence_off(foreign, TABLE, 2, RECORD, "taker")  # type: ignore[arg-type]
    assert foreign.writes() == [] and 2 in foreign.snapshots
