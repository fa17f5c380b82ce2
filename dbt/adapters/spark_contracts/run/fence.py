"""The fence of a lease holder's run on a connection: before each step (`confirm`: its lease is
still its own), and inside the commit where the table's format can (core/recovery/txn_fence.py:
a holder's write sent under its record's transaction id, and the marker a lease's taker commits
before it reads a table's log); and no lease taken over where neither can be done
(`refuse_unguarded`)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.errors import statement_answered
from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.evolution.capabilities import row_of
from dbt.adapters.spark_contracts.core.recovery import history_guard
from dbt.adapters.spark_contracts.core.recovery.lease import Fence, State, fence, unguarded_takeover
from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
from dbt.adapters.spark_contracts.core.recovery.txn_fence import (
    MARKER_VERSION,
    TXN_APP_ID,
    TXN_VERSION,
    marker_sql,
    marker_tag,
)
from dbt.adapters.spark_contracts.core.schema.types import sql_string
from dbt.adapters.spark_contracts.run.commit_tag import tagged_as
from dbt.adapters.spark_contracts.run.heartbeat import Heartbeat
from dbt.adapters.spark_contracts.run.late import may_still_commit
from dbt.adapters.spark_contracts.run.model_run import (
    DELTA_USER_METADATA,
    ICEBERG_SNAPSHOT_TAG,
    TAG_KEYS,
)
from dbt.adapters.spark_contracts.run.record_io import LeaseOwner, read_lease
from dbt.adapters.spark_contracts.run.retry import tried_again
from dbt.adapters.spark_contracts.run.run_errors import UnguardedTakeover

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
def carrying(spark: Spark, app: str, version: int) -> Iterator[None]:
    """Every write the session sends inside carries the transaction id `app` at `version`;
    both settings leave the session after it, whatever happened (Delta refuses a write with one
    of them set, and a version left set would be spent by a later write). Leaving them fails
    loudly after a write that went through, and is logged after one that failed (its own error
    is the one raised)."""
    try:
        spark.set_conf(TXN_APP_ID, app)
        spark.set_conf(TXN_VERSION, str(version))
        yield
    except BaseException as exc:
        # a write Spark gave no answer for may still read them on the server (Spark Connect
        # keeps the session, and the statement reads the settings when it runs): unset there,
        # it would commit with no id, which no marker fences off. Its session is left as it
        # is, and the connection goes on in a new one (where the method cannot: unset). An
        # interrupt in the writing thread itself (not an Exception) says nothing either
        if not (isinstance(exc, Exception) and statement_answered(exc)) and _left(spark):
            raise
        _unset(spark, quiet=True)
        raise
    _unset(spark, quiet=False)


def _left(spark: Spark) -> bool:
    """The connection goes on in a new session, with the node's commit tag (`Spark.
    leave_session`); where opening it fails (the server is still out of reach), the old one is
    left all the same (no statement runs there again: each later one tries a new session
    first), and the write's own error is the one raised."""
    try:
        return spark.leave_session(TAG_KEYS)
    except Exception as exc:  # the old one is left still: each later statement tries a new one
        logger.warning(f"could not open a new session after a write without an answer: {exc}")
        return True


def _unset(spark: Spark, quiet: bool) -> None:
    failed = None
    for key in (TXN_VERSION, TXN_APP_ID):
        try:
            spark.set_conf(key, None)
        except Exception as exc:
            failed = failed or exc
            logger.warning(f"could not unset {key} in this session: {exc}")
    if failed is not None and not quiet:
        raise failed


def exists(spark: Spark, table: str) -> bool:
    """`table` (`schema.name`) is in its catalog now."""
    schema, name = table.rsplit(".", 1)
    bare = name.strip("`")
    rows = spark.fetch(f"show tables in {schema} like {sql_string(bare)}")
    return any(str(r.get("tableName") or "").lower() == bare.lower() for r in rows)


def commit_markers(
    spark: Spark, record: RunRecord, tables: Sequence[Tuple[str, str]]
) -> Tuple[str, ...]:
    """After `record`'s lease was marked taken over, and before anything reads those tables'
    logs to repair or settle what the record says: on each of `tables` ((table, format)) whose
    format fences inside the commit and that exists, an empty commit under the transaction id
    the record names at `MARKER_VERSION`, tagged as a marker (no restore takes it for anybody's
    change). From here on the old holder's writes to it are skipped, or fail. Returns the
    tables marked (none where the record names no id: its holder's writes carry none). A
    marker refused because a write of the old holder committed while it ran is sent again
    (`tried_again`: that write is in the log then); the last refusal raises: the taker cannot
    show the window closed, and repairs nothing."""
    if record.txn_app is None:
        return ()
    return fence_off(spark, record.txn_app, record.table, tables)


def fence_off(
    spark: Spark, app: str, record_table: str, tables: Sequence[Tuple[str, str]]
) -> Tuple[str, ...]:
    """The writes under transaction id `app` (the holder's of `record_table`) to each of
    `tables` that fences inside the commit and exists made final: an empty commit under `app` at
    `MARKER_VERSION`, tagged as a marker; such a write not in the table's log by then is skipped
    or fails. Returns the tables marked."""
    marked: list = []
    for table, table_format in tables:
        if not fences(table_format) or not exists(spark, table):
            continue
        with tagged_as(spark, DELTA_USER_METADATA, marker_tag(record_table)):

            def mark(t: str = table) -> None:
                with carrying(spark, app, MARKER_VERSION):
                    spark.run(marker_sql(t))

            tried_again(mark, lambda: False, True)
        marked.append(table)
    if marked:
        logger.debug(f"fenced off the writes of {record_table}'s holder on {', '.join(marked)}")
    return tuple(marked)


def history_marker(spark: Spark, record: RunRecord, relation: str, table_format: str) -> bool:
    """After `record`'s lease was marked taken over, and before anything reads `relation`'s log
    to repair what the record says: where the format guards its ALTERs and a rebuild's replace
    by the table's history (core/recovery/history_guard.py) and the table exists, an empty
    commit tagged as this taker's marker (nobody's change: a restore passes over it). Such a
    statement the old holder sends from here on fails its guard. True: committed."""
    if not row_of(table_format).guards_by_history or not exists(spark, relation):
        return False
    empty_commit(spark, history_guard.marker_sql(relation), marker_tag(record.table))
    logger.debug(f"fenced off the guarded statements of {record.table}'s holder on {relation}")
    return True


def empty_commit(spark: Spark, statement: str, tag: str) -> None:
    """An Iceberg snapshot that changes nothing (`statement`: an empty append), tagged `tag`."""
    with tagged_as(spark, ICEBERG_SNAPSHOT_TAG, tag):
        spark.run(statement)


def refuse_unguarded(
    spark: Spark, owner: LeaseOwner, taken: Sequence[Tuple[RunRecord, State]]
) -> None:
    """Before `owner`'s run marks the leases `taken` (each with how it was judged) taken over:
    `UnguardedTakeover` for the first whose holder could still write to the model's table,
    which cannot guard against it (core/recovery/lease.unguarded_takeover). Reads only."""
    guarded = row_of(owner.table_format).guards_late_writes
    if guarded:
        return
    for record, state in taken:
        if unguarded_takeover(state, guarded, not may_still_commit(spark, record)):
            client = record.client.to_property() if record.client else "not recorded"
            app = record.application.to_property() if record.application else "not recorded"
            raise UnguardedTakeover(
                owner.unique_id,
                owner.relation,
                record.holder,
                record.table,
                f"its client {client}, its Spark application {app}",
                owner.table_format,
                record.holds_work,
            )
