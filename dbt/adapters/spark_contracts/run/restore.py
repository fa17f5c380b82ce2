"""Putting a table back: the versions and commits a restore reads, the restore itself (never over
another writer's commit), and the repair of a table a dead run left with its intent."""

from typing import Callable, List, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.contracts.load_select import RUN_ID_COLUMN
from dbt.adapters.spark_contracts.core.evolution.capabilities import drop_sql, logged, row_of
from dbt.adapters.spark_contracts.core.evolution.steps import Step
from dbt.adapters.spark_contracts.core.recovery.intent import (
    INTENT_PROPERTY,
    Intent,
    find_intent,
    foreign_commits,
)
from dbt.adapters.spark_contracts.core.recovery.late import (
    FENCE_DUE_PROPERTY,
    LATE_PROPERTY,
    lineage,
)
from dbt.adapters.spark_contracts.core.recovery.record import INTENT_CLEARED, Done, RunRecord
from dbt.adapters.spark_contracts.core.schema.types import sql_string
from dbt.adapters.spark_contracts.run import late
from dbt.adapters.spark_contracts.run.lease import Leases, ModelKey
from dbt.adapters.spark_contracts.run.model_run import (
    stage_name,
)
from dbt.adapters.spark_contracts.run.record_io import (
    Answered,
    Fenced,
    drop_record,
    set_properties_sql,
    table_properties,
    unset_properties_sql,
)
from dbt.adapters.spark_contracts.run.rollback_fence import FenceNotBuilt, fence_off
from dbt.adapters.spark_contracts.run.run_errors import (
    ForeignCommits,
    LateCommits,
    LeaseLost,
    RestoreFailed,
)
from dbt.adapters.spark_contracts.run.table_log import TableLog, table_log

logger = AdapterLogger("SparkContracts")


class Restorer:
    """Puts a table back (the `Runner`'s collaborator, and a snapshot's): reads its commits
    through its format's log, restores it, repairs a dead run's intent under the lease."""

    def __init__(self, spark: Spark, leases: Leases) -> None:
        self.spark, self.leases = spark, leases

    # -- the table's log, through its format's driver (run/table_log.py)
    def log(self, table_format: str) -> TableLog:
        return table_log(self.spark, table_format)

    def restore(
        self,
        intent: Intent,
        executed: Optional[Sequence[Step]] = None,
        fence: Optional[Callable[[], None]] = None,
    ) -> str:
        """Put the table back to the intent's restore point, unless another writer committed
        after it (then `ForeignCommits`, and nothing is undone). `executed`: the steps this
        process saw complete, whose inverses the table's log takes back beside its own restore
        (a parquet rewrite stopped midway; on Iceberg only the columns its own ADD COLUMNS
        added: another run of the model may have added the same ones); None for a dead run's
        (not known). `fence`: checked
        before each statement the restore sends (`Leases.check`): a run that loses its lease
        while it restores sends nothing more (`LeaseLost`)."""
        spark = self.spark if fence is None else Fenced(self.spark, fence)
        log = table_log(spark, intent.table_format)
        intent = log.restore_point(intent)
        after = log.commits_after(intent)
        point = intent.restore_version
        undone = [  # a RESTORE to the point or before it: the run's change already put back
            c.version
            for c in after
            if c.restored_to is not None and point is not None and c.restored_to <= point
        ]
        if undone:  # (a repair killed before it dropped the record): what came after it
            after = tuple(c for c in after if c.version > max(undone))
        if (
            log.logs_every_change
            and point is not None
            and all(c.tag != intent.commit_tag for c in after)
        ):  # positive evidence in the table's own log: the run changed nothing
            return f"nothing to put back (no commit of the run after version {point})"
        foreign = foreign_commits(after, intent.commit_tag)
        if foreign:
            raise ForeignCommits(
                intent.relation,
                intent.restore_version,
                foreign,
                "The run's own changes were left in place.",
            )
        done: List[str] = []
        if intent.quarantine:  # first: a kill after it leaves the intent, and this is repeatable
            # one run's rows deleted from a quarantine (a Delta or Iceberg table)
            spark.run(
                f"delete from {intent.quarantine} "
                f"where `{RUN_ID_COLUMN}` = {sql_string(intent.invocation_id)}"
            )
            done.append(f"took the run's rows out of {intent.quarantine}")
        done += log.put_back(intent, after, executed)
        return "; ".join(done)

    def manual_repair(self, intent: Intent) -> str:
        return self.log(intent.table_format).manual_repair(intent)

    def repair(self, key: ModelKey, on_table: bool, tag: Optional[str] = None) -> Optional[str]:
        """What dead runs of the model left half done, put back before anything else, under the
        model's lease (`key`: this run): each other run's record that carries an intent
        (core/recovery/record.py), then dropped (on Delta and Iceberg, where the dead run's
        statements may still run, kept with a watch for its late commit instead: run/late.py);
        a record with such a watch has its run's late commit taken back, and goes once that is done or
        its run can no longer commit; `on_table`: an intent on the table's own
        properties, as earlier builds (before the run record) wrote it, read again and cleared. The lease is
        taken over from the dead run (its process is gone, or its lease ran out while this run
        watched it, or it let go after a failure it could not undo; a run that renews it is
        alive: `RunInProgress`), so a run that was only stalled can commit nothing after this
        (the fence). The repair is behind the fence too: a repairing run that loses the lease
        while it works (it stalled past it, and a third run took it over) sends nothing more
        (`LeaseLost`). `tag`: this run's commit tag, which its record names, so that a run that
        takes this one's lease over watches for its late RESTORE (run/late.on_takeover); the
        watches this run gave other repairers' records start from the version its repair left,
        and a last fence before it lets go leaves its record (with a taker's watch) to the
        taker where its last statement came late. None: nothing was left to repair (another
        run repaired it meanwhile). A statement of the repair that got no answer (a server's
        RESTORE cut off) may still land: on Delta, whose RESTORE a taker can watch for, and on
        Iceberg, whose rollback a taker fences off (run/rollback_fence.py), the record is then left as
        it is (`abandon`) for the run that takes it over; on Parquet it is let go of as before
        (an unreleased record would hold the model until its server restarts)."""
        records = self.leases.alone(key, tag=tag)
        sent = Answered(self.spark)  # this repair's statements, noted
        try:
            return Restorer(sent, self.leases)._repaired(key, on_table, records)  # type: ignore[arg-type]
        except BaseException:
            row = row_of(key.table_format)
            if sent.unanswered and (row.undo_is_tagged_commit or row.undo_fenced_by_expiry):
                # its taker watches for it or fences it off (Parquet: neither)
                self.leases.abandon(sent.unanswered)
            raise
        finally:
            self.leases.let_go(key)

    def _repaired(self, key: ModelKey, on_table: bool, records: List[RunRecord]) -> Optional[str]:
        """`repair`'s work, its lease held (`records`: the other runs' that hold work)."""
        fence = lambda: self.leases.check(key)  # noqa: E731
        done: List[str] = []
        if on_table:
            found = find_intent(table_properties(self.spark, key.relation))
            if found is not None and found.invocation_id != key.invocation_id:
                done.append(self._repair(found, key.unique_id, fence, on_table=True))
        spark = Fenced(self.spark, fence)
        ordered = sorted(records, key=lambda r: -r.epoch)
        # whether each run can still commit, read before the table's log (run/late.py)
        gone = {r.table: late.watched(r) and not late.may_still_commit(spark, r) for r in ordered}
        # a run whose lease this one took over may still send an undo (run/late.undo_may_land)
        fenced = self.leases.undo_may_land
        # first every watch, then the fences due (a take-back's, this run's or one a run
        # killed before its fence left on the record: run/rollback_fence.py re-anchors the
        # watches it would cut off, each must have been looked at by then), then the
        # watched-out records, then the intents
        expires = row_of(key.table_format).undo_fenced_by_expiry
        mark = fenced and expires
        due = [(r.table, r.fence_due) for r in ordered if r.fence_due is not None and expires]
        out: List[RunRecord] = []
        for record in ordered:
            if record.late is None:  # not repaired before
                continue
            taken = None  # its holder may commit once more
            if record.late.armed:
                note = _note_fence(spark, record.table) if mark else None
                taken = self._take_back(spark, record, key, fence, note)
                done.extend([taken[0]] if taken else [])
                if taken and taken[1] is not None and mark:
                    due.append((record.table, int(taken[1])))
            elif not gone[record.table]:  # a repairer's, given at a takeover: armed at the end
                self.leases.watching.append((record.table, record.late.tag))
            if taken or gone[record.table]:  # watched out
                out.append(record)
        # nearest the current snapshot first: expiring it cuts those below it off the lineage
        # (a rollback must name an ancestor: `fence_off` passes them over), where fencing a
        # lower one first would find a commit on it and fail (`FenceNotBuilt`) every time
        for table, target in _nearest_first(self.log(key.table_format), key.relation, due):
            put = fence_off(spark, key.relation, target, table, key.invocation_id)
            done.extend([put] if put else [])
        for record in out:
            if record.pending is None:
                drop_record(spark, record.table, key.table_format)
            else:  # its pending rows are the settler's now
                spark.run(unset_properties_sql(record.table, LATE_PROPERTY, FENCE_DUE_PROPERTY))
        for table in {t for t, _ in due} - {r.table for r in out}:  # fenced: no longer due
            spark.run(unset_properties_sql(table, FENCE_DUE_PROPERTY))
        for record in ordered:
            if record.intent is None or record.intent.invocation_id == key.invocation_id:
                continue
            done.append(
                self._repair(
                    record.intent,
                    key.unique_id,
                    fence,
                    record.done,
                    fenced=(record.table, key.invocation_id) if fenced else None,
                )
            )
            watch = None if gone[record.table] else late.watch(spark, record)
            if record.pending is not None or watch is not None:
                # its pending rows are the settler's (decide_pending, from the table's own
                # log), a late commit the next repair's: the record, its intent cleared,
                # stays for them
                told = {LATE_PROPERTY: watch.to_property()} if watch is not None else {}
                spark.run(set_properties_sql(record.table, {**INTENT_CLEARED, **told}))
            else:
                drop_record(spark, record.table, key.table_format)
        late.moved_on(spark, self.leases.watching, key.relation, key.table_format)
        fence()
        return "; ".join(done) or None

    def _take_back(
        self,
        spark: Spark,
        record: RunRecord,
        key: ModelKey,
        fence: Callable[[], None],
        note: Optional[Callable[[int], None]],
    ) -> Optional[Tuple[str, Optional[int]]]:
        """`record`'s late commit taken back (run/late.take_back). A failure of the take-back
        is checked against the lease first: a rollback that a fence expired under it fails on
        the unknown snapshot, and this run lost its lease (`LeaseLost`)."""
        try:
            return late.take_back(
                spark, record, key.relation, key.table_format, key.unique_id, note
            )
        except (LateCommits, ForeignCommits, LeaseLost, FenceNotBuilt):
            raise
        except Exception:
            fence()
            raise

    def _repair(
        self,
        intent: Intent,
        unique_id: str,
        fence: Optional[Callable[[], None]] = None,
        done_steps: Sequence[Done] = (),
        on_table: bool = False,
        fenced: Optional[Tuple[str, str]] = None,
    ) -> str:
        """`fence`: checked before each statement (`restore`). `done_steps`: what the dead
        run's record says it completed; `on_table`: the intent is on the table's properties
        (an older version's), cleared once repaired. `fenced`: (the dead run's record, this run's
        invocation id), where a
        run whose lease this repair took over may still send a rollback to the snapshot the
        repair put the table back to (run/late.undo_may_land): on Iceberg that snapshot is
        fenced off before the intent is cleared (run/rollback_fence.py)."""
        where = "the table's properties" if on_table else "its run's record"
        logger.warning(
            f"{unique_id}: {where} carry the intent of run {intent.invocation_id} "
            f"({intent.unique_id}) on {intent.relation}, which did not finish "
            f"({len(done_steps)} of its {len(intent.steps)} steps recorded done); repairing "
            "the table first"
        )
        spark = self.spark if fence is None else Fenced(self.spark, fence)
        dead_stage = stage_name(intent.relation, intent.invocation_id)
        try:
            spark.run(drop_sql(dead_stage, intent.table_format))
        except LeaseLost:
            raise
        except Exception as exc:  # a leftover stage harms nothing; say so
            logger.warning(f"{unique_id}: could not drop {dead_stage}, the dead run's stage: {exc}")
        if not logged(intent.table_format):
            if on_table:
                spark.run(clear_intent_sql(intent.relation))
            return (
                f"repaired forward after run {intent.invocation_id}: {intent.table_format} keeps "
                "no history, its completed steps stay (a rewrite stopped between its renames "
                "was put back first)"
            )
        if table_log(spark, intent.table_format).landed_last(intent):
            # its last step, after its load, landed: nothing to put back, no rollback to fence
            message = (
                f"run {intent.invocation_id} died after its last step (removing columns after "
                "its load) landed: its change stands, nothing put back"
            )
            logger.warning(f"{unique_id}: {message}")
            return message
        try:
            done = self.restore(intent, fence=fence)
            point = intent.restore_version
            if fenced and point is not None and row_of(intent.table_format).undo_fenced_by_expiry:
                put = fence_off(spark, intent.relation, int(point), *fenced)
                done = "; ".join(d for d in (done, put) if d)
            if on_table and not table_log(spark, intent.table_format).restores_properties:
                spark.run(clear_intent_sql(intent.relation))
        except (ForeignCommits, LeaseLost, FenceNotBuilt):
            raise
        except Exception as exc:
            if fence is not None:  # lost its lease meanwhile (its late rollback fenced off,
                fence()  # run/rollback_fence.py): that is what failed (`LeaseLost`)
            raise RestoreFailed(
                unique_id,
                f"repairing after run {intent.invocation_id}",
                DbtRuntimeError("a previous run died half way"),
                exc,
                self.manual_repair(intent),
            ) from exc
        # the dead run's pending rows, if any, are left to the settler, which decides them from
        # the table's own log (a load taken back: dropped; a load a server may still commit:
        # kept until it does, or the server restarts), never dropped here on the repair alone
        message = f"repaired after run {intent.invocation_id} died half way: {done}"
        logger.warning(f"{unique_id}: {message}")
        return message


def _nearest_first(
    log: TableLog, relation: str, due: List[Tuple[str, int]]
) -> List[Tuple[str, int]]:
    """The fences `due` ((record, snapshot)), one per snapshot, those nearest `relation`'s
    current snapshot first (read from its lineage); a snapshot off it last."""
    if not due:
        return []
    head, snapshots = log.listed(relation)
    at = {s.commit.version: i for i, s in enumerate(lineage(snapshots, head))}
    by_target = {target: (table, target) for table, target in due}
    return sorted(by_target.values(), key=lambda d: -at.get(d[1], -1))


def _note_fence(spark: Spark, table: str) -> Callable[[int], None]:
    """What notes on the watched record `table`, before a take-back's rollback, the snapshot
    it rolls back to, whose fence is then due (`RunRecord.fence_due`)."""
    return lambda target: spark.run(set_properties_sql(table, {FENCE_DUE_PROPERTY: str(target)}))


def clear_intent_sql(relation: str) -> str:
    """An older version's intent taken off the table's properties."""
    return unset_properties_sql(relation, INTENT_PROPERTY)
