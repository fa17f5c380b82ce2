"""A taken-over run's late commit on Iceberg (core/recovery/late.py): the watch the repair of its
intent leaves on its record, and what every later repair step does with it."""

from typing import Optional

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import Spark, process_running
from dbt.adapters.spark_contracts.core.recovery.intent import Intent
from dbt.adapters.spark_contracts.core.recovery.late import LateWatch, late_commits
from dbt.adapters.spark_contracts.core.recovery.pending import application_gone
from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
from dbt.adapters.spark_contracts.run.run_errors import LateCommits
from dbt.adapters.spark_contracts.run.table_log import IcebergLog

logger = AdapterLogger("SparkContracts")


def may_still_commit(spark: Spark, record: RunRecord) -> bool:
    """No positive evidence that `record`'s holder can run no statement any more: its Spark
    application is not provably gone (core/recovery/pending.application_gone)."""
    return not application_gone(record.application, spark.application(), process_running)


def watch(spark: Spark, record: RunRecord, intent: Intent) -> Optional[LateWatch]:
    """After the repair of `record`'s `intent`: what its holder's late commit would be found
    by, where the format cannot fence it off inside the commit but logs it (Iceberg) and the
    holder's statements may still run; None where no late commit can land unnoticed."""
    if intent.table_format != "iceberg" or not may_still_commit(spark, record):
        return None
    return LateWatch(IcebergLog(spark).current_version(intent.relation), intent.commit_tag)


def take_back(spark: Spark, record: RunRecord, relation: str, unique_id: str) -> Optional[str]:
    """`record`'s watch (`record.late`) looked for on `relation`'s current lineage: the holder's
    snapshots at its head rolled back to the snapshot before them (what was done is returned);
    under another writer's, `LateCommits` (nothing undone). Returns None, with nothing done,
    where none landed. The caller drops the record where something was returned or its holder
    can no longer commit (`may_still_commit`)."""
    assert record.late is not None
    log = IcebergLog(spark)
    late = late_commits(log.snapshots(relation), record.late)
    if not late.theirs:
        return None
    if late.under or late.back_to is None:
        raise LateCommits(relation, record.holder, record.table, late.theirs, late.under)
    catalog, ident = relation.split(".", 1)
    spark.run(f"call {catalog}.system.rollback_to_snapshot('{ident}', {late.back_to})")
    checked = [late.back_to, *(c.version for c in late.theirs)]
    log.raced(relation, late.back_to, checked, record.late.tag)
    ids = ", ".join(str(c.version) for c in late.theirs)
    message = (
        f"rolled back snapshot {ids} of run {record.holder}, which committed after its lease "
        f"was taken over and its change repaired, to snapshot {late.back_to}"
    )
    logger.warning(f"{unique_id}: {message}")
    return message
