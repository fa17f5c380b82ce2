"""The runner's undo (run/undo.undo) when a statement of the run's to its table got no
answer (`unanswered`: it may still commit), by format, by whether the statement carried the
lease's transaction id (`fenced`: a write of rows), whether the run had changed the table in
steps (an intent) and whether it holds pending rows. The table is put back at once only where
the table's log is final for the statement (Delta's marker sent under that id). Elsewhere the
run puts nothing back, leaves its record and lease (`abandon`) and fails with `StepUnanswered`
(or, with no change to put back, the statement's own error, its pending rows kept for the next
run). On Parquet, which keeps no log, the next run takes such a lease over only once the
statement can no longer run (test_fence.py). Whole runs over a scripted Delta table are
in test_fault_matrix.py; here each branch by its collaborators. The marker's outcome comes
from the format's own capability (run/fence.fences), not the test."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, List, Optional

import pytest

from dbt.adapters.spark_contracts.connection.errors import ConnectionLostError
from dbt.adapters.spark_contracts.core.materialization.run_plan import Build
from dbt.adapters.spark_contracts.run.fence import fences
from dbt.adapters.spark_contracts.run.outcome_events import Loaded
from dbt.adapters.spark_contracts.run.report import RunReport
from dbt.adapters.spark_contracts.run.run_errors import (
    LOAD_STEP,
    RepairFirst,
    RunUndone,
    StepUnanswered,
)
from dbt.adapters.spark_contracts.run.runner import Runner
from dbt.adapters.spark_contracts.run.undo import undo as undo_run

ALTER = "alter table db.m add columns (`x` bigint)"
FORMATS = ["delta", "iceberg", "parquet"]


class Leases:
    """The run's leases as undo uses them, noting what it asked. `connected`: a marker can be
    sent (the connection came back); whether it fences is the format's."""

    def __init__(self, connected: bool) -> None:
        self.connected, self.asked = connected, []  # type: ignore[var-annotated]
        self.held, self.swapping = "db.m__dbt_lease_inv1", False

    def check(self, run: Any) -> None:
        self.asked.append("check")

    def fence_off_own(self, run: Any) -> bool:
        self.asked.append("marker")
        return self.connected and fences(run.table_format)

    def abandon(self, step: str) -> None:
        self.asked.append("abandon")

    def release(self, run: Any, keep: bool) -> None:
        self.asked.append(f"release keep={keep}")


def undo(
    tmp_path: Path,
    table_format: str,
    step: str,
    fenced: bool,
    connected: bool = True,
    intent: bool = True,
    pending: Optional[str] = None,
    report: Optional[RunReport] = None,
    unanswered: bool = True,
    loaded: bool = False,
    put_back: str = "restored",
    restored_seen: Optional[List[bool]] = None,
) -> tuple[BaseException, List[str], List[Any], List[bool]]:
    """`loaded`: the run's load committed before `step` failed; `put_back`: what the restore
    says it did ("": nothing, a Parquet intent with no step to take back); `restored_seen`:
    collects what the undo told the quarantine's settling (whether the load was taken back)."""
    report = report or RunReport()
    runner = Runner(SimpleNamespace(), report, tmp_path)  # type: ignore[arg-type]
    leases, restores, settled = Leases(connected), [], []  # type: ignore[var-annotated]
    runner.leases = leases  # type: ignore[assignment]
    runner.restorer = SimpleNamespace(  # type: ignore[assignment]
        restore=lambda intent, executed, fence: restores.append(intent) or put_back
    )
    if loaded:
        runner.events.add(Loaded())

    def settle_own(run: Any, restored: bool, answered: bool = True) -> None:
        settled.append(answered)
        if restored_seen is not None:
            restored_seen.append(restored)
        if answered:  # the log is final: the rows moved or dropped, none left pending
            runner.state.pending = None

    runner.quarantine = SimpleNamespace(settle_own=settle_own)  # type: ignore[assignment]
    runner.record = lambda run: None  # type: ignore[method-assign]
    if intent:
        runner.state.intent = SimpleNamespace(table_format=table_format, removed_after_load=())  # type: ignore[assignment]
    runner.state.pending = pending
    run = SimpleNamespace(unique_id="model.p.m", relation="db.m", table_format=table_format)
    run.invocation_id = "inv-1"
    lost = ConnectionLostError("read timed out")
    with pytest.raises(Exception) as failed:
        undo_run(runner, run, lost, step, unanswered=unanswered, fenced=fenced)  # type: ignore[arg-type]
    return failed.value, leases.asked, restores, settled


@pytest.mark.parametrize("table_format", FORMATS)
@pytest.mark.parametrize("step", [LOAD_STEP, ALTER])
def test_a_change_in_steps_is_put_back_at_once_only_where_no_late_commit_can_overtake_it(
    tmp_path: Path, table_format: str, step: str
):
    fenced = step == LOAD_STEP  # a write of rows carries the id; an ALTER none
    error, asked, restores, _ = undo(tmp_path, table_format, step, fenced)
    final = fenced and table_format == "delta"  # only Delta fences inside the commit
    if final:  # restored now
        assert isinstance(error, RunUndone) and restores, (error, asked)
        assert "abandon" not in asked
    else:  # Parquet too: a restore and a release now could be overtaken by the statement
        assert isinstance(error, StepUnanswered) and not restores, (error, asked)
        assert asked[-1] == "abandon" and not [a for a in asked if a.startswith("release")]
        assert error.step == step and "db.m" in str(error)
        assert ("keeps no log" in str(error)) == (table_format == "parquet"), str(error)
    assert ("marker" in asked) == fenced, asked  # an ALTER: no marker fences it


@pytest.mark.parametrize("table_format", FORMATS)
@pytest.mark.parametrize("pending", [None, "db.m__quarantine__pending_inv1"])
def test_a_load_with_no_change_to_put_back_keeps_its_pending_rows_for_the_next_run(
    tmp_path: Path, table_format: str, pending: Optional[str]
):
    """No intent: nothing to restore. The run fails with the statement's own error; on Delta
    with its marker sent the log is final and its rows settled; where not, a run holding
    pending rows leaves its lease for the next run (Delta, Iceberg: it settles them from the
    log; Parquet: its rows kept for a person, test_settle_own.py). A Parquet load into a table
    over a server always has an intent (its record made first: the test below)."""
    error, asked, restores, settled = undo(
        tmp_path, table_format, LOAD_STEP, True, intent=False, pending=pending
    )
    assert isinstance(error, ConnectionLostError) and not restores, (error, asked)
    answered = table_format == "delta"
    assert settled == [answered], settled
    if not answered and pending:
        assert asked[-1] == "abandon", asked
    else:
        assert "abandon" not in asked and asked[-1].startswith("release"), asked


@pytest.mark.parametrize("intent", [True, False])
def test_a_marker_that_is_not_sent_puts_nothing_back_on_delta(tmp_path: Path, intent: bool):
    """Delta, the load: the marker cannot be sent either (the connection is down still)."""
    pending = "db.m__quarantine__pending_inv1"
    error, asked, restores, settled = undo(
        tmp_path, "delta", LOAD_STEP, True, connected=False, intent=intent, pending=pending
    )
    assert not restores and asked[-1] == "abandon" and settled in ([], [False]), asked
    assert isinstance(error, StepUnanswered if intent else ConnectionLostError), error


def test_a_later_batch_of_the_invocation_changes_nothing_over_a_half_changed_table(
    tmp_path: Path,
):
    """A microbatch batch left the table half changed (its ALTER got no answer): the record it
    leaves is its own invocation's, which a later batch does not read. The later batch learns
    of it from the invocation's report and fails before anything, naming the statement; a new
    invocation (the next `dbt run`) goes on, and repairs first."""
    report = RunReport()
    report.start("inv-1")
    error, _, _, _ = undo(tmp_path, "iceberg", ALTER, False, report=report)
    assert isinstance(error, StepUnanswered), error
    later = Runner(SimpleNamespace(), report, tmp_path)  # type: ignore[arg-type]
    run = SimpleNamespace(unique_id="model.p.m", relation="db.m", table_format="iceberg")
    with pytest.raises(RepairFirst) as left:
        later.execute(run, "insert into db.m select 1")  # type: ignore[arg-type]
    assert "add columns" in str(left.value) and "db.m" in str(left.value)
    report.start("inv-2")  # the next dbt invocation: not this one's to refuse
    assert report.half_changed("db.m") is None


def test_a_run_that_restored_leaves_nothing_half_changed(tmp_path: Path):
    """The control: a restored run (Delta, its marker sent) tells later batches nothing."""
    report = RunReport()
    error, _, _, _ = undo(tmp_path, "delta", LOAD_STEP, True, report=report)
    assert isinstance(error, RunUndone), error
    assert report.half_changed("db.m") is None


def test_repair_first_names_the_dead_run_or_the_batchs_step_never_both():
    dead = RepairFirst("model.p.m", "db.m", invocation_id="inv-0")
    assert "run inv-0 of the model died" in str(dead) and "this run changed nothing" in str(dead)
    batch = RepairFirst("model.p.m", "db.m", step="alter table db.m add columns (c int)")
    assert "earlier batch" in str(batch) and "this batch changed nothing" in str(batch)
    for wrong in ({}, {"invocation_id": "inv-0", "step": "x"}):
        with pytest.raises(ValueError):
            RepairFirst("model.p.m", "db.m", **wrong)


@pytest.mark.parametrize("table_format", FORMATS)
@pytest.mark.parametrize("here", [True, False])
@pytest.mark.parametrize(
    "build, beside, dropped",
    [
        (Build.SWAP, False, False),
        (Build.CREATE, False, False),
        (Build.SWAP, True, False),
        (Build.DROP_AND_CREATE, False, True),
    ],
)
def test_a_parquet_load_sent_to_a_server_is_made_under_the_runs_record(
    tmp_path: Path, table_format: str, here: bool, build: Build, beside: bool, dropped: bool
):
    """Which runs take the model's lease alone and write their intent before the load
    (`Runner._in_steps`): a multi-step change, every format, every method; with no change in
    steps, only a load into a deployed table that keeps no log (Parquet) sent to a server, so
    that a load Spark gives no answer for leaves a record the next run cannot take over while
    that statement may still write. Delta and Iceberg fence or watch a late write off their
    own log; the embedded session's statement is over once its call returned."""
    spark = SimpleNamespace(runs_here=lambda: here)
    runner = Runner(spark, RunReport(), tmp_path)  # type: ignore[arg-type]
    # `replace_by`: how a rebuild would replace the table (CREATE: there is none yet);
    # `beside`: this run is such a rebuild, its load into a new table swapped in after
    run = SimpleNamespace(table_format=table_format, replace_by=build)
    run.swaps_after_load, run.drops_before_load = beside, dropped
    into_table = build is not Build.CREATE and not beside and not dropped
    guarded = table_format == "parquet" and not here and into_table
    for write, statements, expected in (
        (SimpleNamespace(multi_step=False), (), guarded),
        (SimpleNamespace(multi_step=True), (), guarded),  # no step planned: a plain load
        (SimpleNamespace(multi_step=True), (1,), True),
    ):
        run.write, run.statements = write, statements
        assert runner._in_steps(run) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize("table_format", FORMATS)
@pytest.mark.parametrize("loaded", [False, True])
def test_an_answered_failure_claims_an_undo_only_where_one_was_done(
    tmp_path: Path, table_format: str, loaded: bool
):
    """A step Spark refused (an answer) after the run had written its intent. Delta and
    Iceberg restore from their log: the load taken back, its discarded rows dropped
    (`restored`), `RunUndone`. Parquet keeps no log: a load that committed before a later step
    failed stands, its discarded rows are moved after it (`restored` False) and the step's own
    error is raised; where nothing was put back (no step to take back, the restore says
    nothing) the same error, never "the run was undone" (found by a review, 2026-12-01: a
    Parquet load over a server has an intent with no step since e50e418)."""
    seen: List[bool] = []
    parquet = table_format == "parquet"
    error, asked, restores, settled = undo(
        tmp_path,
        table_format,
        "clearing the intent" if loaded else LOAD_STEP,
        True,
        unanswered=False,
        loaded=loaded,
        put_back="" if parquet else "restored to version 3",
        pending="db.m__quarantine__pending_inv1",
        restored_seen=seen,
    )
    assert restores and settled == [True], (asked, settled)
    assert asked[-1].startswith("release") and "abandon" not in asked, asked
    if parquet:
        assert isinstance(error, ConnectionLostError), error  # the step's own error
        assert seen == [not loaded], seen  # a load that stands: its rows are moved
    else:
        assert isinstance(error, RunUndone) and seen == [True], (error, seen)


@pytest.mark.parametrize("table_format", FORMATS)
def test_the_lease_is_confirmed_after_a_write_only_where_a_taker_could_undo_it(
    tmp_path: Path, table_format: str
):
    """After a write of rows, the run confirms its lease where a run that took it over may
    have fenced the write off (Delta) or be about to take it back (Iceberg): no success for a
    load that is not to stay. A Parquet lease is never taken over while its holder may still
    run a statement, so a check there could only fail on a heartbeat it could not confirm,
    after a load that stands."""
    leases = Leases(connected=True)
    leases.fenced = lambda fmt, action: action()  # type: ignore[attr-defined]
    runner = Runner(SimpleNamespace(), RunReport(), tmp_path)  # type: ignore[arg-type]
    runner.leases = leases  # type: ignore[assignment]
    run = SimpleNamespace(unique_id="model.p.m", relation="db.m", table_format=table_format)
    assert runner._step(run, LOAD_STEP, lambda: "ok", writes=True, to_table=True) == "ok"  # type: ignore[arg-type]
    assert asked_checks(leases) == (1 if table_format == "parquet" else 2), leases.asked


def asked_checks(leases: Leases) -> int:
    return sum(1 for a in leases.asked if a == "check")


def test_a_parquet_rewrite_put_back_between_its_renames_is_undone(tmp_path: Path):
    """The control of the test above: where the restore did put something back on Parquet (a
    rewrite stopped between its renames, the old table renamed back) and the load had not
    committed, the run says so (`RunUndone`) and its discarded rows go (the load is not in)."""
    seen: List[bool] = []
    error, _, restores, _ = undo(
        tmp_path,
        "parquet",
        LOAD_STEP,
        True,
        unanswered=False,
        put_back="took the unfinished rewrite back (the old table is in place)",
        pending="db.m__quarantine__pending_inv1",
        restored_seen=seen,
    )
    assert isinstance(error, RunUndone) and restores and seen == [True], (error, seen)
    assert "took the unfinished rewrite back" in str(error), str(error)


@pytest.mark.parametrize("steps", [False, True])
@pytest.mark.parametrize("guards", [False, True])
@pytest.mark.parametrize("into", [False, True])
@pytest.mark.parametrize("here", [False, True])
def test_under_record_is_a_change_in_steps_or_an_unguarded_load_sent_to_a_server(
    steps: bool, guards: bool, into: bool, here: bool
):
    """core/recovery/record.under_record, the whole truth table: a multi-step change always;
    otherwise only a load into a deployed table, on a format that cannot fence off or take back
    a late write, whose statements go to a server."""
    from dbt.adapters.spark_contracts.core.recovery.record import under_record

    got = under_record(steps=steps, guards_late_writes=guards, into_deployed=into, here=here)
    assert got is (steps or (into and not guards and not here))


@pytest.mark.parametrize("landed", [True, False])
def test_a_failure_after_an_iceberg_removal_landed_keeps_the_change_and_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, landed: bool
):
    """A live Iceberg run whose step after its DROP COLUMNS (after the load) failed, answered:
    where the drop landed (`TableLog.landed_last`) nothing is put back, its discarded rows follow
    the load (settled as not restored), and it fails with the step's own error, no undo
    claimed; where it did not, the restore as ever (`RunUndone`)."""
    from dbt.adapters.spark_contracts.run import undo as undo_module

    log = SimpleNamespace(landed_last=lambda intent: landed)
    monkeypatch.setattr(undo_module, "table_log", lambda spark, table_format: log)
    seen: List[bool] = []
    error, _, restores, _ = undo(
        tmp_path, "iceberg", "telling the run's record", False, unanswered=False, loaded=True,
        restored_seen=seen,
    )  # fmt: skip
    assert bool(restores) is not landed
    assert seen == [not landed]
    assert isinstance(error, RunUndone) is not landed, error
