"""`query_timeout` on the embedded session: a statement's deadline (pure: no Spark).

The cursor tags the Spark jobs of one statement and hands `StatementDeadline` the call that
cancels jobs with that tag; once the deadline passed, a statement that fails failed because of
it (`timeout_message`)."""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from dbt.adapters.spark_contracts.core.settings.config import ConfigError

# Spark cancels only the jobs running when asked: a statement's next job (or its first, after a
# long analysis) may start after the first cancel, so the cancel is repeated this often.
CANCEL_REPEAT_S = 0.25


def query_timeout_seconds(value: Any) -> Optional[float]:
    """Seconds of the profile's `query_timeout` (None: unset, no deadline)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"profile key query_timeout: {value!r}; allowed: seconds, more than 0")
    return float(value)


def timeout_message(seconds: float, method: str) -> str:
    shown = int(seconds) if float(seconds).is_integer() else seconds
    # dbt-spark's words first ("Query exceeded timeout of N seconds"): what tools match on
    return (
        f"Query exceeded timeout of {shown} seconds (query_timeout, method: {method}); "
        "its Spark jobs were cancelled"
    )


class StatementDeadline:
    """While entered: `cancel()` once `seconds` have passed, then every `repeat` seconds until
    the statement ends (exit). `fired`: the deadline passed while the statement ran."""

    def __init__(
        self, seconds: float, cancel: Callable[[], Any], repeat: float = CANCEL_REPEAT_S
    ) -> None:
        self.seconds = max(0.0, seconds)
        self.repeat = repeat
        self.fired = False
        self.cancel_errors: list[BaseException] = []
        self._cancel = cancel
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="dbt-query-timeout", daemon=True)

    def __enter__(self) -> StatementDeadline:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        if self._done.wait(self.seconds):
            return
        self.fired = True
        while True:
            try:
                self._cancel()
            except Exception as exc:  # reported by the cursor; the statement goes on
                self.cancel_errors.append(exc)
            if self._done.wait(self.repeat):
                return
