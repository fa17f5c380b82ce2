"""Connection manager: dbt-spark's for thrift/http/odbc; the embedded session and Spark Connect here."""

from __future__ import annotations

from typing import Any, Dict

from dbt.adapters.contracts.connection import AdapterResponse, Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions import FailedToConnectError
from dbt.adapters.spark.connections import (
    PyhiveConnectionWrapper,
    SparkConnectionManager,
)
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts import session as embedded
from dbt.adapters.spark_contracts.schema_io import describe_rows_to_json
from dbt.adapters.spark_contracts.credentials import (
    ContractsConnectionMethod,
    SparkContractsCredentials,
)
from dbt.adapters.spark_contracts.cursor import (
    SparkSessionConnectionWrapper,
    SparkSessionHandle,
)

logger = AdapterLogger("SparkContracts")

_connect_sessions: Dict[str, Any] = {}


def _connect_session(creds: SparkContractsCredentials) -> Any:
    url = creds.connect_url
    if url not in _connect_sessions:
        from pyspark.sql import SparkSession

        session = SparkSession.builder.remote(url).getOrCreate()
        for key, value in creds.server_side_parameters.items():
            try:
                session.conf.set(key, value)
            except Exception as exc:  # static confs belong to the server
                logger.debug(f"Spark Connect: could not set {key}: {exc}")
        _connect_sessions[url] = session
    return _connect_sessions[url]


class ContractsPyhiveConnectionWrapper(PyhiveConnectionWrapper):
    """dbt-spark's thrift/http wrapper, plus `schema_json(sql)` through `DESCRIBE QUERY`."""

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
                self.execute(f"set {key}={value}")
            except Exception as exc:
                logger.debug(f"thrift: could not set {key}: {exc}")
            finally:
                self._close_cursor()

    def _close_cursor(self) -> None:
        if self._cursor is not None:
            try:
                self._cursor.close()
            except EnvironmentError as exc:
                logger.debug(f"Exception while closing cursor: {exc}")
            self._cursor = None

    def schema_json(self, sql: str) -> Dict[str, Any]:
        """The output schema of `sql` as Spark's JSON schema; the server analyses, not runs, it.

        DESCRIBE QUERY prints type strings only, so every column comes back nullable.
        """
        sql = sql.strip()
        while sql.endswith(";"):
            sql = sql[:-1].rstrip()
        saved = self._cursor
        self._cursor = self.handle.cursor()  # keep the caller's cursor and its results
        try:
            self.execute(f"describe query {sql}")
            rows = self._cursor.fetchall()
        finally:
            self._close_cursor()
            self._cursor = saved
        return describe_rows_to_json(rows)


class SparkContractsConnectionManager(SparkConnectionManager):
    TYPE = "spark_contracts"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        if connection.state == ConnectionState.OPEN:
            return connection
        creds: SparkContractsCredentials = connection.credentials  # type: ignore[assignment]
        if creds.method == ContractsConnectionMethod.SESSION:
            config = creds.embedded_config()
            factory = lambda: embedded.get_session(config)  # noqa: E731
        elif creds.method == ContractsConnectionMethod.CONNECT:
            factory = lambda: _connect_session(creds)  # noqa: E731
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
            factory()  # fail here, on open, with the real reason (Java, jars, server)
        except (embedded.EmbeddedSparkError, FileNotFoundError) as exc:
            raise FailedToConnectError(str(exc)) from exc
        except Exception as exc:
            if isinstance(exc, DbtRuntimeError):
                raise
            raise FailedToConnectError(f"Could not start Spark ({creds.method}): {exc}") from exc
        handle = SparkSessionHandle(factory, dict(creds.server_side_parameters))
        connection.handle = SparkSessionConnectionWrapper(handle)
        connection.state = ConnectionState.OPEN
        return connection

    @classmethod
    def get_response(cls, cursor: Any) -> AdapterResponse:
        return AdapterResponse(_message="OK")
