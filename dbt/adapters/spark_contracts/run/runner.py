"""Carrying a `ModelRun` out on one connection: stage, check, count, quarantine, the multi-step
changes under the run's record, the one load; every failure after a change restores."""

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.errors import statement_answered
from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.evolution.capabilities import drop_sql, row_of
from dbt.adapters.spark_contracts.core.materialization.run_plan import Build
from dbt.adapters.spark_contracts.core.recovery.history_guard import guards_load
from dbt.adapters.spark_contracts.core.recovery.intent import INTENT_PROPERTY
from dbt.adapters.spark_contracts.core.recovery.record import (
    DONE_PROPERTY,
    INTENT_CLEARED,
    Done,
    done_property,
    under_record,
)
from dbt.adapters.spark_contracts.run.first_pass import first_pass_load, prepare_first_pass
from dbt.adapters.spark_contracts.run.lease import Leases, ModelKey
from dbt.adapters.spark_contracts.run.load_settings import LoadSettings
from dbt.adapters.spark_contracts.run.model_run import (
    ContractsAdapterResponse,
    ModelRun,
    stage_format,
)
from dbt.adapters.spark_contracts.run.outcome_events import (
    PENDING,
    PENDING_AFTER_FIRST_PASS,
    Executed,
    Loaded,
    PathTaken,
    Restored,
    RunBook,
    RunEvents,
    RunOutcome,
    RunState,
)
from dbt.adapters.spark_contracts.run.quarantine_steps import Quarantine
from dbt.adapters.spark_contracts.run.replace_alone import clear_to_replace
from dbt.adapters.spark_contracts.run.report import RunReport
from dbt.adapters.spark_contracts.run.restore import Restorer
from dbt.adapters.spark_contracts.run.run_errors import (
    LOAD_STEP,
    FirstPassFailed,
    LeaseLost,
    RepairFirst,
)
from dbt.adapters.spark_contracts.run.table_log import TableLog
from dbt.adapters.spark_contracts.run.unchanged import check_unchanged
from dbt.adapters.spark_contracts.run.undo import undo
from dbt.adapters.spark_contracts.run.violations import raise_violation, value_violation

logger = AdapterLogger("SparkContracts")


class Runner:
    """Carries a `ModelRun` out on one connection; every failure after a change restores.
    Its collaborators: `leases` (the model-level leases the run takes and lets go),
    `restorer` (puts the table back, run/restore.py) and `quarantine` (the run's discarded
    rows, run/quarantine_steps.py), which share `book`, the run's events and state."""

    def __init__(self, spark: Spark, report: RunReport, target_dir: Path) -> None:
        self.spark, self.report, self.target_dir = spark, report, target_dir
        self.leases = Leases(spark)
        self.book = RunBook()
        self.restorer = Restorer(spark, self.leases)
        self.quarantine = Quarantine(spark, self.book, self.leases)
        self.settings = LoadSettings(spark)  # the run's load settings (`execute`)

    @property
    def events(self) -> RunEvents:
        return self.book.events

    @property
    def state(self) -> RunState:
        return self.book.state

    @property
    def out(self) -> RunOutcome:
        """What the run did so far, computed from its events."""
        return self.book.out

    def log(self, table_format: str) -> TableLog:
        return self.restorer.log(table_format)

    def hold_if_left(self, relation: str, unique_id: str) -> None:
        """`RepairFirst`, before this run changes anything, where a run of this invocation (an
        earlier microbatch batch) left `relation` to the next one: a statement of its got no
        answer and may still commit (`RunReport.left_half_changed`; its own record)."""
        left = self.report.half_changed(relation)
        if left is not None:
            raise RepairFirst(unique_id, relation, step=left)

    def repair(self, key: ModelKey, on_table: bool, tag: Optional[str] = None) -> Optional[str]:
        """Dead runs' intents repaired under the model's lease (Restorer.repair). A repair that
        left its record for a taker (`abandon`) holds the model for the rest of the invocation
        (a later batch stops at `hold_if_left`: its record, under the same name, would drop the
        watch a taker needs)."""
        try:
            return self.restorer.repair(key, on_table, tag)
        except BaseException:
            if self.leases.abandoned:
                self.report.left_half_changed(key.relation, self.leases.abandoned)
            raise

    def execute(
        self,
        run: ModelRun,
        load_sql: str | Callable[[], Any],
        before_load: Optional[Callable[[], Any]] = None,
        after_load: Optional[Callable[[], Any]] = None,
    ) -> ContractsAdapterResponse:
        """Every side effect of one planned run, in order: stage, check, count, quarantine, the
        multi-step changes under the run's record, `before_load` (a drop at a location_root,
        once every check passed), the load (`load_sql`, or what carries it out: Iceberg's NOT
        NULL build of a creating run), `after_load` (a swap). Any failure after a change puts
        the table back. A first pass (run_plan.first_pass) that fails wrote nothing: the run
        goes on without it (its pending table). The load's SQL confs are set with its statement
        and put back once the run has succeeded (run/load_settings.py)."""
        self.hold_if_left(run.relation, run.unique_id)
        self.settings = LoadSettings(self.spark, run.load_settings)
        response = self._execute(run, load_sql, before_load, after_load)
        self.settings.put_back(run.unique_id)
        return response

    def _execute(
        self, run: ModelRun, load_sql: Any, before_load: Any, after_load: Any
    ) -> ContractsAdapterResponse:
        if run.first_pass is not None and (before_load is not None or after_load is not None):
            run = replace(run, first_pass=None)  # a build beside the table: never planned so
        if run.first_pass is not None:
            try:
                return self._first_pass(run, load_sql)
            except FirstPassFailed as failed:
                logger.info(f"{run.unique_id}: {failed}")
                run = replace(run, first_pass=None)
                self.book.begin(run.repairs)
                self.events.add(PathTaken(PENDING_AFTER_FIRST_PASS))
        else:
            self.book.begin(run.repairs)
            if run.quarantine_pending:
                self.events.add(PathTaken(PENDING))
        try:
            self._prepare(run)
            if before_load is not None:
                before_load()
        except BaseException:
            self.drop_stage(run)
            self.quarantine.settle_own(run, restored=False)
            self.let_go(run)
            raise
        return self._load(run, load_sql, after_load)  # cleans up after itself, whatever happens

    def _first_pass(self, run: ModelRun, load_sql: str) -> ContractsAdapterResponse:
        """The output loaded as it is (run/first_pass.py): one commit, or `FirstPassFailed`."""
        prepare_first_pass(self.spark, self.book, run)
        return self._load(run, load_sql)

    def _prepare(self, run: ModelRun) -> str:
        state = self.state
        if run.fits:  # the output as it fits the table (core/evolution/fit.py)
            self.spark.run(f"create or replace temporary view {run.view} as {run.fits}")
        load = run.load_sql
        base = run.model_source
        coerced = load.coerced_select(run.view) if load is not None else None
        if coerced:
            self.spark.run(f"create or replace temporary view {base} as {coerced}")
        if run.observed is not None and load is not None:
            state.observation = self.spark.observe(run.observed, base, run.observed_metrics)
        pending = load.pending_from(run.observed or base) if load is not None else None
        if self._in_steps(run):  # the model alone, before anything is written
            self._take_alone(run)
        if pending and run.quarantine_pending:  # read once: every row, from the executors
            self.quarantine.write_pending(run, pending)
            self.book.take_counts(self.spark, run)  # observed while writing it, else one query
        elif run.stage:
            self.spark.run(drop_sql(run.stage, run.table_format))
            self.spark.run(
                f"create table {run.stage} using {stage_format(run.table_format)} "
                f"as select * from {run.observed or base}"
            )
            state.staged = True
            self.book.take_counts(self.spark, run)
        if load is not None:
            if load.discard_count_sql and run.observed is None:
                self.book.count(self.spark.fetch(load.discard_count_sql)[0], load)
            if load.violation_sample_sql:
                rows = self.spark.fetch(load.violation_sample_sql)
                if rows:
                    self.drop_stage(run)
                    found = value_violation(run, rows, self.out.gate_counts)
                    raise_violation(
                        self.report, self.target_dir, run.unique_id, run.relation, *found
                    )
            if not load.passes_through:
                self.spark.run(f"create or replace temporary view {run.source} as {load.select}")
        if state.pending is not None and self.out.rows_discarded:
            self.quarantine.ready_for_pending(run)  # before any change to the table
        if self._in_steps(run):
            self._begin_steps(run)
        return run.source

    def _in_steps(self, run: ModelRun) -> bool:
        """The run changes the table under its record (core/recovery/record.under_record)."""
        steps = run.write.multi_step and bool(run.statements)
        guards = row_of(run.table_format).guards_late_writes
        # not a creating run's load, nor a rebuild's into a new table (dropped first or beside)
        beside = run.swaps_after_load or run.drops_before_load
        into = run.replace_by is not Build.CREATE and not beside
        here = self.spark.runs_here()
        return under_record(steps=steps, guards_late_writes=guards, into_deployed=into, here=here)

    def _take_alone(self, run: ModelRun) -> None:
        """The model's lease taken alone for a multi-step change, unless held already (a swap).
        A dead run's intent left since the repair step looked: half changed (`RepairFirst`)."""
        if self.leases.held is not None:
            return
        dead = [r for r in self.leases.alone(run) if r.intent is not None]
        if dead:
            self.leases.let_go(run)
            raise RepairFirst(run.unique_id, run.relation, invocation_id=dead[0].holder)

    def let_go(self, run: ModelRun) -> None:
        """The run's record let go of after a failure: kept (released) while it says what the
        next run must repair or settle (an intent, a pending table, a swap under way)."""
        state = self.state
        self.leases.release(run, keep=bool(state.intent or state.pending or self.leases.swapping))

    def _begin_steps(self, run: ModelRun) -> None:
        """The multi-step change under the run's record (core/recovery/record.py), held alone
        since `_take_alone`: the version read, the intent written into the record, each step."""
        state = self.state
        # read once the lease is held: a run that finished while this one waited committed
        # before, so the restore never takes its commits back (and Iceberg's catalog is fresh)
        log = self.restorer.log(run.table_format)
        state.restore_version = log.current_version(run.relation)
        # another run may have changed the table since the plan read it: it holds only for that
        check_unchanged(self.spark, self.leases, run)
        intent = run.intent(state.restore_version)
        self.fence(run)  # the record is this run's still
        self.leases.write(run, {INTENT_PROPERTY: intent.to_property()})
        state.intent = intent
        self._steps(run, after_load=False)

    def _steps(self, run: ModelRun, after_load: bool) -> None:
        """The run's steps sent before its load (or, `after_load`, after it: a removal where a
        rollback keeps the schema), each behind the fence, the record told each version."""
        log, done = self.restorer.log(run.table_format), self.state.done
        for index, step in enumerate(run.statements):
            if step.after_load != after_load:
                continue
            action = lambda s=step.sql: self.spark.run(s)  # noqa: E731

            def behind(s: str = step.sql) -> Callable[[], Any]:  # read before `_step`'s fence
                sql = log.behind_history(run.relation, s)  # an ALTER: Iceberg's guard
                return lambda: self.spark.run(sql)

            first = None if step.writes else behind
            self._step(run, step.sql, action, writes=step.writes, to_table=True, first=first)
            self.events.add(Executed(step))

            def tell(index: int = index) -> None:  # what the step produced, into the record
                done.append(Done(index, log.current_version(run.relation)))
                self.leases.write(run, {DONE_PROPERTY: done_property(tuple(done))})

            self._step(run, "telling the run's record", tell)

    def _step(
        self,
        run: ModelRun,
        step: str,
        action: Callable[[], Any],
        writes: bool = False,
        to_table: bool = False,
        first: Optional[Callable[[], Callable[[], Any]]] = None,
    ) -> Any:  # `action` behind the fence; `writes`: under the lease's id, fenced after too;
        # `to_table`: the load or a step of the change, whose late commit no undo may overtake;
        # `first`: what gives the action, read before the fence (history_guard's read)
        sent = False  # the step's statement went out and has not answered
        try:
            if first is not None:
                action = first()
            self.fence(run)  # LeaseLost passes the undo by: a run that lost it puts nothing back
            sent = True
            result = self.leases.fenced(run.table_format, action) if writes else action()
            sent = False
            if writes and row_of(run.table_format).guards_late_writes:
                # a write a taker may have fenced off or take back reports no success (a
                # Parquet lease is never taken over while its holder's statement may run)
                self.fence(run)
        except (LeaseLost, FirstPassFailed):  # a failed first pass changed nothing
            raise
        except Exception as exc:  # the step, or confirming the lease around it, failed
            # one Spark gave no answer for (a lost connection, a server's cancel) may still
            # commit: nothing is dropped or put back till the table's log is final for it (a
            # build beside the table is never swapped in now)
            unanswered = sent and to_table and not statement_answered(exc)
            unanswered = unanswered and not run.swaps_after_load
            undo(self, run, exc, step, unanswered, fenced=writes)
        return result

    def fence(self, run: ModelRun) -> None:
        """Before an irreversible step: the run's lease is its own, or `LeaseLost`: it commits,
        puts back and settles nothing more (the run that took over, or the next run, does)."""
        try:
            self.leases.check(run)
        except LeaseLost as lost:
            self.state.pending = None  # no longer its own to settle
            self.leases.release(run, keep=True)
            self.state.intent = None
            self.events.add(Restored(f"NOT RESTORED: {lost}"))
            self.record(run)
            raise

    def _load(
        self,
        run: ModelRun,
        sql: str | Callable[[], Any],
        after: Optional[Callable[[], Any]] = None,
    ) -> ContractsAdapterResponse:
        """The one write; then the intent is cleared. Any failure after a change is undone."""
        try:
            write = sql if callable(sql) else lambda: self._run_load(run, sql)
            fenced = not callable(sql)
            first = self._behind_history(run, sql)
            response = self._step(run, LOAD_STEP, write, fenced, True, first)
            if self.state.intent is not None:
                self._steps(run, after_load=True)
            if after is not None:
                self._step(run, "the swap", after)
            self.events.add(Loaded())
            try:
                self.book.take_counts(self.spark, run)
            except Exception as exc:  # the load has committed: counts are a report
                logger.warning(f"{run.unique_id}: could not read the discard counts: {exc}")
            if self.state.pending is not None:  # the load is in: the rows follow it
                if self.state.intent is not None:  # the record says rows, no change to undo
                    clear = lambda: self.leases.write(run, INTENT_CLEARED)  # noqa: E731
                    self._step(run, "clearing the intent", clear)
                    self.state.intent = None
                self.fence(run)
                self.quarantine.finish(run)  # the record goes once the rows are in
                self.quarantine.remember(run)
            if self.state.intent is not None:  # done: the record goes, the change stands
                self._step(run, "ending the run's record", lambda: self.leases.end(run))
                self.state.intent = None
        finally:
            self.drop_stage(run)
        self.record(run)
        self.report.queue_run_history(run, self.out)
        line = run.outcome_line(self.out)
        if line:
            logger.info(line)
        return run.response(
            str(response),
            self.out,
            code=getattr(response, "code", None),
            rows_affected=getattr(response, "rows_affected", None),
        )

    def _behind_history(self, run: ModelRun, sql: Any) -> Optional[Callable[[], Any]]:
        """The load behind the table's history (history_guard.guards_load), read before its
        fence; on Iceberg once no other run's replace may still run (run/replace_alone.py)."""
        held = self.leases.held is not None
        if callable(sql) or not guards_load(run.rebuilds, run.replace_by is Build.REPLACE, held):
            return None
        log, alone = self.log(run.table_format), row_of(run.table_format).guards_by_history

        def first() -> Callable[[], Any]:  # before the fence; raising, it sent nothing
            send = partial(self._run_load, run, log.behind_history(run.relation, sql))
            if alone:  # marked after the history's read (run/replace_alone.py)
                clear_to_replace(self.spark, self.leases, run)
            return send

        return first

    def _run_load(self, run: ModelRun, sql: str) -> Any:
        """The load statement (in a first pass: run/first_pass.first_pass_load)."""
        self.settings.set()
        if run.first_pass is None:
            return self.spark.run(sql)
        return first_pass_load(self.spark, self.log(run.table_format), run, sql)

    def drop_stage(self, run: ModelRun) -> None:
        if self.state.staged:
            self.state.staged = False
            try:
                self.spark.run(drop_sql(run.stage, run.table_format))
            except Exception as exc:  # a leftover stage harms nothing; say so
                logger.warning(f"{run.unique_id}: could not drop the stage {run.stage}: {exc}")

    def record(self, run: ModelRun) -> None:
        self.report.record(self.target_dir, run.unique_id, run.report(self.out))
