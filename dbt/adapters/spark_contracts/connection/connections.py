"""Connection manager: dbt-spark's for thrift/http; the embedded session and Spark Connect here."""

from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Tuple

from dbt.adapters.contracts.connection import AdapterResponse, Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions import FailedToConnectError
from dbt.adapters.spark.connections import (
    SparkConnectionManager,
)
from dbt_common.exceptions import DbtDatabaseError, DbtRuntimeError

from dbt.adapters.spark_contracts.connection import failpoint
from dbt.adapters.spark_contracts.connection import session as embedded
from dbt.adapters.spark_contracts.connection.credentials import (
    ContractsConnectionMethod,
    SparkContractsCredentials,
)
from dbt.adapters.spark_contracts.connection.cursor import (
    SparkSessionConnectionWrapper,
    SparkSessionHandle,
)
from dbt.adapters.spark_contracts.connection.errors import (
    CancelMark,
    ConnectionLostError,
    ServerRefusedError,
    StatementCancelled,
    is_connection_error,
    is_database_error,
    to_dbt_error,
)
from dbt.adapters.spark_contracts.connection.pyhive_open import without_use
from dbt.adapters.spark_contracts.connection.remote import (
    connect_failure,
    endpoint_of,
    new_connect_session,
)
from dbt.adapters.spark_contracts.connection.session_sql import (
    open_session_settings,
)
from dbt.adapters.spark_contracts.connection.thrift import (
    ContractsPyhiveConnectionWrapper,
    SerializedThriftClient,
)
from dbt.adapters.spark_contracts.core.settings.deadline import query_timeout_seconds

logger = AdapterLogger("SparkContracts")


class SparkContractsConnectionManager(SparkConnectionManager):
    TYPE = "spark_contracts"

    def add_query(self, sql: str, *args: Any, **kwargs: Any) -> Tuple[Connection, Any]:
        """dbt's, between the fault-injection points (connection/failpoint.py; off unless
        set)."""
        failpoint.before_statement(sql)
        connection, cursor = super().add_query(sql, *args, **kwargs)
        failpoint.after_statement(sql)
        return connection, cursor

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        if connection.state == ConnectionState.OPEN:
            return connection
        creds: SparkContractsCredentials = connection.credentials  # type: ignore[assignment]
        # One Spark session per dbt connection, i.e. per thread: SQL conf and temporary views
        # are per session, so models running at once never see each other's settings.
        query_timeout = None
        if creds.method == ContractsConnectionMethod.SESSION:
            config = creds.embedded_config()
            factory = lambda: embedded.thread_session(config)  # noqa: E731
            query_timeout = query_timeout_seconds(creds.query_timeout)
        elif creds.method == ContractsConnectionMethod.CONNECT:
            factory = lambda: new_connect_session(creds)  # noqa: E731
        else:
            return cls._open_server(connection, creds)
        try:
            session = factory()  # fail here, on open, with the real reason (Java, jars, server)
        except (embedded.EmbeddedSparkError, FileNotFoundError) as exc:
            raise FailedToConnectError(str(exc)) from exc
        except Exception as exc:
            if isinstance(exc, DbtRuntimeError):
                raise
            if creds.method == ContractsConnectionMethod.CONNECT:
                raise connect_failure(endpoint_of(creds), exc) from exc
            raise FailedToConnectError(f"Could not start Spark ({creds.method}): {exc}") from exc
        renew = factory if creds.method == ContractsConnectionMethod.CONNECT else None
        handle = SparkSessionHandle(lambda: session, query_timeout, renew)
        connection.handle = SparkSessionConnectionWrapper(handle)
        connection.state = ConnectionState.OPEN
        return connection

    @classmethod
    def _open_server(cls, connection: Connection, creds: SparkContractsCredentials) -> Connection:
        """thrift and http (odbc is refused when the profile loads): dbt-spark's PyHive
        connection in this adapter's wrapper, which can open another like it (`renew`)."""
        # thrift: the adapter's own session settings travel in the OpenSession request
        # (no statement); the profile's other settings are SET once the session is open
        opening, after = dict(creds.server_side_parameters), dict[str, str]()
        if creds.method == ContractsConnectionMethod.THRIFT:
            opening, after = open_session_settings(creds.server_side_parameters)
        connection.credentials = copy.copy(creds)
        connection.credentials.server_side_parameters = opening
        try:
            # thrift opens in `use:database`, so PyHive's USE is not sent (http keeps it)
            with without_use(creds.method == ContractsConnectionMethod.THRIFT):
                connection = super().open(connection)
        except Exception as exc:
            raise connect_failure(endpoint_of(creds), exc) from exc
        finally:
            connection.credentials = creds
        handle = ContractsPyhiveConnectionWrapper(
            connection.handle.handle,
            poll_interval=connection.handle.poll_interval,
            query_timeout=connection.handle.query_timeout,
            query_retries=connection.handle.query_retries,
        )
        connection.handle = handle
        if hasattr(handle.handle, "_client"):  # a PyHive connection
            handle.handle._client = SerializedThriftClient(handle.handle._client)
        if after:
            handle.apply_session_parameters(after)

        def renew() -> Any:
            fresh = copy.copy(connection)
            fresh.state = ConnectionState.INIT
            return cls._open_server(fresh, creds).handle.handle

        handle.renew = renew
        return connection

    @contextmanager
    def exception_handler(self, sql: str) -> Iterator[None]:
        """dbt-spark turns every failure into a `DbtRuntimeError` (re-wrapping even the
        `DbtDatabaseError` its thrift wrapper raises); here what Spark rejected is a
        `DbtDatabaseError`, for every method, and dbt's own errors keep their type."""
        connection = self.get_if_exists()
        # its handle as it is (reading `handle` would open a connection not opened yet)
        handle = getattr(connection, "_handle", None)
        if isinstance(handle, CancelMark):
            handle.cancel_asked = False  # a cancel from here on is this statement's
        try:
            yield
        except Exception as exc:
            error = to_dbt_error(exc)
            # read again: a connection's first statement opens it (its handle was lazy above)
            handle = getattr(connection, "_handle", None)
            if isinstance(error, DbtDatabaseError) and isinstance(handle, CancelMark):
                if handle.cancel_asked:  # the server's "cancelled" is no sign it stopped
                    error = StatementCancelled(error.msg)
            if isinstance(error, (ConnectionLostError, ServerRefusedError)):
                if connection is not None:
                    error = error.at(endpoint_of(connection.credentials).label)  # type: ignore[arg-type]
            logger.debug(f"Error while running:\n{sql}\n{type(error).__name__}: {error.msg}")
            if error is exc:
                raise
            raise error from exc

    @classmethod
    def get_result_from_cursor(cls, cursor: Any, limit: Optional[int]) -> Any:
        """dbt reads a result's rows outside its exception handler: a database or connection
        error reading them becomes dbt's typed error here too (dbt's own errors pass as they are:
        over thrift, a result holding a VARIANT)."""
        try:
            return super().get_result_from_cursor(cursor, limit)
        except Exception as exc:
            if not (is_database_error(exc) or is_connection_error(exc)):
                raise
            raise to_dbt_error(exc) from exc

    def cancel(self, connection: Connection) -> None:
        """Interrupt what `connection` runs on the server (dbt's cancel, Ctrl-C): a session's
        operations by `interruptAll` of that connection's own session; thrift's statement by
        dbt-spark's cursor cancel."""
        label = endpoint_of(connection.credentials).label  # type: ignore[arg-type]
        logger.debug(f"Cancelling {connection.name} ({label})")
        server = connection.credentials.method != ContractsConnectionMethod.SESSION  # type: ignore[attr-defined]
        if server and isinstance(connection.handle, CancelMark):  # the session's call returns
            connection.handle.cancel_asked = True
        try:
            connection.handle.cancel()
        except Exception as exc:  # dbt cancels the other connections after this one
            logger.debug(
                f"Cancelling {connection.name} ({label}) failed: {type(exc).__name__}: {exc}"
            )

    @classmethod
    def get_response(cls, cursor: Any) -> AdapterResponse:
        return AdapterResponse(_message="OK")
