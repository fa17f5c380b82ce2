"""What a scripted Iceberg table in a unit test does with an ALTER sent behind the table's
history (core/recovery/history_guard.py): the fingerprint read, and the script run or failed
against the history the fake holds now."""

from __future__ import annotations

import re
from typing import Optional

from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.core.recovery.history_guard import inner

_EXPECTED = re.compile(r"<=> '((?:[^'\\]|\\.)*)' THEN")


def is_read(sql: str) -> bool:
    """`sql` reads a table's history fingerprint (history_guard.read_sql)."""
    return sql.rstrip().endswith(" AS fingerprint") and ".history)" in sql


def unwrapped(sql: str, current: str) -> Optional[str]:
    """The statement a guard script carries where the history it expects is `current`; the
    script's failure (as Spark's `raise_error`) where it is not; None for any other SQL."""
    statement = inner(sql)
    if statement == sql:
        return None
    expected = _EXPECTED.search(sql).group(1)  # type: ignore[union-attr]  (the guard's: first)
    if expected.replace("\\'", "'") != current:
        raise DbtDatabaseError(f"[USER_RAISED_EXCEPTION] history changed: not sent: {statement}")
    return statement
