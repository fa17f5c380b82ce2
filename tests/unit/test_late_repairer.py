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
    RunRecord,
)
from dbt.adapters.spark_contracts.run import Runner, RunReport
from dbt.adapters.spark_contracts.run import heartbeat as heartbeat_module
from dbt.adapters.spark_contracts.run import lease as lease_module
from dbt.adapters.spark_contracts.run.heartbeat import this_client
from dbt.adapters.spark_contracts.run.lease import Leases
from dbt.adapters.spark_contracts.run.model_run import DELTA_USER_METADATA
from dbt.adapters.spark_contracts.run.run_errors import LateCommits
from tests.unit.test_fence import (
    Catalogue,
    dead_intent,
    key,
    record_of,
    repair_catalogue,
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
    }


def taken_over(tmp_path: Path, app: str = "app-1") -> Catalogue:
    """inv's half change (its ADD COLUMNS at version 2; restore point 1), inv2's stalled
    repair, and inv3's repair, which takes inv2's lease over and RESTOREs (version 3)."""
    catalogue = repair_catalogue(dead_intent())
    catalogue.tables[STALLED] = stalled_repairer(app)
    catalogue.conf[DELTA_USER_METADATA] = TAKER_TAG
    done = Runner(catalogue, RunReport(), tmp_path).repair(key("inv3"), False, TAKER_TAG) or ""  # type: ignore[arg-type]
    assert "restored to Delta version 1" in done, done
    assert catalogue.history[-1] == (3, "RESTORE", TAKER_TAG)
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
    # marked at the takeover from version 2, moved on to the version after the RESTORE (3)
    assert record.late == LateWatch(3, STALLED_TAG)
    marks = [s for s in catalogue.sent if s.startswith(f"alter table {STALLED}")]
    assert LATE_PROPERTY in marks[0] and TAKEN_PROPERTY in marks[0], marks


def test_its_late_restore_over_the_takers_load_is_taken_back_by_the_next_repair(tmp_path: Path):
    """The taker loads (version 4); the stalled run's RESTORE to 1 lands on top (version 5),
    undoing that load: the next repair RESTOREs to 4 and drops the record."""
    catalogue = taken_over(tmp_path)
    catalogue.history.append((4, "WRITE", TAKER_TAG))
    catalogue.history.append((5, "RESTORE", STALLED_TAG))
    catalogue.restored[5] = 1
    done = next_repair(catalogue, tmp_path)
    assert "rolled back version 5 of run inv2" in done and "to version 4" in done, done
    assert "restore table db.t to version as of 4" in catalogue.sent
    assert STALLED not in catalogue.tables


def test_its_late_restore_to_where_the_taker_had_put_the_table_ends_the_watch(tmp_path: Path):
    """The stalled run's RESTORE lands after the taker's own (same target: it changed nothing),
    then the taker loads: nothing is taken back, no `LateCommits`, the watch ends."""
    catalogue = taken_over(tmp_path)
    catalogue.history.append((4, "RESTORE", STALLED_TAG))
    catalogue.restored[4] = 1
    catalogue.history.append((5, "WRITE", TAKER_TAG))
    sent = len(catalogue.sent)
    done = next_repair(catalogue, tmp_path)
    assert "put the table back to the state it was in already" in done, done
    assert not [s for s in catalogue.sent[sent:] if s.startswith("restore")]
    assert STALLED not in catalogue.tables


def test_its_late_restore_under_another_writers_commit_is_named(tmp_path: Path):
    catalogue = taken_over(tmp_path)
    catalogue.history += [(4, "WRITE", TAKER_TAG), (5, "RESTORE", STALLED_TAG)]
    catalogue.restored[5] = 1
    catalogue.history.append((6, "WRITE", "streaming-job"))
    with pytest.raises(LateCommits) as failed:
        next_repair(catalogue, tmp_path)
    assert failed.value.theirs[0].version == 5 and failed.value.under[0].version == 6
    assert STALLED in catalogue.tables


def test_nothing_landed_keeps_the_watch(tmp_path: Path):
    catalogue = taken_over(tmp_path)
    catalogue.history.append((4, "WRITE", TAKER_TAG))
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
