"""A fault-injection point for the kill-at-every-statement matrix
(tests/functional/evolution/test_kill_every_statement.py). Off unless its variable is set.

With `DBT_SPARK_CONTRACTS_KILL_AFTER=<n>`, the dbt process kills itself with SIGKILL (no
cleanup, no `finally`, as `kill -9` from outside) right after the n-th statement it sent that
can change something has returned. With `DBT_SPARK_CONTRACTS_STOP_BEFORE=<n>`, it stops itself
with SIGSTOP (every thread, its lease's heartbeat too: a stalled process) right before it sends
the n-th such statement, after every check the run made before it; SIGCONT sends it on (with
`DBT_SPARK_CONTRACTS_STOP_BEFORE=sql:<start>`: the first such statement whose text, after
dbt's query comment, starts with `<start>`, any case: the n-th differs between methods; an
ALTER sent behind its guard, core/recovery/history_guard.py, by the ALTER's own text; with
`has:<text>`, the first whose text holds `<text>`). With
`DBT_SPARK_CONTRACTS_WRITES_LOG=<file>`, each such statement is appended to the file (how a
test learns the kill points of a run). Heartbeats are not counted, whichever thread sends
them (the lease's heartbeat thread, or the run's own when its lease is due a beat before a
step): they come when a clock says, so counting them would make the n-th statement differ
from run to run (seen on 2026-12-01: a control run beat before its load, the stopped run did
not, and its stop fell after the load). A lease released (its heartbeat set to 0) is counted.
"""

from __future__ import annotations

import os
import signal
import threading

from dbt.adapters.spark_contracts.core.recovery.history_guard import inner
from dbt.adapters.spark_contracts.core.recovery.statements import (
    changes_something,
    is_beat,
    words,
)

KILL_AFTER_ENV = "DBT_SPARK_CONTRACTS_KILL_AFTER"
STOP_BEFORE_ENV = "DBT_SPARK_CONTRACTS_STOP_BEFORE"
WRITES_LOG_ENV = "DBT_SPARK_CONTRACTS_WRITES_LOG"
HEARTBEAT_THREAD_PREFIX = "lease "  # run/heartbeat.py names its thread so
SQL_PREFIX = "sql:"  # STOP_BEFORE by the statement's start, not its number
HAS_PREFIX = "has:"  # STOP_BEFORE by a text the statement holds


def _timed(sql: str) -> bool:
    """A statement sent when a clock says (a heartbeat), not at a fixed place in the run."""
    if threading.current_thread().name.startswith(HEARTBEAT_THREAD_PREFIX):
        return True
    return is_beat(sql)


class _Counter:
    """The writes this process has sent (one per process: the kill ends the process), and
    whether it has stopped itself (once: a write that fails is not counted)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = 0
        self.stopped = False


_COUNTER = _Counter()


def _point(name: str) -> int:
    value = (os.environ.get(name) or "").strip()
    return int(value) if value.isdigit() else 0


def before_statement(sql: str) -> None:
    """Called before a statement is sent; stops the process before the configured write."""
    stop_before = _point(STOP_BEFORE_ENV)
    start = (os.environ.get(STOP_BEFORE_ENV) or "").lstrip()  # a trailing space is meant
    held = start[len(HAS_PREFIX) :].lower() if start.startswith(HAS_PREFIX) else ""
    start = start[len(SQL_PREFIX) :].lower() if start.startswith(SQL_PREFIX) else ""
    if not (stop_before or start or held) or not changes_something(sql) or _timed(sql):
        return
    text = words(inner(sql)) if start or held else ""  # an ALTER behind its guard: its text
    with _COUNTER.lock:
        if start or held:
            at = text.startswith(start) if start else held in text
        else:
            at = _COUNTER.sent + 1 == stop_before
        due = at and not _COUNTER.stopped
        _COUNTER.stopped = _COUNTER.stopped or due
    if due:
        # to this thread (tgkill), not the process: a stop sent to the process is taken by its
        # main thread, and this one ran on until that thread stopped the group, far enough to
        # send the statement (seen over Thrift: the load ran while the process was stopped)
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)


def after_statement(sql: str) -> None:
    """Called once a statement has returned; kills the process at the configured write."""
    kill_after = os.environ.get(KILL_AFTER_ENV)
    log = os.environ.get(WRITES_LOG_ENV)
    if not (kill_after or log or _point(STOP_BEFORE_ENV)) or not changes_something(sql):
        return
    if _timed(sql):
        return
    with _COUNTER.lock:
        _COUNTER.sent += 1
        n = _COUNTER.sent
        if log:
            with open(log, "a", encoding="utf-8") as out:
                out.write(f"{n}\t{' '.join(sql.split())}\n")
        if kill_after and kill_after.strip().isdigit() and n == int(kill_after):
            os.kill(os.getpid(), signal.SIGKILL)
