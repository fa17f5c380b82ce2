"""Connection manager: dbt-spark's for thrift/http/odbc; the embedded session and Spark Connect here."""

from __future__ import annotations

import json
import uuid
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional

from dbt.adapters.contracts.connection import AdapterResponse, Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions import FailedToConnectError
from dbt.adapters.spark.connections import (
    PyhiveConnectionWrapper,
    SparkConnectionManager,
)
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts import session as embedded
from dbt.adapters.spark_contracts.credentials import (
    ContractsConnectionMethod,
    SparkContractsCredentials,
)
from dbt.adapters.spark_contracts.cursor import (
    SparkSessionConnectionWrapper,
    SparkSessionHandle,
)
from dbt.adapters.spark_contracts.errors import to_dbt_error
from dbt.adapters.spark_contracts.schema_io import describe_json_to_json, describe_rows_to_json

logger = AdapterLogger("SparkContracts")


def _new_connect_session(creds: SparkContractsCredentials, url: str) -> Any:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    # `create`, not `getOrCreate`: the latter hands back any default session of the process,
    # whatever its URL.
    session = SparkSession.builder.remote(url).create()
    client = session.client
    policies = client.get_retry_policies()
    # Talk to the server once now, so a wrong URL or a stopped server fails on open; with the
    # client's own retry policy that takes more than 10 minutes, so probe with a short one.
    client.set_retry_policies(
        [
            DefaultPolicy(
                max_retries=max(3, creds.connect_retries),
                max_backoff=max(1, creds.connect_timeout) * 1000,
            )
        ]
    )
    try:
        version = session.version
    except Exception as exc:
        session.stop()
        cause = exc.__cause__ or exc.__context__
        detail = f"{exc}" + (f" ({type(cause).__name__}: {cause})" if cause else "")
        raise FailedToConnectError(
            f"Could not reach the Spark Connect server at {url.split('/;')[0]}: {detail}. "
            "Is it running (`python -m dbt.adapters.spark_contracts.servers connect`)?"
        ) from exc
    finally:
        client.set_retry_policies(policies)
    logger.debug(f"Spark Connect: {url.split('/;')[0]} runs Spark {version}")
    for key, value in creds.server_side_parameters.items():
        try:
            session.conf.set(key, value)
        except Exception as exc:  # static confs belong to the server
            logger.debug(f"Spark Connect: could not set {key}: {exc}")
    return session


def _quoted(text: str) -> str:
    return "`" + text.replace("`", "``") + "`"


def _set_sql(key: str, value: Optional[str]) -> str:
    """SET (None: RESET) of one SQL conf. Key and value are quoted: Spark's SET parses neither
    `snapshot-property.dbt-spark-contracts` nor `a:b` bare."""
    if value is None:
        return f"reset {_quoted(key)}"
    return f"set {_quoted(key)}={_quoted(value)}"


class ContractsPyhiveConnectionWrapper(PyhiveConnectionWrapper):
    """dbt-spark's thrift/http wrapper, plus typed schemas read `AS JSON`."""

    _schema_view: Optional[str] = None  # this connection's temporary view for schema reads

    def apply_session_parameters(self, parameters: Dict[str, str]) -> None:
        """SET each of `parameters` in this session.

        dbt-spark hands them to the thrift OpenSession request as plain keys, which the Spark
        Thrift Server ignores (it applies only `set:hiveconf:<key>` entries), so for `thrift`
        `server_side_parameters` (and dbt-spark's own `spark.sql.ansi.enabled=false`) had no
        effect. Static settings belong to the server; those are logged and skipped.
        """
        for key, value in parameters.items():
            self.cursor()
            try:
                self.execute(_set_sql(key, str(value)))
            except Exception as exc:
                logger.debug(f"thrift: could not set {key}: {exc}")
            finally:
                self._close_cursor()

    def set_conf(self, key: str, value: Optional[str]) -> None:
        """Set (None: reset) a SQL conf in this thrift session only."""
        saved = self._cursor
        try:
            self._fetch(_set_sql(key, value), fetch=False)
        finally:
            self._cursor = saved

    def get_conf(self, key: str) -> Optional[str]:
        saved = self._cursor
        try:
            rows = self._fetch(f"set {_quoted(key)}")
        finally:
            self._cursor = saved
        return str(rows[0][1]) if rows and rows[0][1] != "<undefined>" else None

    def _close_cursor(self) -> None:
        if self._cursor is not None:
            try:
                self._cursor.close()
            except OSError as exc:
                logger.debug(f"Exception while closing cursor: {exc}")
            self._cursor = None

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
            except DbtRuntimeError as exc:
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
                except DbtRuntimeError as exc:  # not what the caller thought: a v2 table
                    logger.debug(f"relation_schema: {relation} not described AS JSON ({exc})")
            return self._schema_by_view(f"select * from {relation}")
        finally:
            self._cursor = saved

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
        self.cursor()
        try:
            self.execute(sql)
            return list(self._cursor.fetchall()) if fetch and self._cursor else []
        finally:
            self._close_cursor()


class SparkContractsConnectionManager(SparkConnectionManager):
    TYPE = "spark_contracts"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        if connection.state == ConnectionState.OPEN:
            return connection
        creds: SparkContractsCredentials = connection.credentials  # type: ignore[assignment]
        # One Spark session per dbt connection, i.e. per thread: SQL conf and temporary views
        # are per session, so models running at once never see each other's settings.
        if creds.method == ContractsConnectionMethod.SESSION:
            config = creds.embedded_config()
            factory = lambda: embedded.thread_session(config)  # noqa: E731
        elif creds.method == ContractsConnectionMethod.CONNECT:
            factory = lambda: _new_connect_session(creds, creds.connect_url)  # noqa: E731
        else:
            connection = super().open(connection)
            handle = connection.handle
            if type(handle) is PyhiveConnectionWrapper:  # thrift, http; not odbc's subclass
                handle = ContractsPyhiveConnectionWrapper(
                    handle.handle,
                    poll_interval=handle.poll_interval,
                    query_timeout=handle.query_timeout,
                    query_retries=handle.query_retries,
                )
                connection.handle = handle
                if creds.method == ContractsConnectionMethod.THRIFT:
                    handle.apply_session_parameters(creds.server_side_parameters)
            return connection
        try:
            session = factory()  # fail here, on open, with the real reason (Java, jars, server)
        except (embedded.EmbeddedSparkError, FileNotFoundError) as exc:
            raise FailedToConnectError(str(exc)) from exc
        except Exception as exc:
            if isinstance(exc, DbtRuntimeError):
                raise
            raise FailedToConnectError(f"Could not start Spark ({creds.method}): {exc}") from exc
        handle = SparkSessionHandle(lambda: session, dict(creds.server_side_parameters))
        connection.handle = SparkSessionConnectionWrapper(handle)
        connection.state = ConnectionState.OPEN
        return connection

    @contextmanager
    def exception_handler(self, sql: str) -> Iterator[None]:
        """dbt-spark turns every failure into a `DbtRuntimeError` (re-wrapping even the
        `DbtDatabaseError` its thrift wrapper raises); here what Spark rejected is a
        `DbtDatabaseError`, for every method, and dbt's own errors keep their type."""
        try:
            yield
        except Exception as exc:
            error = to_dbt_error(exc)
            logger.debug(f"Error while running:\n{sql}\n{type(error).__name__}: {error.msg}")
            if error is exc:
                raise
            raise error from exc

    @classmethod
    def get_response(cls, cursor: Any) -> AdapterResponse:
        return AdapterResponse(_message="OK")
