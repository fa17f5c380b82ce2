"""Where a connection goes, in words a user can act on, and the Spark Connect client's retry
policy from the profile (pure: no Spark, no gRPC)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

from dbt.adapters.spark_contracts.core.settings.config import ConfigError

# `connect` retries a lost connection this often unless the profile sets `connect_retries`
# (dbt-spark's default, 0, would give up on the first dropped stream).
CONNECT_DEFAULT_RETRIES = 3
# The Spark Connect client's first wait before a retry; each next wait is 4 times longer, at most
# `connect_timeout` seconds.
CONNECT_INITIAL_BACKOFF_MS = 50
CONNECT_BACKOFF_MULTIPLIER = 4.0


@dataclass(frozen=True)
class Endpoint:
    """A connection method and the server address it talks to (never a token)."""

    method: str
    address: str

    @property
    def label(self) -> str:
        return f"spark_contracts method {self.method}, {self.address}"


def connect_address(url: str) -> str:
    """`sc://host:port` of a Spark Connect URL, without its `/;key=value` parameters (a token
    among them)."""
    head = url.split("/;", 1)[0].rstrip("/")
    parts = urlsplit(head)
    if parts.scheme != "sc" or not parts.hostname:
        return head.split("@")[-1]
    port = parts.port if parts.port is not None else 15002
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"sc://{host}:{port}"


def host_address(host: Optional[str], port: Optional[int]) -> str:
    """`host:port` of a thrift/http/odbc target."""
    return f"{host or 'localhost'}:{port}" if port is not None else str(host or "localhost")


@dataclass(frozen=True)
class RetrySettings:
    """The Spark Connect client's retry policy (pyspark's `DefaultPolicy` arguments): a lost
    connection, an unavailable server or a broken result stream is retried `max_retries` times,
    waiting `initial_backoff_ms`, then 4 times longer each time, at most `max_backoff_ms`."""

    max_retries: int
    initial_backoff_ms: int
    max_backoff_ms: int
    backoff_multiplier: float = CONNECT_BACKOFF_MULTIPLIER

    def waits_ms(self) -> list[int]:
        """The waits before each retry, without pyspark's random jitter."""
        waits, wait = [], float(self.initial_backoff_ms)
        for _ in range(self.max_retries):
            waits.append(int(wait))
            wait = min(float(self.max_backoff_ms), wait * self.backoff_multiplier)
        return waits


def connect_retry_settings(connect_retries: int, connect_timeout: int) -> RetrySettings:
    """The retry policy for `connect_retries` / `connect_timeout` (seconds) of the profile."""
    if connect_retries < 0:
        raise ConfigError(f"profile key connect_retries: {connect_retries!r}; allowed: 0 or more")
    if connect_timeout <= 0:
        raise ConfigError(
            f"profile key connect_timeout: {connect_timeout!r}; allowed: seconds, more than 0"
        )
    max_backoff = connect_timeout * 1000
    return RetrySettings(
        max_retries=connect_retries,
        initial_backoff_ms=min(CONNECT_INITIAL_BACKOFF_MS, max_backoff),
        max_backoff_ms=max_backoff,
    )
