"""Which SQL statements can change something durable, and the lease's heartbeat statement (built
and recognised here, one owner for its shape). Pure.

Used by the fault-injection point (connection/failpoint.py) to number the statements at which a
test kills a run. A read (SELECT, SHOW, DESCRIBE, EXPLAIN), a session setting (SET, USE) and a
temporary view change nothing another process sees.
"""

from __future__ import annotations

import re

from dbt.adapters.spark_contracts.core.recovery.pending import BEAT_PROPERTY, RELEASED

_READS = (
    "select",
    "with",
    "show",
    "describe",
    "desc",
    "explain",
    "set",
    "reset",
    "use",
    "refresh",
    "values",
    "create or replace temporary view",
    "create temporary view",
    "create or replace temp view",
    "create temp view",
    "cache",
    "uncache",
)
# a statement's leading comments (dbt's query comment), as a pattern (DOTALL)
LEADING_COMMENTS = r"^\s*(?:/\*.*?\*/\s*|--[^\n]*\n\s*)*"
_COMMENTS = re.compile(LEADING_COMMENTS, re.DOTALL)


def changes_something(sql: str) -> bool:
    """The statement may change a table, a view or the catalog (not a read, not a setting of
    the session, not a temporary view). Leading comments (dbt's query comment) are skipped."""
    folded = words(sql)
    if not folded:
        return False
    return not any(
        folded == r or folded.startswith(r + " ") or folded.startswith(r + "(") for r in _READS
    )


def beat_sql(table: str, value: str) -> str:
    """The heartbeat `value` written on the lease `table` (`RELEASED`: the lease let go of)."""
    return f"alter table {table} set tblproperties ('{BEAT_PROPERTY}' = '{value}')"


_BEAT = re.compile(
    r"alter table \S+ set tblproperties \('"
    + re.escape(BEAT_PROPERTY)
    + r"' = '(?!"
    + re.escape(RELEASED)
    + r"')[\d.]+'\)"
)


def is_beat(sql: str) -> bool:
    """`sql` (dbt's query comment and whitespace aside, any case) is a heartbeat made by
    `beat_sql`, not the release."""
    return _BEAT.fullmatch(words(sql)) is not None


def words(sql: str) -> str:
    """The statement after its leading comments (dbt's query comment), whitespace folded,
    in lower case."""
    return " ".join(_COMMENTS.sub("", sql, count=1).split()).lower()
