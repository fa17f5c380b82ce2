"""Thrift sessions closed off the node's path (connection/thrift.py's wrapper hands its close
here): the server's close of a session that read a Delta table through a temporary view took a
median 99 ms (p90 282 ms) under P1-thrift's four threads, against 12 ms for dbt-spark's sessions
(docs/benchmarks.md, 2026-12-04)."""

from __future__ import annotations

import atexit
import threading
import time
from typing import Callable, List, Optional, Sequence

from dbt.adapters.events.logging import AdapterLogger

logger = AdapterLogger("SparkContracts")
# the longest the end of a run waits for the Thrift sessions still closing (`BackgroundCloses`)
CLOSE_WAIT_SECONDS = 60.0
EXIT_WAIT_SECONDS = 30.0  # the same at exit, for closes started after that


class SessionsNotClosed(Exception):
    """A Thrift connection's close whose server answered with an error other than being gone
    (e.g. an unknown handle after a restart): every session was still asked to close."""

    def __init__(self, failures: Sequence[BaseException]) -> None:
        super().__init__("; ".join(f"{type(f).__name__}: {f}" for f in failures))
        self.failures = list(failures)


class BackgroundCloses:
    """Thrift sessions being closed on threads of their own, so a node does not wait for the
    server's close. `finish` waits for the closes started so far (the adapter's
    `cleanup_connections` and at exit, through `warn_unfinished`), each once: one still running then is
    reported and not waited for again, so a close that hangs (PyHive sets no socket timeout)
    holds up one run's end, not every later one in the process. Process-wide, as the threads
    are: a run's end also waits for the closes of an earlier invocation in the process still
    running, which is only longer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: List[threading.Thread] = []
        self._failed = 0

    def start(self, close: Callable[[], None]) -> None:
        thread = threading.Thread(
            target=self._run, args=(close,), name="dbt-spark-contracts close", daemon=True
        )
        with self._lock:  # started inside: a thread not yet started is not alive
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()

    def _run(self, close: Callable[[], None]) -> None:
        try:
            close()
        except Exception as exc:  # a thread's exception would reach stderr only
            with self._lock:
                self._failed += 1
            logger.warning(f"a Thrift session's close failed ({type(exc).__name__}): {exc}")

    def finish(self, timeout: Optional[float] = None) -> Optional[str]:
        """Wait up to `timeout` seconds in all (`CLOSE_WAIT_SECONDS`, read now, by default)
        for the closes started so far: what to warn of (closes still running, closes that
        failed since the last `finish`), or None."""
        timeout = CLOSE_WAIT_SECONDS if timeout is None else timeout
        deadline = time.monotonic() + timeout
        with self._lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        running = sum(1 for t in threads if t.is_alive())
        with self._lock:
            failed, self._failed = self._failed, 0
        told = []
        if running:
            told.append(
                f"{running} Thrift session(s) still closing after {timeout:.0f} s: the server "
                "ends them when it times them out"
            )
        if failed:
            told.append(f"{failed} Thrift connection close(s) failed (logged above)")
        return "; ".join(told) or None

    def warn_unfinished(self, timeout: Optional[float] = None) -> None:
        """`finish`, its answer logged as a warning: at the end of a command
        (`cleanup_connections`) and at exit, for the closes a command started after that or in
        a command that has none (`run-operation`, `show`, `debug`), before the interpreter ends
        its threads."""
        told = self.finish(timeout)
        if told:
            logger.warning(told)


CLOSES = BackgroundCloses()
atexit.register(CLOSES.warn_unfinished, EXIT_WAIT_SECONDS)
