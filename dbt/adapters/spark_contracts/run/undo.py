"""Putting a table back after a step of its run failed (`undo`, called by `Runner._step`):
restore to the record's restore point, settle the run's own pending rows, let the lease go,
and raise what the run reports. A statement Spark gave no answer for may still commit: on
Delta a marker under the run's transaction id makes the log final first; elsewhere the run
leaves its record and lease for the next run (`StepUnanswered`), which on Parquet (no log) takes
them over only once nothing of this run can still run."""

from __future__ import annotations

from typing import Any, NoReturn

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import Spark, process_running
from dbt.adapters.spark_contracts.core.evolution.capabilities import logged
from dbt.adapters.spark_contracts.core.recovery.lease import State, judge
from dbt.adapters.spark_contracts.core.recovery.pending import LEASE_SUFFIX
from dbt.adapters.spark_contracts.run.heartbeat import this_client
from dbt.adapters.spark_contracts.run.model_run import ModelRun
from dbt.adapters.spark_contracts.run.outcome_events import Restored
from dbt.adapters.spark_contracts.run.record_io import other_records
from dbt.adapters.spark_contracts.run.run_errors import (
    ForeignCommits,
    LeaseLost,
    RestoreFailed,
    RunUndone,
    StepUnanswered,
)
from dbt.adapters.spark_contracts.run.table_log import table_log

logger = AdapterLogger("SparkContracts")


def undo(
    runner: Any,  # run/runner.Runner (not imported: it calls this)
    run: ModelRun,
    exc: BaseException,
    step: str,
    unanswered: bool = False,
    fenced: bool = False,
) -> NoReturn:
    """Put the table back after `step` failed (if this run changed it), then raise. A run
    that lost its lease meanwhile restores and settles nothing (`LeaseLost`); where the
    lease cannot be confirmed (the fence's read failed too), it restores as before: the
    restore never goes over another writer's commits. `unanswered`: `step`'s statement
    to the table got no answer and may still commit; `fenced`: it carried the lease's
    transaction id (a Delta write of rows: a marker under that id makes the log final for
    it; an ALTER carries none)."""
    runner.drop_stage(run)
    try:
        runner.fence(run)
    except LeaseLost as lost:
        raise lost from exc
    except Exception as fence_exc:
        logger.debug(
            f"{run.unique_id}: could not confirm the lease before the undo: {fence_exc}"
        )  # the quarantine holds nothing of a run before its load
    intent = runner.state.intent
    answered = not unanswered
    if unanswered and fenced:  # Delta: fenced off inside the commit, the log is final
        try:
            answered = runner.leases.fence_off_own(run)
        except Exception as mark_exc:
            logger.warning(f"{run.unique_id}: could not fence its own write off: {mark_exc}")
    # a statement without an answer may still commit: the run leaves its record and lease
    # unreleased, for the next run. On Delta and Iceberg that run takes them over as a dead
    # run's (its marker; its late-commit watch) and repairs or settles from the table's own
    # log. Parquet keeps no log to fence off or take back a late write: a load into it sent
    # to a server is made under the run's record (Runner._in_steps; not a creating run's nor
    # a rebuild's, whose load fills a new table), and its next run
    # takes that lease over only on positive evidence that no statement of this run can run
    # any more (the server restarted), else refuses (`UnguardedTakeover`, naming the lease).
    # Restoring now and letting go would let that statement land after a later run's load (a
    # late `insert_overwrite` replacing its rows).
    defer = not answered
    unlogged = not logged(run.table_format)
    if intent is None:
        runner.quarantine.settle_own(run, restored=False, answered=answered)
        if defer and runner.state.pending is not None:
            runner.leases.abandon(step)  # its pending table stays for the run that takes over
        else:
            runner.let_go(run)
        runner.record(run)
        raise exc
    if defer:  # a restore now could be overtaken by the statement: the next run repairs
        runner.events.add(Restored(f"NOT RESTORED: {step} got no answer, may still commit"))
        runner.leases.abandon(step)  # its intent (and pending table) stay for the taker
        runner.report.left_half_changed(run.relation, step)
        runner.record(run)
        raise StepUnanswered(run.unique_id, run.relation, step, exc, logged=not unlogged) from exc
    # its last step, after the load (Iceberg's column removal), landed before the failure:
    # nothing is put back, the change stands
    landed = table_log(runner.spark, run.table_format).landed_last(intent)
    try:
        # each statement the restore sends behind the fence: a run that loses its lease
        # while it restores sends nothing more (the run that took over repairs the table)
        fence = lambda: runner.leases.check(run)  # noqa: E731
        done = (
            ""
            if landed
            else runner.restorer.restore(intent, list(runner.out.executed), fence=fence)
        )
        if not landed and (done or not unlogged):  # Parquet with nothing put back claims none
            runner.events.add(Restored(done))
    except LeaseLost as lost:
        runner.events.add(Restored(f"NOT RESTORED: {lost}"))
        runner.state.pending = None  # no longer its own to settle
        runner.leases.release(run, keep=True)  # its intent stays for the run that took over
        runner.record(run)
        raise lost from exc
    except ForeignCommits as foreign:
        runner.events.add(Restored(f"NOT RESTORED: {foreign}"))
        runner.quarantine.settle_own(run, restored=False, answered=answered)
        runner.let_go(run)
        runner.record(run)
        raise
    except Exception as restore_exc:
        runner.events.add(Restored(f"RESTORE FAILED: {restore_exc}"))
        runner.leases.release(run, keep=True)  # its intent stays: the next run repairs it
        runner.record(run)
        raise RestoreFailed(
            run.unique_id, step, exc, restore_exc, runner.restorer.manual_repair(intent)
        ) from exc
    runner.state.intent = None  # put back: the record keeps only pending rows, if any
    # a table that keeps no log (Parquet) takes no load back: one that committed before a
    # later step failed stands, as does a change whose last step landed, and the discarded
    # rows follow the load into the quarantine (the step's own error)
    stands = landed or (unlogged and runner.out.loaded)
    runner.quarantine.settle_own(run, restored=not stands, answered=answered)
    runner.let_go(run)
    runner.record(run)
    if stands or (unlogged and not done):  # the step's own error: no claim of an undo
        raise exc
    try:  # naming them is a courtesy: the failure is reported anyway
        others = live_runs(runner.spark, run.relation, run.invocation_id, run.table_format)
    except Exception as list_exc:
        logger.debug(f"{run.unique_id}: could not list the leases: {list_exc}")
        others = ()
    raise RunUndone(run.unique_id, step, runner.out.restored, exc, others) from exc


def live_runs(spark: Spark, relation: str, invocation_id: str, table_format: str) -> tuple:
    """Other runs of the model whose leases may be held now (not released, taken over or
    dead), as the error of a failed run names them; read once, nothing watched."""
    host = this_client().host
    return tuple(
        r.holder
        for r in other_records(spark, relation, invocation_id, LEASE_SUFFIX, table_format)
        if judge(r, host, process_running) is State.WATCH
    )
