"""PyHive's thrift connection, opened without the `USE <database>` its constructor sends.

dbt-spark opens a thrift or http connection with `pyhive.hive.connect(...)`, and PyHive's
`Connection.__init__` sends `USE `default`` once the session is open: one round trip per dbt
connection, so per model. A thrift connection of this adapter asks for its database in the
OpenSession request instead (`use:database`, connection/session_sql.open_session_settings),
which the Spark Thrift Server applies as it opens the session, so the statement is not needed.

`without_use()` makes the PyHive connections the calling thread opens (dbt-spark's `open`
inside it) instances of `Connection` below, which skips that statement. The switch is a
context variable, so a connection another thread opens meanwhile (this adapter's, or plain
dbt-spark's in the same process) is PyHive's own; `pyhive.hive.connect` is wrapped once, when
this module is first imported, and only looks the variable up.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Any, Iterator

from pyhive import hive

# kept across a reload of this module, so that a `without_use` block open meanwhile still resets
_SKIP_USE: contextvars.ContextVar[bool] = globals().get("_SKIP_USE") or contextvars.ContextVar(
    "spark_contracts_pyhive_without_use", default=False
)


class _NoStatement:
    """The cursor PyHive's constructor asks for to send its `USE`: sends nothing (anything
    else a later PyHive sent from there is refused, not dropped)."""

    def execute(self, operation: str, *args: Any, **kwargs: Any) -> None:
        if not str(operation).lstrip().upper().startswith("USE "):
            raise RuntimeError(f"PyHive's connection sent {operation!r} as it opened")
        return None

    def close(self) -> None:
        return None


class Connection(hive.Connection):
    """PyHive's connection; its constructor's one cursor (the `USE`) sends nothing."""

    _opened = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._opened = True

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        if not self._opened:
            return _NoStatement()
        return super().cursor(*args, **kwargs)


def _connect(*args: Any, **kwargs: Any) -> hive.Connection:
    if _SKIP_USE.get():
        return Connection(*args, **kwargs)
    return _pyhive_connect(*args, **kwargs)


_pyhive_connect = getattr(hive.connect, "__wrapped_pyhive_connect__", hive.connect)
_connect.__wrapped_pyhive_connect__ = _pyhive_connect  # type: ignore[attr-defined]
hive.connect = _connect


@contextmanager
def without_use(skip: bool = True) -> Iterator[None]:
    """The PyHive connections this thread opens inside skip their `USE` (where `skip`)."""
    token = _SKIP_USE.set(skip)
    try:
        yield
    finally:
        _SKIP_USE.reset(token)
