"""Connection manager: dbt-spark's for thrift/http; the embedded session and Spark Connect here."""

from __future__ import annotations

import copy
import json
import threading
import uuid
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from dbt.adapters.contracts.connection import AdapterResponse, Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions import FailedToConnectError
from dbt.adapters.spark.connections import (
    PyhiveConnectionWrapper,
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
    VariantResultOverThriftError,
    is_connection_error,
    is_database_error,
    spark_error_message,
    to_dbt_error,
    transport_error_classes,
)
from dbt.adapters.spark_contracts.connection.pyhive_open import without_use
from dbt.adapters.spark_contracts.connection.remote import (
    connect_failure,
    endpoint_of,
    new_connect_session,
)
from dbt.adapters.spark_contracts.connection.schema_io import (
    describe_json_to_json,
    describe_rows_to_json,
)
from dbt.adapters.spark_contracts.connection.session_sql import (
    open_session_settings,
    quoted,
    set_sql,
)
from dbt.adapters.spark_contracts.connection.spark_handle import from_json
from dbt.adapters.spark_contracts.core.schema.types import holds_variant
from dbt.adapters.spark_contracts.core.settings.deadline import query_timeout_seconds

logger = AdapterLogger("SparkContracts")


class SerializedThriftClient:
    """PyHive's thrift client of one connection, one call at a time. dbt's cancel (Ctrl-C)
    sends CancelOperation from the main thread on the socket the running statement's thread
    polls on; two calls interleaved on one socket would read each other's answers."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)

        return call


def _metadata_refused(exc: BaseException) -> bool:
    """PyHive's error for a refused GetResultSetMetadata: the statement ran, the server could
    not describe its result (told by the response's type, not its text)."""
    from pyhive.exc import OperationalError
    from TCLIService.ttypes import TGetResultSetMetadataResp

    response = exc.args[0] if isinstance(exc, OperationalError) and exc.args else None
    return isinstance(response, TGetResultSetMetadataResp)


class ContractsPyhiveConnectionWrapper(PyhiveConnectionWrapper, CancelMark):
    """dbt-spark's thrift/http wrapper, plus typed schemas read `AS JSON`."""

    _schema_view: Optional[str] = None  # this connection's temporary view for schema reads
    _last_sql: Optional[str] = None  # the statement whose result the cursor holds

    def execute(self, sql: str, bindings: Optional[List[Any]] = None) -> None:
        self._last_sql = sql
        super().execute(sql, bindings)

    @property
    def description(self) -> Any:
        with self._result_described():
            return super().description

    def fetchall(self) -> List[Any]:
        with self._result_described():
            return super().fetchall()

    @contextmanager
    def _result_described(self) -> Iterator[None]:
        """The server could not describe the result (GetResultSetMetadata failed): when the
        result's analysed schema holds a VARIANT, that is why (the Spark Thrift server has no
        thrift type for it), raised as `VariantResultOverThriftError` naming the columns;
        otherwise the server's own error."""
        try:
            yield
        except Exception as exc:
            if self._last_sql is None or not _metadata_refused(exc):
                raise
            columns = self._variant_columns(self._last_sql)
            if columns:
                raise VariantResultOverThriftError(columns, spark_error_message(exc)) from exc
            raise

    def _variant_columns(self, sql: str) -> Tuple[str, ...]:
        """The top-level columns of `sql`'s result that hold a VARIANT, by analysing it (not
        running it); () when the statement is not a query the server can analyse."""
        try:
            schema = from_json(self.schema_json(sql))
        except Exception as exc:  # not a query (SHOW, DESCRIBE, SET ...): nothing to name
            logger.debug(f"thrift: result of {sql[:80]!r} not analysed: {exc}")
            return ()
        return tuple(f.name for f in schema.fields if holds_variant(f.type))

    def apply_session_parameters(self, parameters: Dict[str, str]) -> None:
        """SET each of `parameters` in this session.

        dbt-spark hands them to the thrift OpenSession request as plain keys, which the Spark
        Thrift Server ignores (it applies only `set:hiveconf:<key>` entries), so for `thrift`
        `server_side_parameters` (and dbt-spark's own `spark.sql.ansi.enabled=false`) had no
        effect. The adapter's own settings go in OpenSession as `set:hiveconf:` entries
        (`open_session_settings`); these are the rest. Static settings belong to the server;
        those are logged and skipped.
        """
        for key, value in parameters.items():
            self.cursor()
            try:
                self.execute(set_sql(key, str(value)))
            except Exception as exc:
                logger.debug(f"thrift: could not set {key}: {exc}")
            finally:
                self._close_cursor()

    def set_conf(self, key: str, value: Optional[str]) -> None:
        """Set (None: reset) a SQL conf in this thrift session only."""
        saved = self._cursor
        try:
            self._fetch(set_sql(key, value), fetch=False)
        finally:
            self._cursor = saved

    def get_conf(self, key: str) -> Optional[str]:
        saved = self._cursor
        try:
            rows = self._fetch(f"set {quoted(key)}")
        finally:
            self._cursor = saved
        return str(rows[0][1]) if rows and rows[0][1] != "<undefined>" else None

    def _close_cursor(self) -> None:
        if self._cursor is not None:
            try:
                self._cursor.close()
            except (OSError, *transport_error_classes()) as exc:
                logger.debug(f"Exception while closing cursor: {exc}")
            self._cursor = None

    def close(self) -> None:
        """dbt closes the connection after a model, also after the server went away: that
        model's error (ConnectionLostError) is the one reported, not the failed goodbye."""
        try:
            super().close()
        except transport_error_classes() as exc:
            logger.debug(f"Exception while closing the connection: {exc}")

    def schema_json(self, sql: str) -> Dict[str, Any]:
        """The output schema of `sql` as Spark's JSON schema; the server analyses, not runs, it.

        Two statements: the query as this connection's temporary view, described `AS JSON`
        (Spark 4: nested types and nullability). Spark 4.1 has no `DESCRIBE QUERY ... AS JSON`
        (it reads `AS json` as a table alias), and `DESCRIBE QUERY`'s type strings carry no
        nullability; that is only the way out where a view cannot hold the query (duplicate
        output names), and then every column reads as nullable.
        """
        sql = sql.strip()
        while sql.endswith(";"):
            sql = sql[:-1].rstrip()
        saved = self._cursor  # keep the caller's cursor and its results
        try:
            try:
                return self._schema_by_view(sql)
            except Exception as exc:
                if not isinstance(to_dbt_error(exc), DbtDatabaseError):
                    raise  # a lost connection, not a refused view: no second statement
                logger.debug(f"schema_json: no JSON description ({exc}); using DESCRIBE QUERY")
            return describe_rows_to_json(self._fetch(f"describe query {sql}"))
        finally:
            self._cursor = saved

    def relation_schema(self, relation: str, describable: bool) -> Dict[str, Any]:
        """The schema of a table or view as Spark's JSON schema.

        `describable`: a temporary view or a v1 table (a view, a file-source table), which
        `DESCRIBE TABLE EXTENDED ... AS JSON` answers in one statement. Spark refuses that for
        v2 tables (Delta's and Iceberg's: NOT_SUPPORTED_COMMAND_FOR_V2_TABLE), so those are
        read through this connection's temporary view: two statements.
        """
        saved = self._cursor
        try:
            if describable:
                try:
                    return self._described(relation)
                except Exception as exc:
                    # the server refused it (a v2 table, not what the caller thought); a lost
                    # connection or a cancel is not retried with another statement
                    if not isinstance(to_dbt_error(exc), DbtDatabaseError):
                        raise
                    logger.debug(f"relation_schema: {relation} not described AS JSON ({exc})")
            return self._schema_by_view(f"select * from {relation}")
        finally:
            self._cursor = saved

    def relation_schemas(self, relations: Sequence[str]) -> List[Dict[str, Any]]:
        """The schemas of `relations` (tables or views) as Spark's JSON schemas, in one read:
        this connection's temporary view holding one struct column per relation, its whole
        row (`struct(r.*)`, which keeps each column's nullability and comment) from their cross
        join, described `AS JSON`. Two statements however many relations, and no row is read:
        a view is analysed, never run. Where Spark refuses that view, one read each."""
        if len(relations) < 2:
            return [self.relation_schema(r, False) for r in relations]
        columns = ", ".join(f"struct(r{i}.*) as r{i}" for i in range(len(relations)))
        sources = ", ".join(f"{relation} r{i}" for i, relation in enumerate(relations))
        saved = self._cursor
        try:
            try:
                described = self._schema_by_view(f"select {columns} from {sources}")
            except Exception as exc:
                if not isinstance(to_dbt_error(exc), DbtDatabaseError):
                    raise  # a lost connection, not a refused view: no other statement
                logger.debug(f"relation_schemas: not read in one view ({exc}); one each")
                return [self.relation_schema(r, False) for r in relations]
        finally:
            self._cursor = saved
        return [dict(field["type"]) for field in described["fields"]]

    def _schema_by_view(self, sql: str) -> Dict[str, Any]:
        """`sql` as this connection's own temporary view (replaced on every read, never dropped:
        it goes with the thrift session, which dbt closes after each node), described."""
        if self._schema_view is None:
            self._schema_view = f"dbt_spark_contracts_schema_{uuid.uuid4().hex}"
        self._fetch(f"create or replace temporary view {self._schema_view} as\n{sql}\n", False)
        return self._described(self._schema_view)

    def _described(self, relation: str) -> Dict[str, Any]:
        rows = self._fetch(f"describe table extended {relation} as json")
        return describe_json_to_json(json.loads(rows[0][0])["columns"])

    def _fetch(self, sql: str, fetch: bool = True) -> List[Any]:
        """`sql` on a cursor of its own, closed after; the caller's statement stays the last."""
        last = self._last_sql
        self.cursor()
        try:
            self.execute(sql)
            return list(self._cursor.fetchall()) if fetch and self._cursor else []
        finally:
            self._close_cursor()
            self._last_sql = last


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
            # thrift: the adapter's own session settings travel in the OpenSession request
            # (no statement); the profile's other settings are SET once the session is open
            opening, after = dict(creds.server_side_parameters), {}
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
            # thrift and http (odbc is refused when the profile loads): dbt-spark's PyHive wrapper
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
            return connection
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
