"""An ALTER, or a rebuild's `create or replace`, sent behind the table's own history, where the
format fences neither inside its commit and a late one cannot be found afterwards (Iceberg:
core/evolution/capabilities `guards_by_history`; an ALTER makes no snapshot, a replace
one off the current lineage, which no watch for a late commit follows). Pure.

A run checks its lease before each step, but a client stalled between that check and the
statement (or a server holding it unstarted) would land the statement after another run took
the lease over and repaired: a late `DROP COLUMNS` takes a column's values out of the current
version, and a late `ADD COLUMNS` puts back one the repair dropped. Such a statement cannot be
found afterwards (no snapshot names it; a late replace took the next run's load out of the
current version, its snapshot without a parent), so it is made to fail instead:

- the run reads the table's history fingerprint (`read_sql`: the number of its history entries
  and a hash of them, each a snapshot made current and when) before its fence;
- it sends the statement as a SQL script (`guarded`) that reads the fingerprint again on the
  server and runs the statement only if it is unchanged, else fails (`raise_error`);
- a run that takes a lease over whose holder may still send statements commits an empty
  snapshot on the table (a marker, run/fence.history_marker) before it repairs anything;
  a replace fails on any commit after the read too (the next run's own load: a settler keeps
  a pending table's lease while its run's Spark application may still run, and takes none).

The marker comes after the mark on the lease, which comes after the holder's check confirmed
it, which comes after the holder's read: so the history the script finds is not the one the
holder read. A rollback adds an entry too (to a snapshot made current again), and an expired
snapshot takes its entries out: no history goes back to one read before. The gap left is
inside one script on the server, between its check and its statement's commit: for an ALTER
milliseconds (an Iceberg schema commit based on metadata older than the table's current one
fails); for a replace the whole of its query, and Iceberg commits a replace onto whatever the
table is by then (benchmarks/experiments/iceberg_replace_guard.py). The entries' times are
hashed, never compared."""

from __future__ import annotations

import re

from dbt.adapters.spark_contracts.core.recovery.statements import LEADING_COMMENTS
from dbt.adapters.spark_contracts.core.schema.types import sql_string

# the session setting that lets Spark run a script (SQL scripting; on by default in 4.1.1)
SCRIPTING_CONF = "spark.sql.scripting.enabled"

SHOWN = 300  # the characters of the statement a failed guard's message shows

# the script's own shape, so that `inner` finds the statement it carries (fault injection)
_OPEN = "BEGIN\n  REFRESH TABLE {relation};\n  IF {fingerprint} <=> {expected} THEN\n    "
# the statement's `;` on a line of its own: a statement ending in a `--` comment still ends
_CLOSE = "\n    ;\n  ELSE\n    SELECT raise_error({message});\n  END IF;\nEND"
_INNER = re.compile(
    LEADING_COMMENTS
    + r"BEGIN\s+REFRESH TABLE .+?;\s+IF .*? THEN\s+(.*?);\s+ELSE\s+SELECT raise_error\(",
    re.DOTALL | re.IGNORECASE,
)


def fingerprint(relation: str) -> str:
    """A scalar subquery: `relation`'s history entries, counted and hashed (a string)."""
    return (
        "(SELECT concat(count(*), ':', coalesce(bit_xor(xxhash64(snapshot_id, "
        f"made_current_at)), 0)) FROM {relation}.history)"
    )


def read_sql(relation: str) -> str:
    """The fingerprint as one row, column `fingerprint` (send `REFRESH TABLE` first: a session's
    catalog caches the table)."""
    return f"SELECT {fingerprint(relation)} AS fingerprint"


def marker_sql(relation: str) -> str:
    """The empty append a lease's taker commits on `relation` (an Iceberg snapshot that changes
    nothing). Its own text, not the one of a repair's fence (run/rollback_fence.py: `where
    false`), so the statements a run sends (its dbt log, a test's stop by text) tell the two
    apart; the table's snapshots do not (both are appends under a marker tag)."""
    return f"insert into {relation} select * from {relation} limit 0"


def guarded(statement: str, relation: str, expected: str) -> str:
    """`statement` (one ALTER or `create or replace` of `relation`) as a script that sends it
    only while `relation`'s history is still `expected` (read by `read_sql` before the run's
    fence), else fails naming why (and the statement, its first `SHOWN` characters)."""
    shown = statement if len(statement) <= SHOWN else statement[:SHOWN] + " ..."
    message = sql_string(
        f"{relation} changed since this run read it before its fence (another run took its "
        f"lease over, or a commit or rollback landed): not sent: {shown}"
    )
    head = _OPEN.format(
        relation=relation, fingerprint=fingerprint(relation), expected=sql_string(expected)
    )
    return head + statement + _CLOSE.format(message=message)


def inner(sql: str) -> str:
    """The statement a `guarded` script carries; any other SQL as it is."""
    found = _INNER.match(sql)
    return found.group(1).rstrip() if found else sql


def guards_load(rebuilds: bool, replaces_deployed: bool, holds_lease: bool) -> bool:
    """A run's load goes behind the table's history (on a format that `guards_by_history`): a
    table model's rebuild (`rebuilds`) by one `create or replace` of the deployed table
    (`replaces_deployed`: not a table created, nor one built beside and swapped in, nor
    dropped first) by a run that holds a lease (a quarantining run: its pending rows), which
    another run may take over. A run holding none leaves nothing for another to take over;
    two such rebuilds end as the last one's, as on dbt-spark."""
    return rebuilds and replaces_deployed and holds_lease
