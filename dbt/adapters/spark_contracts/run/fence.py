"""The fence of a lease holder's run on a connection: before each step (`confirm`: its lease is
still its own), and inside the commit where the table's format can (core/recovery/txn_fence.py:
a holder's write sent under its record's transaction id, and the marker a lease's taker commits
before it reads a table's log)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.evolution.capabilities import row_of
from dbt.adapters.spark_contracts.core.recovery.lease import Fence, fence
from dbt.adapters.spark_contracts.core.recovery.txn_fence import (
    MARKER_VERSION,
    TXN_APP_ID,
    TXN_VERSION,
    app_id,
    marker_sql,
    marker_tag,
)
from dbt.adapters.spark_contracts.run.heartbeat import Heartbeat
from dbt.adapters.spark_contracts.run.model_run import DELTA_USER_METADATA
from dbt.adapters.spark_contracts.run.record_io import read_lease
from dbt.adapters.spark_contracts.run.retry import tried_again

logger = AdapterLogger("SparkContracts")


def confirm(spark: Spark, beat: Heartbeat, table_format: Optional[str] = None) -> Fence:
    """The fence, before an irreversible step. While the lease is `fresh` no other run can have
    taken it over (it must first watch the heartbeat unchanged for a lease's length), so nothing
    is read. Otherwise (the run was paused, or its beats were slow) one beat is sent and waited
    for and the lease read back: a run that took it over has marked it (or dropped it), and after
    that beat no run can take it over for a lease's length."""
    if beat.fresh():
        return Fence(True)
    renew_error = None
    try:
        beat.renew(spark)
    except Exception as exc:  # gone, or unreachable: read it to tell
        logger.debug(f"could not renew {beat.table} before a step: {exc}")
        renew_error = str(exc) or type(exc).__name__
    record = read_lease(spark, beat.table, table_format)
    found = fence(record)
    if found.held and not beat.fresh():  # not taken over, but not renewed either: not confirmed
        work = record is not None and record.holds_work
        return Fence(False, None, work, beat.stale_for(), renew_error)
    return found


def fences(table_format: str) -> bool:
    """Writes to a table of this format can be fenced inside their commit."""
    return row_of(table_format).fences_in_commit


@contextmanager
def carrying(spark: Spark, record_table: str, version: int) -> Iterator[None]:
    """Every write the session sends inside carries `record_table`'s transaction id at
    `version`; both settings leave the session after it, whatever happened (Delta refuses a
    write with one of them set, and a version left set would be spent by a later write)."""
    spark.set_conf(TXN_APP_ID, app_id(record_table))
    try:
        spark.set_conf(TXN_VERSION, str(version))
        yield
    finally:
        try:
            spark.set_conf(TXN_VERSION, None)
        finally:
            spark.set_conf(TXN_APP_ID, None)


def exists(spark: Spark, table: str) -> bool:
    """`table` (`schema.name`) is in its catalog now."""
    schema, name = table.rsplit(".", 1)
    rows = spark.fetch(f"show tables in {schema} like '{name.strip('`')}'")
    return any(str(r.get("tableName") or "").lower() == name.strip("`").lower() for r in rows)


def commit_markers(
    spark: Spark, record_table: str, tables: Sequence[Tuple[str, str]]
) -> Tuple[str, ...]:
    """After `record_table`'s lease was marked taken over, and before anything reads those
    tables' logs to repair or settle what the record says: on each of `tables` ((table,
    format)) whose format fences inside the commit and that exists, an empty commit under the
    record's transaction id at `MARKER_VERSION`, tagged as a marker (so no restore takes it
    for anybody's change). From here on the old holder's writes to it are skipped, or fail.
    Returns the tables marked. A marker refused because a write of the old holder committed
    while it ran is sent again (`tried_again`); the last refusal raises: the taker cannot show
    the window closed, and repairs nothing."""
    marked = []
    for table, table_format in tables:
        if not fences(table_format) or not exists(spark, table):
            continue
        previous = spark.get_conf(DELTA_USER_METADATA)  # the node's own tag, set back after
        spark.set_conf(DELTA_USER_METADATA, marker_tag(record_table))
        try:
            with carrying(spark, record_table, MARKER_VERSION):
                # refused where a write of the old holder committed while it ran (Delta's
                # conflict check on the id): that write is in the log now; sent again
                tried_again(lambda t=table: spark.run(marker_sql(t)), lambda: False, True)
        finally:
            spark.set_conf(DELTA_USER_METADATA, previous)
        marked.append(table)
    if marked:
        logger.debug(f"fenced off the writes of {record_table}'s holder on {', '.join(marked)}")
    return tuple(marked)
