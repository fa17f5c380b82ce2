"""A taken-over run's late commit on Iceberg (core/recovery/late.py): the watch the repair of its
intent leaves on its record, and what every later repair step does with it."""

from typing import Optional

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import Spark, process_running
from dbt.adapters.spark_contracts.core.recovery.intent import Intent
from dbt.adapters.spark_contracts.core.recovery.late import Late, LateWatch, late_commits
from dbt.adapters.spark_contracts.core.recovery.pending import application_gone
from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
from dbt.adapters.spark_contracts.run.run_errors import LateCommits
from dbt.adapters.spark_contracts.run.table_log import IcebergLog

logger = AdapterLogger("SparkContracts")


def watched(record: RunRecord) -> bool:
    """A record a late commit of whose run is, or is to be, looked for: a watch, or an Iceberg
    intent (its repair leaves one)."""
    intent = record.intent
    return record.late is not None or (intent is not None and intent.table_format == "iceberg")


def may_still_commit(spark: Spark, record: RunRecord) -> bool:
    """No positive evidence that `record`'s holder can run no statement any more: its Spark
    application is not provably gone (core/recovery/pending.application_gone). Read before the
    table's log, so a commit made before the evidence was read is in what the log shows."""
    return not application_gone(record.application, spark.application(), process_running)


def watch(spark: Spark, intent: Intent) -> Optional[LateWatch]:
    """After the repair of a run's Iceberg `intent` (whose holder may still commit): the watch
    its late commit is found by, from the snapshot the repair put the table back to (the
    current one where the table had none before the run)."""
    if intent.table_format != "iceberg":
        return None
    after = intent.restore_version
    return LateWatch(
        after if after is not None else IcebergLog(spark).current_version(intent.relation),
        intent.commit_tag,
    )


def look(spark: Spark, record: RunRecord, relation: str) -> tuple:
    """(what `record`'s watch finds on `relation`, every snapshot listed): reads only."""
    assert record.late is not None
    current, snapshots = IcebergLog(spark).listed(relation)
    return late_commits(snapshots, current, record.late), snapshots


def take_back(spark: Spark, record: RunRecord, relation: str, unique_id: str) -> Optional[str]:
    """`record`'s watch (`record.late`) looked for on `relation`'s current lineage: the holder's
    snapshots at its head rolled back to the snapshot before them (what was done is returned);
    under another writer's, `LateCommits` (nothing undone). Returns None, with nothing done,
    where none landed. The caller drops the record where something was returned or its holder
    could no longer commit before this looked (`may_still_commit`)."""
    late, snapshots = look(spark, record, relation)
    if not late.theirs:
        return None
    if late.under or late.back_to is None:
        raise LateCommits(relation, record.holder, record.table, late.theirs, late.under)
    catalog, ident = relation.split(".", 1)
    spark.run(f"call {catalog}.system.rollback_to_snapshot('{ident}', {late.back_to})")
    # a snapshot committed between the listing and the rollback, taken back with the late one
    listed = [s.commit.version for s in snapshots]
    IcebergLog(spark).raced(relation, late.back_to, listed, late.theirs[0].tag or "")
    ids = ", ".join(str(c.version) for c in late.theirs)
    message = (
        f"rolled back snapshot {ids} of run {record.holder}, which committed after its lease "
        f"was taken over and its change repaired, to snapshot {late.back_to}"
    )
    logger.warning(f"{unique_id}: {message}")
    return message


def to_do(spark: Spark, record: RunRecord, relation: str) -> bool:
    """The repair step has something to do for `record`'s watch (reads only, so a run takes the
    model's lease only then): a late commit landed, or its holder can no longer commit."""
    if not may_still_commit(spark, record):
        return True
    found: Late = look(spark, record, relation)[0]
    return bool(found.theirs)
