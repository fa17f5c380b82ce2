"""The thrift (and http) connection: dbt-spark's PyHive wrapper, plus typed schemas read `AS
JSON`, one thrift call at a time, and a session left for a statement that may still run there."""

from __future__ import annotations

import json
import threading
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.connections import PyhiveConnectionWrapper
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.connection.closes import (
    CLOSES,
    BackgroundCloses,
    SessionsNotClosed,
)
from dbt.adapters.spark_contracts.connection.errors import (
    SESSION_LEFT,
    CancelMark,
    VariantResultOverThriftError,
    spark_error_message,
    to_dbt_error,
    transport_error_classes,
)
from dbt.adapters.spark_contracts.connection.schema_io import (
    describe_json_to_json,
    describe_rows_to_json,
)
from dbt.adapters.spark_contracts.connection.session_sql import quoted, set_sql
from dbt.adapters.spark_contracts.connection.spark_handle import from_json
from dbt.adapters.spark_contracts.core.schema.types import holds_variant

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
    # a new PyHive connection opened like this one's first (`leave_session`), or None
    renew: Optional[Callable[[], Any]] = None
    _renewing = False  # the current session is left: the next statement opens a new one
    closes: BackgroundCloses = CLOSES  # where its close runs (a test gives one of its own)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.left: List[Any] = []  # PyHive connections left for a statement that may still run
        self._settings: Dict[str, str] = {}  # what `set_conf` set in the current session

    def cursor(self) -> ContractsPyhiveConnectionWrapper:
        if self._renewing:  # until it opens, no statement runs anywhere (never in the old)
            self._open_new()
        return super().cursor()  # type: ignore[return-value]

    def leave_session(self, carried: Sequence[str] = ()) -> bool:
        """Later statements run in a new session of the server's, on a connection of its own
        (opened as the first was: the profile's settings, and the settings `carried` that
        `set_conf` set here set again), the old one left untouched for a statement that may
        still read its settings: the Thrift server says cancelled as soon as it is asked, and
        the statement can still commit after. The old session is closed with the connection.
        False where no new one can be made. Where opening it (or setting those settings in it)
        fails, it raises, and each later statement tries again first."""
        if self.renew is None:
            return False
        if not self._renewing:
            keep = {k: self._settings[k] for k in carried if k in self._settings}
            self.left.append(self.handle)
            self._renewing, self._cursor, self._schema_view = True, None, None
            self._settings = keep  # set in the new session once it opens
        self._open_new()
        logger.debug(SESSION_LEFT)
        return True

    def _open_new(self) -> None:
        """A new connection, with the settings carried set in it, made the current one; where
        anything fails on the way, it is closed and the wrapper stays renewing."""
        assert self.renew is not None
        fresh = self.renew()
        try:
            for key, value in self._settings.items():
                cursor = fresh.cursor()
                try:
                    cursor.execute(set_sql(key, value))
                finally:
                    cursor.close()
        except BaseException:
            _close_quietly(fresh)  # its own error is the one raised
            raise
        self.handle, self._renewing = fresh, False

    def cancel(self) -> None:
        """dbt's cancel, from the main thread while this connection's thread runs: the cursor
        read once (the thread may replace it meanwhile); none while the session is renewed
        (its statements then are the settings carried, not the node's)."""
        cursor = self._cursor
        if cursor is None or self._renewing:
            return
        try:
            cursor.cancel()
        except OSError as exc:
            logger.debug(f"Exception while cancelling query: {exc}")

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
        if value is None:
            self._settings.pop(key, None)
        else:
            self._settings[key] = value

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
        model's error (ConnectionLostError) is the one reported, not the failed goodbye. The
        sessions are closed off the node's path (`closes`): the server's close of a session
        that read a Delta table through a temporary view took a median 99 ms (p90 282 ms)
        under P1-thrift's four threads, against 12 ms for dbt-spark's sessions
        (docs/benchmarks.md, 2026-12-04)."""
        left, self.left = list(self.left), []
        current = not self._renewing  # else its connection is among those left
        self.closes.start(lambda: self._close_sessions(current, left))

    def _close_sessions(self, current: bool, left: Sequence[Any]) -> None:
        """The cursor and session of this connection (`current`) and the sessions `left`, each
        asked to close whatever the others answered; a server gone is nothing to close, any
        other failure raises `SessionsNotClosed` at the end (`BackgroundCloses` logs it)."""
        parts: List[Callable[[], Any]] = []
        if current:
            cursor, self._cursor = self._cursor, None
            if cursor is not None:
                parts.append(cursor.close)
            parts.append(self.handle.close)
        parts += [connection.close for connection in left]
        failures: List[BaseException] = []
        for part in parts:
            try:
                part()
            except (OSError, *transport_error_classes()) as exc:
                logger.debug(f"Exception while closing the connection: {exc}")
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise SessionsNotClosed(failures)

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


def _close_quietly(connection: Any) -> None:
    """A PyHive connection left, or not opened whole, closed; a server gone: nothing to close."""
    try:
        connection.close()
    except Exception as exc:
        logger.debug(f"Exception while closing a session left: {exc}")
