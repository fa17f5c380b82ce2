"""An Iceberg repair's fence against a late rollback (core/evolution/capabilities
`undo_fenced_by_expiry`, docs/run-guarantees.md "Iceberg: a late rollback fenced off").

Iceberg's `rollback_to_snapshot` makes no commit and names no one, so a rollback that a run sends
after it lost its lease (stalled between its fence and the call: a repairer, or a failed run's
own undo) cannot be found and taken back as Delta's tagged RESTORE is. It can be made to fail:
a rollback must name a snapshot the table still has. So a repair that took over a lease whose
holder may still send one (run/late.undo_may_land) expires the snapshot it put the table back
to, before the intent it repaired is cleared (a run killed before the fence leaves the intent,
and the next run's repair fences again):

1. an empty commit on it (`insert … where false`, with a lease taker's marker tag: nobody's
   change, core/recovery/intent.is_marker_commit), since the current snapshot cannot expire;
2. the table's current snapshot read again: it must be that commit on the target (or empty
   commits under marker tags down to it: a lease taker's marker, run/fence.history_marker,
   may be on it already, and then no empty commit is made); else a
   commit landed on the target meanwhile, and nothing is expired (`FenceNotBuilt`; the late
   commit's watch is intact and the next run's repair step reads it);
3. every armed late-commit watch on the model anchored at the target or below it (or at a
   snapshot an earlier fence expired) re-anchored at the empty commit: the repair step checked
   them all before its intents, and a late commit lands on the current snapshot;
4. the target expired, `older_than` at the epoch so that no other snapshot goes by its age. A
   late rollback landing between 1 and 4 made the target current again: then all again."""

from typing import Optional, Sequence

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.recovery.intent import Snapshot, is_marker_commit
from dbt.adapters.spark_contracts.core.recovery.late import LATE_PROPERTY, LateWatch, lineage
from dbt.adapters.spark_contracts.core.recovery.txn_fence import marker_tag
from dbt.adapters.spark_contracts.run.fence import empty_commit
from dbt.adapters.spark_contracts.run.iceberg_log import IcebergLog
from dbt.adapters.spark_contracts.run.record_io import other_records, set_properties_sql
from dbt.adapters.spark_contracts.run.run_errors import LeaseLost

EPOCH = "timestamp '1970-01-01 00:00:01'"
TRIES = 3


class FenceNotBuilt(DbtRuntimeError):
    """A snapshot a run that lost its lease may still roll the table back to could not be
    expired: the repair stops before its load, naming why and the expiry by hand."""

    def __init__(self, relation: str, target: int, why: str):
        self.relation, self.target = relation, target
        catalog, ident = relation.split(".", 1)
        super().__init__(
            f"{relation}: snapshot {target}, which a run that lost its lease may still roll the "
            f"table back to, was not fenced off: {why}. Nothing was loaded. Run again: the "
            "next run's repair reads the table first. By hand, once that run's statements can "
            f"no longer run or the current snapshot is past it: CALL {catalog}.system."
            f"expire_snapshots(table => '{ident}', older_than => {EPOCH}, snapshot_ids => "
            f"array({target}))"
        )


def fence_off(
    spark: Spark, relation: str, target: int, record_table: str, invocation_id: str
) -> Optional[str]:
    """`target` (the snapshot a repair of `record_table`'s intent put `relation` back to)
    expired behind an empty commit (the module's text), by the run `invocation_id` (the
    repairing one: its own records are not re-anchored).
    Returns what was done; None where it is gone already, or off the current lineage (a
    rollback must name an ancestor of the current snapshot: no late one can go there)."""
    log = IcebergLog(spark)
    for _ in range(TRIES):
        head, snapshots = log.listed(relation)
        if all(s.commit.version != target for s in lineage(snapshots, head)):
            return None
        if head == target:
            empty = f"insert into {relation} select * from {relation} where false"
            empty_commit(spark, empty, marker_tag(record_table))
            head, snapshots = log.listed(relation)
        if not _markers_down_to(snapshots, head, target):
            raise FenceNotBuilt(
                relation,
                target,
                f"the table's current snapshot {head} is not this repair's empty commit on it, "
                "nor a lease taker's (a commit landed on it since the repair)",
            )
        below = {s.commit.version for s in lineage(snapshots, target)}
        # an earlier fence's empty commits (a try of this loop's, made current no more)
        below |= {s.commit.version for s in snapshots if is_marker_commit(s.commit)}
        listed = {s.commit.version for s in snapshots}
        _rewatch(spark, relation, invocation_id, below, listed, int(head))
        catalog, ident = relation.split(".", 1)
        try:
            spark.run(
                f"call {catalog}.system.expire_snapshots(table => '{ident}', older_than => "
                f"{EPOCH}, snapshot_ids => array({target}))"
            )
        except LeaseLost:
            raise
        except Exception as exc:
            if log.current_version(relation) == target:
                continue  # a late rollback to it landed meanwhile: again
            raise FenceNotBuilt(relation, target, f"its expiry failed ({exc})") from exc
        return (
            f"expired snapshot {target}, which a run that lost its lease may still roll back "
            f"to (after the empty commit {head} on it)"
        )
    raise FenceNotBuilt(
        relation, target, f"it was made current again after each of {TRIES} empty commits on it"
    )


def _markers_down_to(snapshots: Sequence[Snapshot], head: Optional[int], target: int) -> bool:
    """From the current snapshot `head` down to `target`, nothing but empty commits under a
    marker tag (this fence's, and a lease taker's: run/fence.history_marker, which a takeover
    may commit on the target before the fence)."""
    by_id = {s.commit.version: s for s in snapshots}
    at = by_id.get(head) if head is not None and head != target else None
    for _ in by_id:  # at most once each (a cycle of parent ids ends it)
        if at is None or not is_marker_commit(at.commit):
            return False
        if at.parent == target:
            return True
        at = by_id.get(at.parent) if at.parent is not None else None
    return False


def _rewatch(
    spark: Spark, relation: str, invocation_id: str, below: set, listed: set, fence: int
) -> None:
    """Every other run's armed watch on `relation` anchored in `below` (the target and its
    ancestors, and earlier empty commits of a fence) or at a snapshot no longer `listed` (an
    earlier fence's target) anchored at `fence` instead: expiring the target would cut it off
    from the current lineage."""
    for record in other_records(spark, relation, invocation_id, table_format="iceberg"):
        watch = record.late
        if watch is None or not watch.armed or watch.after is None:
            continue
        if watch.after in below or watch.after not in listed:
            moved = LateWatch(fence, watch.tag).to_property()
            spark.run(set_properties_sql(record.table, {LATE_PROPERTY: moved}))
