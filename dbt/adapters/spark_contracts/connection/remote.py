"""Connections to a Spark server: a Spark Connect session with the profile's retry policy, the
failure to connect as one dbt error naming the method and the server, and cancelling what a
connection runs (Ctrl-C, dbt's cancel)."""

from __future__ import annotations

import warnings
from typing import Any

from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions import FailedToConnectError

from dbt.adapters.spark_contracts.connection.credentials import (
    ContractsConnectionMethod,
    SparkContractsCredentials,
)
from dbt.adapters.spark_contracts.connection.errors import connection_error_detail
from dbt.adapters.spark_contracts.core.settings.endpoint import (
    Endpoint,
    RetrySettings,
    connect_address,
    connect_retry_settings,
    host_address,
)

logger = AdapterLogger("SparkContracts")


def silence_retries_warning() -> None:
    """The Connect client warns (on stderr, with its file and line) before raising the error it
    gave up on; dbt reports that error itself. Only that warning of that one module is ignored,
    by a filter installed once at import: `warnings.catch_warnings` around each call is not
    thread-safe (dbt's threads share the process's filters)."""
    warnings.filterwarnings(
        "ignore",
        message=r"\[RETRIES_EXCEEDED\]",
        category=UserWarning,
        module=r"pyspark\.sql\.connect\.client\.retries",
    )


silence_retries_warning()


def endpoint_of(creds: SparkContractsCredentials) -> Endpoint:
    method = str(getattr(creds.method, "value", creds.method))
    if creds.method == ContractsConnectionMethod.CONNECT:
        return Endpoint(method, connect_address(creds.connect_url))
    if creds.method == ContractsConnectionMethod.SESSION:
        return Endpoint(method, f"embedded Spark ({creds.master})")
    return Endpoint(method, host_address(creds.host, creds.port))


def connect_failure(endpoint: Endpoint, exc: BaseException) -> FailedToConnectError:
    """One dbt error for a failed open: method, server and why (no stack trace). dbt-spark's own
    FailedToConnectError is unwrapped to the transport error it carries."""
    cause: BaseException = exc
    if isinstance(exc, FailedToConnectError) and exc.__cause__ is not None:
        cause = exc.__cause__
    return FailedToConnectError(
        f"{endpoint.label}: could not connect: {connection_error_detail(cause)}"
    )


def retry_settings(creds: SparkContractsCredentials) -> RetrySettings:
    return connect_retry_settings(creds.connect_retries, creds.connect_timeout)


def _policy(settings: RetrySettings) -> Any:
    from pyspark.sql.connect.client.retries import DefaultPolicy

    return DefaultPolicy(
        max_retries=settings.max_retries,
        initial_backoff=settings.initial_backoff_ms,
        max_backoff=settings.max_backoff_ms,
        backoff_multiplier=settings.backoff_multiplier,
    )


def new_connect_session(creds: SparkContractsCredentials) -> Any:
    """A Spark Connect session of its own (one per dbt connection), retrying a lost connection
    as the profile says (`connect_retries`, `connect_timeout`) for the whole run; it talks to
    the server once now, so a wrong URL, a stopped server or a refused token fail on open."""
    from pyspark.sql import SparkSession

    endpoint = endpoint_of(creds)
    # `create`, not `getOrCreate`: the latter hands back any default session of the process,
    # whatever its URL.
    session = SparkSession.builder.remote(creds.connect_url).create()
    session.client.set_retry_policies([_policy(retry_settings(creds))])
    try:
        version = session.version
    except Exception as exc:
        session.stop()
        raise connect_failure(endpoint, exc) from exc
    logger.debug(f"{endpoint.label}: Spark {version}")
    for key, value in creds.server_side_parameters.items():
        try:
            session.conf.set(key, value)
        except Exception as exc:  # static confs belong to the server
            logger.debug(f"Spark Connect: could not set {key}: {exc}")
    return session
