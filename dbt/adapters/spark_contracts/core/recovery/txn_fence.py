"""The fence inside the commit (Delta). Pure.

A lease's fence (core/recovery/lease.py) is checked before each step; a run that stalls between
that check and its statement reaching the table could still commit after another run took its
lease over. Delta closes that window for its writes with idempotent writes: a write carries a
transaction id (an application id and a version) and Delta skips it where the table's log holds a
version for that application id at least as high, and fails it
(`ConcurrentTransactionException`) where such a version is committed while it runs.

So a run that holds a lease sends each write to a Delta table it may have to answer for (its
steps, its load, its discarded rows' move) under the application id its record names
(`app_id`, drawn when it took the lease), each at the next version from 1. A run that takes that lease over first marks the
record (taken over), then commits an empty write on each such table under that id at
`MARKER_VERSION` (`marker_sql`, tagged `marker_tag`), and only then reads the table's log to
repair or settle what the record says. Every write of the old holder either is in the log the
taker reads, or is never committed: skipped (the statement returns; the holder's next fence finds
its lease taken over, since the mark came first) or failed.

A marker is the taker's, not the dead run's, and changes no row or schema: a restore passes over
it (`is_marker`), and Delta's RESTORE keeps the id's version (measured on Delta 4.3.1,
`benchmarks/experiments/delta_txn_fence.py`: a write under that id after a RESTORE is still
skipped).
"""

from __future__ import annotations

from dbt.adapters.spark_contracts.core.recovery.intent import MARKER_TAG_PREFIX, TAG_PREFIX

APP_ID_PREFIX = f"{TAG_PREFIX}-lease:"
MARKER_VERSION = 2**63 - 1  # Delta's txnVersion is a long: no holder's version reaches it
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def record_key(record_table: str) -> str:
    """A run record's own name as a key: the last part of its name, without quotes, lower case
    (its holder names it with its schema, a listing without; a record's name carries its model,
    its invocation and, for a microbatch batch, the batch)."""
    return record_table.rsplit(".", 1)[-1].strip("`").lower()


def app_id(record_table: str, nonce: str) -> str:
    """The application id the writes of the run holding `record_table` carry: its record's
    name and a `nonce` of its own, drawn each time a run takes a lease (its record says it,
    `TXN_APP_PROPERTY`), so two holders of one record name never share a version sequence."""
    return f"{APP_ID_PREFIX}{record_key(record_table)}:{nonce}"


def marker_tag(record_table: str) -> str:
    """The commit tag of the marker a taker of `record_table`'s lease commits."""
    return MARKER_TAG_PREFIX + record_key(record_table)


def marker_sql(table: str) -> str:
    """An empty write that commits: a MERGE that matches nothing (names no column, so it fits
    every schema; `DELETE ... WHERE false` commits nothing, so it would not fence)."""
    return f"merge into {table} using (select 1 as k) s on false when matched then delete"
