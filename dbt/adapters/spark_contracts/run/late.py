"""A taken-over run's late commit (core/recovery/late.py): the watch the repair of its
intent leaves on its record (or, for a repairing run, the repair that takes its lease over),
and what every later repair step does with it."""

from typing import Callable, List, Optional, Tuple

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import Spark, process_running
from dbt.adapters.spark_contracts.core.evolution.capabilities import row_of
from dbt.adapters.spark_contracts.core.recovery.intent import Snapshot
from dbt.adapters.spark_contracts.core.recovery.late import (
    LATE_PROPERTY,
    Late,
    LateWatch,
    late_commits,
    watched_from,
)
from dbt.adapters.spark_contracts.core.recovery.pending import application_gone
from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
from dbt.adapters.spark_contracts.run.model_run import DELTA_USER_METADATA
from dbt.adapters.spark_contracts.run.record_io import set_properties_sql
from dbt.adapters.spark_contracts.run.run_errors import LateCommits
from dbt.adapters.spark_contracts.run.table_log import table_log

logger = AdapterLogger("SparkContracts")


def watched(record: RunRecord) -> bool:
    """A record a late commit of whose run is, or may be, looked for: a watch, or an intent on
    a table whose log shows such a commit (Delta, Iceberg: its repair may leave a watch)."""
    intent = record.intent
    return record.late is not None or (
        intent is not None and row_of(intent.table_format).takes_late_commits_back
    )


def may_still_commit(spark: Spark, record: RunRecord) -> bool:
    """No positive evidence that `record`'s holder can run no statement any more: its Spark
    application is not provably gone (core/recovery/pending.application_gone). Read before the
    table's log, so a commit made before the evidence was read is in what the log shows."""
    return not application_gone(record.application, spark.application(), process_running)


def watch(spark: Spark, record: RunRecord) -> Optional[LateWatch]:
    """After the repair of `record`'s intent (whose holder may still commit): the watch its
    late commit is found by. On Iceberg from the snapshot the repair put the table back to (the
    current one where the table had none before the run); on Delta from the RESTORE that undid
    the dead run's commits, or the restore point where nothing was restored
    (core/recovery/late.watched_from)."""
    intent = record.intent
    if intent is None or not watched(record):
        return None
    log = table_log(spark, intent.table_format)
    if log.landed_last(intent):  # its last statement to the table landed: none can follow
        return None
    if intent.table_format == "iceberg":
        after = intent.restore_version
        if after is None:  # the table had no snapshot before the run
            after = log.current_version(intent.relation)
        return LateWatch(after, intent.commit_tag)
    own = spark.get_conf(DELTA_USER_METADATA)  # what this session's RESTORE carried
    commits = [s.commit for s in log.listed(intent.relation)[1]]
    # the point the repair restored to: before the dead run's first own commit (another
    # writer's commit between the version it read and that one stays)
    point = log.restore_point(intent).restore_version
    after = watched_from([c for c in commits if point is None or c.version > point], point, own)
    if after is None:  # no restore point recorded, nothing restored: from the current version
        after = log.current_version(intent.relation)
    return LateWatch(after, intent.commit_tag)


def undo_may_land(spark: Spark, records: List[RunRecord], table_format: str) -> bool:
    """One of the other runs' `records` (those a takeover found) may still send an undo that
    no watch can find, its holder not provably gone: on Iceberg, whose rollback is no commit
    and names no one, a repairer's rollback or a failed run's own, stalled past its fence. The
    repair then fences off the snapshot it puts the table back to (run/rollback_fence.py).
    Any other run's record found counts, a watched one too: over a server that keeps running a
    watch lasts until it restarts, so there every Iceberg repair of an intent fences."""
    if not row_of(table_format).undo_fenced_by_expiry:
        return False
    # a record taken over (released by a taker's mark) counts: a taker that failed before
    # its fence leaves the holder's rollback to the next repair
    return any(not r.let_go and may_still_commit(spark, r) for r in records)


def on_takeover(spark: Spark, record: RunRecord, table_format: str) -> Optional[LateWatch]:
    """The watch a repair that takes `record`'s lease over gives it, where `record` is a
    repairing run's (its commit tag, no intent), its holder may still commit, and the format's
    undo is a commit with that tag (Delta's RESTORE): unarmed, so nothing is taken back for it
    until a repair that ends arms it from the version it left (`moved_on`). Stalled between its
    fence and its RESTORE, that run would otherwise undo, unseen, what the taker repairs and
    loads; a RESTORE of it that lands before a repair has ended is part of what that repair
    reads (it repaired the same intent)."""
    if not record.tag or record.intent is not None or record.late is not None:
        return None
    if not row_of(table_format).undo_is_tagged_commit or not may_still_commit(spark, record):
        return None
    return LateWatch(None, record.tag, armed=False)


def moved_on(
    spark: Spark, watching: List[Tuple[str, str]], relation: str, table_format: str
) -> None:
    """The unarmed watches (record table, tag) armed from `relation`'s version after this run's
    repair: a late RESTORE that landed before was part of what the repair read (the same
    intent's; at most one intent is left to repair at a time: each run's repair step repairs
    the one before)."""
    if not watching:
        return
    after = table_log(spark, table_format).current_version(relation)
    for table, tag in watching:
        spark.run(set_properties_sql(table, {LATE_PROPERTY: LateWatch(after, tag).to_property()}))


def look(
    spark: Spark, record: RunRecord, relation: str, table_format: str
) -> Tuple[Late, List[Snapshot]]:
    """(what `record`'s watch finds on `relation`, every commit listed): reads only."""
    assert record.late is not None and record.late.armed
    current, snapshots = table_log(spark, table_format).listed(relation)
    return late_commits(snapshots, current, record.late), snapshots


def take_back(
    spark: Spark,
    record: RunRecord,
    relation: str,
    table_format: str,
    unique_id: str,
    before: Optional[Callable[[int], None]] = None,
) -> Optional[Tuple[str, Optional[int]]]:
    """`record`'s armed watch (`record.late`) looked for on `relation`'s current lineage: the
    holder's commits at its head put back to the version before them (what was done is
    returned); under another writer's, `LateCommits` (nothing undone); where all it found
    changed nothing (`Late.passed`), nothing is done and that is returned (the watch ends).
    Returns None, with nothing done, where none landed. The caller drops the record where
    something was returned or its holder could no longer commit before this looked
    (`may_still_commit`). Returned with what was done: the version it went back to (None where
    nothing was), which the caller fences off on Iceberg once every watch was looked at
    (run/restore.py, run/rollback_fence.py); `before(version)` is called right before the
    statement that goes back to it (the repair notes there that its fence is due)."""
    late, snapshots = look(spark, record, relation, table_format)
    if not late.theirs:
        if not late.passed:
            return None
        ids = ", ".join(str(c.version) for c in late.passed)
        message = (
            f"run {record.holder}'s commit {ids}, sent after its lease was taken over, put the "
            "table back to the state it was in already: nothing to take back, its watch ends"
        )
        logger.info(f"{unique_id}: {message}")
        return message, None
    if late.under or late.back_to is None:
        raise LateCommits(relation, record.holder, record.table, late.theirs, late.under)
    listed = [s.commit.version for s in snapshots]
    tag = late.theirs[0].tag or ""
    if before is not None:
        before(late.back_to)
    table_log(spark, table_format).take_back(relation, late.back_to, listed, tag, unique_id)
    ids = ", ".join(str(c.version) for c in late.theirs)
    word = "snapshot" if table_format == "iceberg" else "version"
    message = (
        f"rolled back {word} {ids} of run {record.holder}, which committed after its lease "
        f"was taken over and its change repaired, to {word} {late.back_to}"
    )
    logger.warning(f"{unique_id}: {message}")
    return message, late.back_to


def to_do(spark: Spark, record: RunRecord, relation: str, table_format: str) -> bool:
    """The repair step has something to do for `record`'s watch (reads only, so a run takes the
    model's lease only then): a late commit landed (one that changed nothing too: it ends the
    watch), the watch is still to be armed, its holder can no longer commit, or a take-back's
    fence is due (`RunRecord.fence_due`: the run that rolled back died before its fence)."""
    if record.fence_due is not None:
        return True
    if record.late is None:
        return False
    if not may_still_commit(spark, record) or not record.late.armed:
        return True
    found: Late = look(spark, record, relation, table_format)[0]
    return bool(found.theirs or found.passed)
