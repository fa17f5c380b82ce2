"""run/snapshot_run.py: a snapshot's schema changes and its merge, taken back together. A
scripted restorer stands in for the table's log; the statements fail where the test says."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.evolution.steps import Step
from dbt.adapters.spark_contracts.core.recovery.intent import Intent
from dbt.adapters.spark_contracts.run import snapshot_run
from dbt.adapters.spark_contracts.run.run_errors import ForeignCommits, RestoreFailed, RunUndone
from dbt.adapters.spark_contracts.run.snapshot_run import SnapshotRun

INTENT = Intent("inv", "snapshot.x", "db.s", "delta", 7, "tag")
STATEMENTS = ("ALTER TABLE db.s ADD COLUMNS (a INT)", "ALTER TABLE db.s ADD COLUMNS (b INT)")
STEPS = tuple(Step(sql) for sql in STATEMENTS)


class Restorer:
    def __init__(self, fails: BaseException | None = None):
        self.fails, self.restored = fails, []

    def restore(self, intent, executed):
        if self.fails is not None:
            raise self.fails
        self.restored.append((intent.restore_version, tuple(s.sql for s in executed)))
        return "restored to Delta version 7"

    def manual_repair(self, intent):
        return "RESTORE TABLE db.s TO VERSION AS OF 7"


def executor(fail_on: str | None):
    ran = []

    def execute(sql):
        if sql == fail_on:
            raise RuntimeError(f"boom: {sql}")
        ran.append(sql)
        return "OK"

    return execute, ran


@given(st.sampled_from([*STATEMENTS, "MERGE", None]))
def test_a_failure_anywhere_takes_back_exactly_what_ran(fail_on):
    execute, ran = executor(fail_on)
    undo = Restorer()
    run = SnapshotRun("snapshot.x", ("`a`",), INTENT)
    try:
        changed = snapshot_run.changed(run, STEPS, execute, undo)
        assert snapshot_run.merged(changed, "MERGE", execute, undo) == "OK"
    except RunUndone as exc:
        assert "boom" in str(exc) and "restored to Delta version 7" in str(exc)
        done = tuple(s for s in ran if s != "MERGE")
        assert undo.restored == [(7, done)]
        assert done  # nothing ran: nothing to take back, the error is raised as it is
    except RuntimeError:
        assert fail_on == STATEMENTS[0] and not undo.restored
    else:
        assert fail_on is None and not undo.restored and ran == [*STATEMENTS, "MERGE"]


def test_no_change_no_restore_the_merges_own_error():
    execute, _ = executor("MERGE")
    with pytest.raises(RuntimeError, match="boom"):
        snapshot_run.merged(SnapshotRun("snapshot.x", ()), "MERGE", execute, Restorer())


def test_a_failed_restore_names_both_failures_and_the_repair():
    execute, _ = executor("MERGE")
    run = SnapshotRun("snapshot.x", (), INTENT, STEPS)
    with pytest.raises(RestoreFailed) as raised:
        snapshot_run.merged(run, "MERGE", execute, Restorer(RuntimeError("restore broke")))
    message = str(raised.value)
    assert "boom" in message and "restore broke" in message and "RESTORE TABLE" in message


def test_another_writers_commit_is_never_undone():
    execute, _ = executor("MERGE")
    run = SnapshotRun("snapshot.x", (), INTENT, STEPS)
    foreign = ForeignCommits("db.s", 7, (), "The run's own changes were left in place.")
    with pytest.raises(ForeignCommits):
        snapshot_run.merged(run, "MERGE", execute, Restorer(foreign))
