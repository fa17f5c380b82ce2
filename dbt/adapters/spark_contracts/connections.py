"""Connection manager: dbt-spark's for thrift/http/odbc; the embedded session and Spark Connect here."""

from __future__ import annotations

from typing import Any, Dict

from dbt.adapters.contracts.connection import AdapterResponse, Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions import FailedToConnectError
from dbt.adapters.spark.connections import SparkConnectionManager
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
            return super().open(connection)
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
