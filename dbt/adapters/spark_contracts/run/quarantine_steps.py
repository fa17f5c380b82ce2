"""The quarantine half of a run (core/recovery/pending.py): the discarded rows written from the executors
to the run's pending table before the load, moved into the quarantine after it; the quarantine
made ready and evolved; another run's pending table settled from the model table's own record.
The `Runner` has one, as it has a `Restorer` (run/restore.py), which puts tables back."""

from typing import Callable, List, Optional

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.contracts.load_select import (
    PENDING_DISCARDED,
)
from dbt.adapters.spark_contracts.core.contracts.quarantine import (
    evolve_quarantine,
    plan_quarantine,
    remember_sql,
)
from dbt.adapters.spark_contracts.core.evolution.capabilities import describable as is_describable
from dbt.adapters.spark_contracts.core.evolution.capabilities import drop_sql, logged, row_of
from dbt.adapters.spark_contracts.core.materialization.microbatch import MICROBATCH
from dbt.adapters.spark_contracts.core.materialization.run_plan import Build
from dbt.adapters.spark_contracts.core.recovery.manual import RowsOf, manual_move
from dbt.adapters.spark_contracts.core.recovery.pending import (
    Loaded,
    ModelRecord,
    load_state,
    loaded_property,
)
from dbt.adapters.spark_contracts.core.recovery.record import pending_properties
from dbt.adapters.spark_contracts.core.schema.types import Struct, sql_string
from dbt.adapters.spark_contracts.run.fence import exists, fences
from dbt.adapters.spark_contracts.run.lease import Leases
from dbt.adapters.spark_contracts.run.model_run import (
    ModelRun,
    quarantine_format_for,
    stage_format,
)
from dbt.adapters.spark_contracts.run.outcome_events import (
    Quarantined,
    RunBook,
)
from dbt.adapters.spark_contracts.run.quarantine_merge import holds, merge_once, readable
from dbt.adapters.spark_contracts.run.record_io import copy_of, table_properties
from dbt.adapters.spark_contracts.run.retry import tried_again
from dbt.adapters.spark_contracts.run.run_errors import (
    LeaseLost,
    QuarantineMismatch,
    QuarantinePending,
)
from dbt.adapters.spark_contracts.run.table_log import TableLog, table_log

logger = AdapterLogger("SparkContracts")


class Quarantine:
    """The quarantine's steps of a run (the `Runner`'s collaborator): the run's pending table
    written, made ready for and moved into the quarantine, settled on failure; other runs'
    pending tables settled. `book`: the run being carried out (its events and state)."""

    def __init__(self, spark: Spark, book: RunBook, leases: Optional[Leases] = None) -> None:
        self.spark, self.book = spark, book
        self.leases = leases if leases is not None else Leases(spark)

    def log(self, table_format: str) -> TableLog:
        return table_log(self.spark, table_format)

    def _ready_quarantine(self, run: ModelRun, select: str) -> None:
        """The quarantine table, created shaped like `select`'s rows (nothing is read: `where
        false`) unless dbt's cache holds it. A create refused while another run of the model
        makes it (Iceberg raises then, IF NOT EXISTS or not; Delta finds files in the location
        before that commit) is tried again, a second more each time, until the table is there
        (`INSERT_ATTEMPTS` times; the last refusal is raised)."""
        if run.quarantine_format is not None:
            return
        create = (
            f"create table if not exists {run.quarantine_table} using "
            f"{quarantine_format_for(run.table_format)} as select * from ({select}) where false"
        )
        made = lambda: readable(self.spark, run.quarantine_table)  # noqa: E731  by the other run
        tried_again(lambda: self.spark.run(create), made, first_at_once=True)

    def _insert_quarantined(self, run: ModelRun, sql: str, pending: str) -> None:
        """`sql`, the run's rows (from `pending`) into the quarantine, or, where the quarantine's
        format fences no append inside its commit but checks a MERGE's (Iceberg:
        `moves_own_rows_by_merge`), a MERGE on the run's id (run/quarantine_merge.merge_once),
        so that a move sent before the run lost its lease and landing after a settler's inserts
        nothing more. Refused, the table given what the model now outputs (core/contracts/quarantine.py; else
        `QuarantineMismatch`) and sent again; refused while the table fits, `_insert_again`
        (Delta's append that met a metadata change; Iceberg's MERGE whose commit met another
        run's)."""
        fmt = quarantine_format_for(run.table_format)
        row = row_of(fmt)
        if row.moves_own_rows_by_merge:
            write = self._own_merge(run, pending)
        else:
            write = lambda: self.leases.fenced(fmt, lambda: self.spark.run(sql))  # noqa: E731
        try:
            write()
        except DbtDatabaseError:
            self.leases.check(run)  # refused by a taker's marker: the lease is lost
            statements = self._quarantine_evolution(run, refused=True)
            if not statements:  # the table fits (or was created from these rows)
                # Delta's refused append; a MERGE whose commit met another's
                if not (row.append_refused_by_metadata_change or row.moves_own_rows_by_merge):
                    raise
                merge = write if row.moves_own_rows_by_merge else self._own_merge(run, pending)
                self._insert_again(run, merge)
                return
            for statement in statements:
                self.spark.run(statement)
            write()
        # under the lease's transaction id (`Leases.fenced`) a write skipped because the run
        # that took the lease over moves the rows is never taken for done (`LeaseLost`)
        self.leases.check(run)

    def _insert_again(self, run: ModelRun, merge: Callable[[], None]) -> None:
        """The run's refused move into its quarantine, while the table fits, sent again up to
        `INSERT_ATTEMPTS` times, each after the lease's check, as `merge` (`_own_merge`: a
        MERGE on the run's id that inserts none where the run's rows are there already):
        Delta's append that met a concurrent metadata change (e.g. another run's `remember`;
        that refusal wrote nothing; the MERGE carries the lease's transaction id), and
        Iceberg's MERGE whose commit met another's. A failed Parquet insert may have written
        part of its files: not sent again. The last refusal is raised (the rows stay
        pending)."""
        tried_again(
            merge, lambda: False, first_at_once=False, before=lambda: self.leases.check(run)
        )
        self.leases.check(run)  # a merge skipped inside its commit is never taken for done

    def _own_merge(self, run: ModelRun, pending: str) -> Callable[[], None]:
        """The run's own discarded rows moved from `pending` by a MERGE on its id
        (run/quarantine_merge.merge_once), under the lease's transaction id where the
        quarantine's format has one (the pending table's columns read once, here)."""
        schema = self._pending_schema(run, pending)
        own = own_rows(run)
        fmt = quarantine_format_for(run.table_format)
        return lambda: self.leases.fenced(
            fmt, lambda: merge_once(self.spark, run.quarantine_table, pending, schema, own)
        )

    def _pending_schema(self, run: ModelRun, pending: str) -> Struct:
        return self.spark.relation_schema(pending, is_describable(stage_format(run.table_format)))

    def _quarantine_evolution(self, run: ModelRun, refused: bool = False) -> List[str]:
        """The statements that make an existing quarantine take the model's rows, read from
        its schema; `QuarantineMismatch` where it could not. `refused`: after the quarantine
        refused the run's rows (it exists, whatever dbt's cache said)."""
        table, table_format = run.quarantine_table, run.quarantine_format
        if table_format is None and refused and run.batch_tag:
            # made since dbt's cache was read: by an earlier microbatch batch of this
            # invocation, say (a first batch's has no `_dbt_batch_tag` column)
            table_format = quarantine_format_for(run.table_format)
        if table_format is None:
            return []
        existing = self.spark.relation_schema(table, is_describable(table_format))
        evolution = plan_quarantine(existing, run.quarantined_schema, table_format)
        if evolution.conflicts:
            raise QuarantineMismatch(run.unique_id, table, evolution.conflicts) from None
        return evolve_quarantine(evolution, table, table_format)

    # -- the run's own pending table
    def write_pending(self, run: ModelRun, select: str) -> None:
        """Before the load: the run's record says which pending table holds its discarded rows,
        with the run's commit tag and the model table's version now (what a later run settles
        it by, core/recovery/pending.decide_pending); then the model's output, read once, from
        the executors into that table, every row with its reasons (`select`,
        core/contracts/load_select.pending_from). A run holding the model alone (a multi-step
        change) writes it into that record; any other makes a shared record of its own first.
        The pending table carries the same bookkeeping, its lease released (`copy_of`): one
        left without its record (a CTAS a server finished after its client died and its record
        was dropped) is still settled from the model table's own log, never lost."""
        pending = run.pending_table
        creates = run.replace_by is Build.CREATE  # no table yet: no version to record
        version = None if creates else self.log(run.table_format).current_version(run.relation)
        # its load carries the record's transaction id into the table's own log (not a rebuild
        # that drops or swaps the table: its load writes a new log): a settler's marker under it
        # is positive evidence that a load not in that log never commits
        held = self.leases.held is not None
        app = self.leases.txn_app if held else self.leases.draw(run)
        new_log = run.drops_before_load or run.swaps_after_load
        fenced = app if fences(run.table_format) and not new_log else None
        says = pending_properties(pending, run.commit_tag, version, fenced)
        if held:
            self.leases.write(run, says)
        else:
            self.leases.take(run, says=says, txn_app=app)
        self.book.state.pending = pending  # from here on, a failure settles it
        copy = ", ".join(
            f"'{k}' = {sql_string(v)}" for k, v in copy_of(self.spark, run.invocation_id, says)
        )
        self.spark.run(
            f"create table {pending} using {stage_format(run.table_format)} "
            f"tblproperties ({copy}) as {select}"
        )

    def ready_for_pending(self, run: ModelRun) -> None:
        """The quarantine made ready to take the pending table's discarded rows, before the
        load: a quarantine that cannot take them fails the run here, before any change."""
        pending = self.book.state.pending
        self._ready_quarantine(run, f"select * from {pending}")
        for statement in self._quarantine_evolution(run):
            self.spark.run(statement)

    def finish(self, run: ModelRun) -> None:
        """After the load: parquet records it on the table (it keeps no log); the pending rows
        move into the quarantine; the pending table goes, then the run's record. A failure
        leaves the load, the pending table and the record (released: the next run moves the
        rows) and raises `QuarantinePending`; where the run lost its record's lease meanwhile
        (it stalled, and another run took the record over to move its rows), `LeaseLost`
        instead."""
        pending = self.book.state.pending
        assert pending is not None
        try:
            if not logged(run.table_format):
                self.spark.run(
                    f"alter table {run.relation} set tblproperties "
                    f"('{loaded_property(run.invocation_id)}' = {sql_string(run.commit_tag)})"
                )
            self.move(run.relation, run.table_format, run.quarantine_table, pending, None, run)
        except LeaseLost:  # the run that took it over moves them (its write was skipped)
            self.book.state.pending = None
            raise
        except Exception as exc:
            try:
                self.leases.check(run)
            except LeaseLost as lost:  # the run that took it over moves them
                self.book.state.pending = None
                raise lost from exc
            except Exception as confirm_exc:  # e.g. the connection is gone: the rows stay
                logger.debug(f"{run.unique_id}: could not confirm its lease: {confirm_exc}")
            self.leases.release(run, keep=True)
            raise QuarantinePending(
                run.unique_id, pending, run.quarantine_table, exc, run.table_format, own_rows(run)
            ) from exc
        self.book.state.pending = None
        self.leases.release(run, keep=False)  # its rows are in: the record says nothing more
        self.book.events.add(Quarantined(self.book.out.rows_discarded))

    def remember(self, run: ModelRun) -> None:
        """The quarantine's memory that this run discarded rows or not (`DISCARDED_PROPERTY`),
        set where it changed, so that the model's next run takes its first pass, or its pending
        table at once. A hint: a failure to set it is logged, and costs the next run time only."""
        discarded = bool(self.book.out.rows_discarded)
        if discarded == run.discarded_last or run.strategy == MICROBATCH:
            return  # a batch never takes a first pass: nothing to tell
        try:
            self.spark.run(remember_sql(run.quarantine_table, discarded))
        except Exception as exc:
            logger.warning(
                f"{run.unique_id}: could not note on {run.quarantine_table} "
                f"whether this run discarded rows: {exc}"
            )

    def move(
        self,
        relation: str,
        table_format: str,
        quarantine: str,
        pending: str,
        dead: Optional[RowsOf],
        run: Optional[ModelRun] = None,
    ) -> str:
        """Append `pending` to the quarantine, then drop it. `dead`: a dead run's rows
        (core/recovery/manual.rows_of_pending: its invocation's, a microbatch batch's by its
        commit tag), not appended again where the quarantine holds them already (a kill between
        the append and the drop)."""
        if dead is not None:  # a dead run's: its quarantine may have been dropped since
            try:
                self.spark.run(
                    f"create table if not exists {quarantine} using "
                    f"{quarantine_format_for(table_format)} as select * from {pending} where false"
                )
            except DbtDatabaseError:  # another run settling at once may have made it first
                if not readable(self.spark, quarantine):
                    raise
            if holds(self.spark, quarantine, dead):
                self.spark.run(drop_sql(pending, table_format))
                self._unset_loaded(relation, table_format, dead.invocation_id)
                return f"{quarantine} held its rows already: dropped {pending}"
            if logged(table_format):
                describable = is_describable(stage_format(table_format))
                schema = self.spark.relation_schema(pending, describable)
                merge_once(self.spark, quarantine, pending, schema, dead)
                self.spark.run(drop_sql(pending, table_format))
                return f"moved {pending} into {quarantine}"
        insert = (
            f"insert into {quarantine} by name select * from {pending} where {PENDING_DISCARDED}"
        )
        if run is None:
            self.spark.run(insert)
        elif self.book.out.rows_discarded:  # the run's own, when it discarded any
            self._insert_quarantined(run, insert, pending)
        self.spark.run(drop_sql(pending, table_format))
        owner = dead.invocation_id if dead is not None else run.invocation_id if run else None
        if owner is not None:
            self._unset_loaded(relation, table_format, owner)
        return f"moved {pending} into {quarantine}"

    def _absent(self, relation: str) -> bool:
        """The catalog lists no table `relation` (a failed listing raises: absence is never
        concluded from an error)."""
        return not exists(self.spark, relation)

    def _unset_loaded(self, relation: str, table_format: str, invocation_id: str) -> None:
        if not logged(table_format):
            self.spark.run(
                f"alter table {relation} unset tblproperties if exists "
                f"('{loaded_property(invocation_id)}')"
            )

    def settle_own(self, run: ModelRun, restored: bool, answered: bool = True) -> Optional[str]:
        """A failed run's own pending table: dropped if its load is not in the table (never
        committed, or taken back), moved if it is; kept if that cannot be done (the run's
        record, which names it, is kept then: the caller lets go of it). `answered` False: the
        load was sent and Spark gave no answer for it (a lost connection, a timeout's cancel):
        it may still commit, so a load not (yet) in the table is no evidence, and the pending
        table is kept for the next run, which settles it from the table's own log (Delta fences
        the load off first; Iceberg waits for its load or its server's restart; Parquet, whose
        property this run never set, is named in a warning for a person)."""
        pending = self.book.state.pending
        if pending is None:
            return None
        try:
            if restored and answered:
                loaded = Loaded.UNDONE
            elif self.book.out.loaded:
                loaded = Loaded.YES
            elif answered and run.replace_by is Build.CREATE and self._absent(run.relation):
                loaded = Loaded.NO  # the run was to create the table: no table, no load
            elif logged(run.table_format):
                # did the statement commit before it failed? the table's own log says
                loaded = load_state(
                    self.model_record(run.relation, run.table_format), run.commit_tag
                )
            else:  # parquet keeps no log: its property records a load only this run would set
                loaded = Loaded.NO
            if loaded is Loaded.YES:
                done = self.move(
                    run.relation, run.table_format, run.quarantine_table, pending, None, run
                )
            elif loaded is Loaded.NO and not answered:
                logger.warning(
                    f"{run.unique_id}: Spark gave no answer for the run's load, which may still "
                    f"commit: its discarded rows stay in {pending} for the model's next run, "
                    "which settles them from the table's own log"
                    + (
                        ""
                        if logged(run.table_format)
                        else " (a Parquet table keeps none: "
                        f"{manual_move(pending, run.quarantine_table, run.table_format, own_rows(run))})"
                    )
                )
                return None
            else:
                self.spark.run(drop_sql(pending, run.table_format))
                done = f"dropped {pending} (the run's load is not in the table)"
            self.book.state.pending = None
            return done
        except Exception as exc:
            logger.warning(
                f"{run.unique_id}: the run's discarded rows stay in {pending} ({exc}); the "
                f"model's next run settles it, or by hand: "
                f"{manual_move(pending, run.quarantine_table, run.table_format, own_rows(run))}"
            )
            return None

    def model_record(self, relation: str, table_format: str) -> ModelRecord:
        if logged(table_format):
            return ModelRecord(self.log(table_format).entries(relation), {})
        return ModelRecord(None, table_properties(self.spark, relation))


def own_rows(run: ModelRun) -> RowsOf:
    """The run's own rows in its quarantine: its invocation's, its batch's for a batch."""
    return RowsOf(run.invocation_id, run.batch_tag or None)
