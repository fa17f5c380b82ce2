"""A repairing run's own late RESTORE (run/late.on_takeover, moved_on): a run that repairs a dead
run's intent, stalled between its fence and its RESTORE past its lease, is taken over by a third
run, which repairs and loads; the stalled run's RESTORE, landing later, would undo that load.
Its record names its commit tag, so the taker watches for it, and the next repair takes it back
(or, where it put the table back to the state it was in already, ends the watch). On the lease
and restore paths over the statement-level `Catalogue` of test_fence.py (no Spark)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.core.recovery.late import LATE_PROPERTY, LateWatch
from dbt.adapters.spark_contracts.core.recovery.pending import (
    APP_PROPERTY,
    BEAT_PROPERTY,
    RUN_PROPERTY,
)
from dbt.adapters.spark_contracts.core.recovery.record import (
    CLIENT_PROPERTY,
    COMMIT_TAG_PROPERTY,
    TAKEN_PROPERTY,
    TXN_APP_PROPERTY,
    RunRecord,
)
from dbt.adapters.spark_contracts.run import Runner, RunReport, late
from dbt.adapters.spark_contracts.run import heartbeat as heartbeat_module
from dbt.adapters.spark_contracts.run import lease as lease_module
from dbt.adapters.spark_contracts.run.heartbeat import this_client
from dbt.adapters.spark_contracts.run.lease import Leases
from dbt.adapters.spark_contracts.run.model_run import DELTA_USER_METADATA
from dbt.adapters.spark_contracts.run.repair import repair
from dbt.adapters.spark_contracts.run.run_errors import (
    LateCommits,
    LeaseLost,
    RepairFirst,
    RestoreFailed,
)
from tests.unit.test_fence import (
    Catalogue,
    dead_intent,
    key,
    record_of,
    repair_catalogue,
    stall,
)

STALLED_TAG = "dbt-spark-contracts:inv2:model.p.m:aaaa"
TAKER_TAG = "dbt-spark-contracts:inv3:model.p.m:bbbb"
STALLED = "db.t__dbt_lease_inv2"


@pytest.fixture(autouse=True)
def _short_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lease that ran out is taken over within a second (the watch on this run's clock)."""
    monkeypatch.setenv(heartbeat_module.LEASE_ENV, "0.3")
    sleep = lease_module.time.sleep
    monkeypatch.setattr(lease_module.time, "sleep", lambda s: sleep(min(s, 0.1)))


def stalled_repairer(app: str = "app-1", tag: str = STALLED_TAG) -> dict:
    """The record of run inv2, repairing inv's intent, stalled (its process: this one, alive)
    past its lease; its statements run in the server's application `app`."""
    return {
        RUN_PROPERTY: "inv2",
        BEAT_PROPERTY: "12.5",
        CLIENT_PROPERTY: f"{this_client().host}/{os.getpid()}",
        APP_PROPERTY: f"thrift://server:10000 {app}",
        COMMIT_TAG_PROPERTY: tag,
        # a model lease's record names a transaction id: its taker commits a marker for it
        TXN_APP_PROPERTY: "dbt-spark-contracts-lease:db.t__dbt_lease_inv2:aaaa",
    }


def taken_over(tmp_path: Path, app: str = "app-1") -> Catalogue:
    """inv's half change (its ADD COLUMNS at version 2; restore point 1), inv2's stalled
    repair, and inv3's repair, which takes inv2's lease over (its marker for inv2's id:
    version 3) and RESTOREs (version 4)."""
    catalogue = repair_catalogue(dead_intent())
    catalogue.tables[STALLED] = stalled_repairer(app)
    catalogue.conf[DELTA_USER_METADATA] = TAKER_TAG
    done = Runner(catalogue, RunReport(), tmp_path).repair(key("inv3"), False, TAKER_TAG) or ""  # type: ignore[arg-type]
    assert "restored to Delta version 1" in done, done
    assert [h[1] for h in catalogue.history[3:]] == ["MERGE", "RESTORE"], catalogue.history
    assert record_of(dead_intent()) in catalogue.tables  # its own watch (app-1 still runs)
    return catalogue


def next_repair(catalogue: Catalogue, tmp_path: Path, invocation: str = "inv4") -> str:
    catalogue.conf[DELTA_USER_METADATA] = f"dbt-spark-contracts:{invocation}:model.p.m:cccc"
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    return runner.repair(key(invocation), False, catalogue.conf[DELTA_USER_METADATA]) or ""


def test_a_repairers_record_names_its_commit_tag(tmp_path: Path):
    catalogue = Catalogue()
    leases = Leases(catalogue)  # type: ignore[arg-type]
    leases.alone(key("inv2"), tag=STALLED_TAG)
    try:
        record = RunRecord.from_properties(STALLED, catalogue.tables[STALLED])
        assert record.tag == STALLED_TAG and record.intent is None
    finally:
        leases.let_go(key("inv2"))


def test_the_taker_watches_a_stalled_repairer_from_the_version_its_own_repair_left(
    tmp_path: Path,
):
    catalogue = taken_over(tmp_path)
    record = RunRecord.from_properties(STALLED, catalogue.tables[STALLED])
    assert record.taken_by == "inv3"
    # unarmed at the takeover (in its mark), armed from the version after the RESTORE (4)
    assert record.late == LateWatch(4, STALLED_TAG)
    marks = [s for s in catalogue.sent if s.startswith(f"alter table {STALLED}")]
    assert TAKEN_PROPERTY in marks[0] and f"'unarmed {STALLED_TAG}'" in marks[0], marks


def test_its_late_restore_over_the_takers_load_is_taken_back_by_the_next_repair(tmp_path: Path):
    """The taker loads (version 5); the stalled run's RESTORE to 1 lands on top (version 6),
    undoing that load: the next repair RESTOREs to 5 and drops the record."""
    catalogue = taken_over(tmp_path)
    catalogue.history.append((5, "WRITE", TAKER_TAG))
    catalogue.history.append((6, "RESTORE", STALLED_TAG))
    catalogue.restored[6] = 1
    done = next_repair(catalogue, tmp_path)
    assert "rolled back version 6 of run inv2" in done and "to version 5" in done, done
    assert "restore table db.t to version as of 5" in catalogue.sent
    assert STALLED not in catalogue.tables


def test_its_late_restore_to_where_the_taker_had_put_the_table_ends_the_watch(tmp_path: Path):
    """The stalled run's RESTORE lands after the taker's own (same target: it changed nothing),
    then the taker loads: nothing is taken back, no `LateCommits`, the watch ends. The taker's
    marker before its own RESTORE, and another marker (a later takeover's) between the two
    RESTOREs, change nothing either."""
    catalogue = taken_over(tmp_path)
    catalogue.history.append((5, "MERGE", "dbt-spark-contracts-fence:db.t__dbt_lease_inv9"))
    catalogue.history.append((6, "RESTORE", STALLED_TAG))
    catalogue.restored[6] = 1
    catalogue.history.append((7, "WRITE", TAKER_TAG))
    sent = len(catalogue.sent)
    done = next_repair(catalogue, tmp_path)
    assert "put the table back to the state it was in already" in done, done
    assert not [s for s in catalogue.sent[sent:] if s.startswith("restore")]
    assert STALLED not in catalogue.tables


def test_its_late_restore_under_another_writers_commit_is_named(tmp_path: Path):
    catalogue = taken_over(tmp_path)
    catalogue.history += [(5, "WRITE", TAKER_TAG), (6, "RESTORE", STALLED_TAG)]
    catalogue.restored[6] = 1
    catalogue.history.append((7, "WRITE", "streaming-job"))
    with pytest.raises(LateCommits) as failed:
        next_repair(catalogue, tmp_path)
    assert failed.value.theirs[0].version == 6 and failed.value.under[0].version == 7
    assert STALLED in catalogue.tables


def test_nothing_landed_keeps_the_watch(tmp_path: Path):
    catalogue = taken_over(tmp_path)
    catalogue.history.append((5, "WRITE", TAKER_TAG))
    assert "inv2" not in next_repair(catalogue, tmp_path)
    assert LATE_PROPERTY in catalogue.tables[STALLED]


def test_no_watch_where_the_repairers_application_is_gone(tmp_path: Path):
    """The server runs another application now: nothing of inv2 can still commit."""
    catalogue = taken_over(tmp_path, app="app-0")
    assert LATE_PROPERTY not in catalogue.tables.get(STALLED, {})


def test_no_watch_on_a_record_without_a_tag(tmp_path: Path):
    catalogue = repair_catalogue(dead_intent())
    catalogue.tables[STALLED] = stalled_repairer()
    del catalogue.tables[STALLED][COMMIT_TAG_PROPERTY]
    Runner(catalogue, RunReport(), tmp_path).repair(key("inv3"), False, TAKER_TAG)  # type: ignore[arg-type]
    assert LATE_PROPERTY not in catalogue.tables[STALLED]


def test_a_watch_its_takers_repair_did_not_arm_takes_nothing_back_and_is_armed_by_the_next(
    tmp_path: Path,
):
    """The taker marked inv2's record (unarmed watch) and cleared inv's intent, then died before
    its repair ended. inv2's RESTORE to 1 had landed before the taker's repair read the table
    (it repaired inv's change, which the taker then found nothing to put back of). The next
    repair takes nothing back (that RESTORE is the repair, not a late change over a load) and
    arms the watch from the version it leaves."""
    catalogue = Catalogue()
    catalogue.history += [(3, "RESTORE", STALLED_TAG)]
    catalogue.restored[3] = 1
    catalogue.tables[STALLED] = {
        **stalled_repairer(),
        TAKEN_PROPERTY: "inv3",
        BEAT_PROPERTY: "0",
        LATE_PROPERTY: LateWatch(None, STALLED_TAG, armed=False).to_property(),
    }
    record = RunRecord.from_properties(STALLED, catalogue.tables[STALLED])
    assert late.to_do(catalogue, record, "db.t", "delta")  # type: ignore[arg-type]
    sent = len(catalogue.sent)
    assert "inv2" not in next_repair(catalogue, tmp_path)
    assert not [s for s in catalogue.sent[sent:] if s.startswith("restore")]
    # armed after the version this repair left: its marker for inv2's transaction id (4)
    assert catalogue.history[-1][:2] == (4, "MERGE"), catalogue.history
    armed = RunRecord.from_properties(STALLED, catalogue.tables[STALLED]).late
    assert armed == LateWatch(4, STALLED_TAG)


def test_a_takeover_outside_a_repair_gives_no_watch():
    """A run's lease taken for its own change (no repair: no tag passed) marks a repairer's
    record taken over and gives it no watch: no RESTORE of that repairer can be pending then
    (the intent it repaired would still be there, and this run's repair step would have taken
    the lease over first)."""
    catalogue = Catalogue()
    catalogue.tables[STALLED] = stalled_repairer()
    leases = Leases(catalogue)  # type: ignore[arg-type]
    leases.alone(key("inv3"))
    leases.let_go(key("inv3"))
    assert catalogue.tables[STALLED][TAKEN_PROPERTY] == "inv3"
    assert LATE_PROPERTY not in catalogue.tables[STALLED]


def test_a_watch_that_found_only_a_restore_that_changed_nothing_has_something_to_do(
    tmp_path: Path,
):
    """The repair step takes the model's lease for it (to end the watch)."""
    catalogue = taken_over(tmp_path)
    catalogue.history.append((5, "RESTORE", STALLED_TAG))
    catalogue.restored[5] = 1
    record = RunRecord.from_properties(STALLED, catalogue.tables[STALLED])
    assert late.to_do(catalogue, record, "db.t", "delta")  # type: ignore[arg-type]


@pytest.mark.parametrize("answered", [False, True])
def test_a_repair_restore_without_an_answer_leaves_its_record_for_a_takers_watch(
    tmp_path: Path, answered: bool
):
    """A repair whose RESTORE ends with no answer from Spark (a server's connection lost: it
    may still commit) leaves its record as it is: not released, naming its tag, so the run that
    takes it over watches for that RESTORE. One Spark refused (an answer) lets go of it."""
    catalogue = repair_catalogue(dead_intent())
    catalogue.fail = r"^restore table db\.t"
    catalogue.failure = DbtDatabaseError if answered else RuntimeError
    with pytest.raises(RestoreFailed):
        Runner(catalogue, RunReport(), tmp_path).repair(key("inv2"), False, STALLED_TAG)  # type: ignore[arg-type]
    if answered:
        assert STALLED not in catalogue.tables
        return
    record = RunRecord.from_properties(STALLED, catalogue.tables[STALLED])
    assert record.tag == STALLED_TAG and not record.released


def test_a_repairer_whose_last_statement_came_late_leaves_its_watched_record(tmp_path: Path):
    """inv2's repair stalls past its lease as it sends its last statement (the dead run's
    record told its intent is cleared); a taker marks its record taken over and gives it a watch. Its repair's
    last fence finds the lease lost (`LeaseLost`), so inv2 does not drop its own record, and
    the taker's watch stays for the next run."""
    catalogue = repair_catalogue(dead_intent())
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]

    def taken() -> None:
        stall(runner.leases)
        catalogue.tables[STALLED][TAKEN_PROPERTY] = "inv3"
        catalogue.tables[STALLED][BEAT_PROPERTY] = "0"
        catalogue.tables[STALLED][LATE_PROPERTY] = f"unarmed {STALLED_TAG}"

    # its last statement: the dead run's record told its intent is cleared (it stays, watched)
    catalogue.when(rf"^alter table {record_of(dead_intent())} set tblproperties", taken)
    with pytest.raises(LeaseLost):
        runner.repair(key("inv2"), False, STALLED_TAG)
    assert LATE_PROPERTY in catalogue.tables[STALLED]


def test_an_iceberg_repair_without_an_answer_leaves_its_record_for_a_takers_fence(
    tmp_path: Path,
):
    """Iceberg's rollback carries no tag, so no taker could watch for it; its record is left
    as it is (not released), so the run that takes it over finds a run that may still roll
    back and fences the snapshot off (run/rollback_fence.py, test_kill.py's
    TestLateIcebergRepairerRollback on real Iceberg)."""
    intent = dead_intent("iceberg")
    catalogue = repair_catalogue(intent)
    catalogue.fail = r"rollback_to_snapshot"
    report = RunReport()
    with pytest.raises(RestoreFailed):
        Runner(catalogue, report, tmp_path).repair(key("inv2", "iceberg"), False, STALLED_TAG)  # type: ignore[arg-type]
    left = RunRecord.from_properties(
        "iceberg.db.t__dbt_lease_inv2", catalogue.tables["iceberg.db.t__dbt_lease_inv2"]
    )
    assert not left.released and left.tag == STALLED_TAG, left
    assert late.undo_may_land(catalogue, [left], "iceberg")  # type: ignore[arg-type]
    assert not late.undo_may_land(catalogue, [left], "delta")  # type: ignore[arg-type]
    # and a later batch of the invocation is held, as after a Delta repair's (runner.repair)
    assert report.half_changed(intent.relation) is not None


def test_a_later_batch_of_the_invocation_does_not_take_an_abandoned_repairs_record(tmp_path: Path):
    """A microbatch batch's repair whose RESTORE got no answer leaves its record for a taker.
    A later batch of the same invocation (same report: one invocation) would repair under the
    same record name: its repair step changes nothing and fails with `RepairFirst` naming that
    statement, so the record, with what a taker's watch needs, stays as the first batch left
    it."""
    catalogue = repair_catalogue(dead_intent())
    catalogue.fail = r"^restore table db\.t"
    catalogue.failure = RuntimeError  # no answer
    report = RunReport()
    report.start("inv2")
    with pytest.raises(RestoreFailed):
        Runner(catalogue, report, tmp_path).repair(key("inv2"), False, STALLED_TAG)  # type: ignore[arg-type]
    left = dict(catalogue.tables[STALLED])
    sent = len(catalogue.sent)
    catalogue.fail = None
    runner = Runner(catalogue, report, tmp_path)  # type: ignore[arg-type]
    with pytest.raises(RepairFirst, match=r"restore table db\.t"):
        repair(catalogue, runner, key("inv2"), (None, {}), lambda: (None, {}))
    assert catalogue.tables[STALLED] == left and len(catalogue.sent) == sent
    # the next invocation is not held up by it (the report starts again)
    report.start("inv3")
    assert report.half_changed("db.t") is None


def test_a_later_batchs_repair_step_repairs_and_settles_nothing(tmp_path: Path):
    """Where an earlier batch of the invocation left the model (its repair's statement, or a
    step, got no answer), a later batch's repair step changes nothing, even where it finds no
    dead run's intent to repair (the statement landed) and would go on to settle pending rows:
    `RepairFirst` before its first statement."""
    catalogue = Catalogue()
    report = RunReport()
    report.start("inv2")
    report.left_half_changed("db.t", "restore table db.t to version as of 1")
    runner = Runner(catalogue, report, tmp_path)  # type: ignore[arg-type]
    with pytest.raises(RepairFirst, match="restore table db.t"):
        repair(catalogue, runner, key("inv2"), (None, {}), lambda: (None, {}))
    assert catalogue.sent == []
    # a dry run reads as before (it changes nothing anyway)
    repair(catalogue, runner, key("inv2"), (None, {}), lambda: (None, {}), dry_run=True)
