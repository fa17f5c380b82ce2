"""Profile keys of `type: spark_contracts`: dbt-spark's, plus `connect` and the embedded session's."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional

from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.connections import SparkCredentials
from dbt_common.dataclass_schema import StrEnum
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts import jars as jar_resolution
from dbt.adapters.spark_contracts.connection.session import (
    DEFAULT_ICEBERG_CATALOG,
    DEFAULT_WAREHOUSE_DIR,
    EmbeddedSparkConfig,
)
from dbt.adapters.spark_contracts.core.settings.config import ConfigError
from dbt.adapters.spark_contracts.core.settings.deadline import query_timeout_seconds
from dbt.adapters.spark_contracts.core.settings.endpoint import (
    CONNECT_DEFAULT_RETRIES,
    connect_retry_settings,
)

# Keys dbt itself reads from a target; they never reach the credentials class as unknown keys.
_DBT_TARGET_KEYS = {"type", "threads", "profile_name", "target_name"}

logger = AdapterLogger("SparkContracts")


DEFAULT_THRIFT_POLL_INTERVAL = 0.1
# Session settings a thrift connection gets unless the profile sets them. The Spark Thrift Server
# turns on `spark.sql.datetime.java8API.enabled` for every session, and Delta 4.0's metadata-only
# answer to `max(<date column>)` (read from file statistics) then fails with "LocalDate cannot be
# cast to java.sql.Date" -- dbt's incremental `where d > (select max(d) from {{ this }})`.
THRIFT_SESSION_DEFAULTS = {"spark.databricks.delta.optimizeMetadataQuery.enabled": "false"}
# The session settings a thrift connection hands to the server in its OpenSession request (as
# `set:hiveconf:<key>`, which the Spark Thrift Server applies to the new session before it
# answers) instead of one SET statement each after it: the adapter's own defaults, known to be
# runtime SQL settings. Any other `server_side_parameters` key is SET after the session opens
# (a static setting among them is logged and skipped there; in OpenSession it would fail the
# connection).
THRIFT_OPEN_SESSION_KEYS = frozenset({"spark.sql.ansi.enabled", *THRIFT_SESSION_DEFAULTS})


# dbt-spark's `odbc` reaches Databricks through a Simba/Databricks ODBC driver. Here it would
# half work: it carries SQL, but none of the typed schema reads the planner needs was ever
# built or tested over it (no such driver to test with), so a profile naming it is refused.
ODBC_REFUSED = (
    "`method: odbc` is not supported by spark_contracts: schema evolution and contracts plan "
    "from typed schemas (nested types and nullability), which this adapter reads over thrift, "
    "http, connect and the embedded session, not over ODBC. Use `method: thrift` (or `http`) "
    "for a Spark Thrift Server, `method: connect` for Spark Connect, or omit `method` for the "
    "embedded session."
)


class ContractsConnectionMethod(StrEnum):
    THRIFT = "thrift"
    HTTP = "http"
    ODBC = "odbc"
    SESSION = "session"
    CONNECT = "connect"


# Relative `warehouse_dir` values resolve against the dbt project; the adapter sets this.
_project_root: Optional[Path] = None


def set_project_root(root: Optional[str]) -> None:
    global _project_root
    _project_root = Path(root).resolve() if root else None


@dataclass
class SparkContractsCredentials(SparkCredentials):
    method: ContractsConnectionMethod = None  # type: ignore[assignment]
    warehouse_dir: Optional[str] = None
    jars_dir: Optional[str] = None
    iceberg_catalog: str = DEFAULT_ICEBERG_CATALOG
    master: str = "local[*]"
    # dbt-spark polls a running thrift/http statement every `poll_interval` seconds (default 5,
    # an int), so every statement took at least 5s. Ours takes fractions; unset means
    # 0.1s for thrift (a local or LAN server) and dbt-spark's 5s for http.
    poll_interval: Optional[float] = None  # type: ignore[assignment]

    @classmethod
    def validate(cls, data: Any) -> None:
        # dbt checks a profile against the JSON schema before deserializing it; check the keys
        # and `method` first, so the user reads these messages, not the schema validator's.
        if isinstance(data, dict):
            cls._check_profile(dict(data))
        super().validate(data)

    @classmethod
    def __pre_deserialize__(cls, data: Any) -> Any:
        return cls._check_profile(super().__pre_deserialize__(data))

    @classmethod
    def _check_profile(cls, data: Any) -> Any:
        allowed = {f.name for f in fields(cls)} | set(cls._ALIASES) | _DBT_TARGET_KEYS
        unknown = sorted(k for k in data if k not in allowed)
        if unknown:
            hints = []
            for key in unknown:
                close = difflib.get_close_matches(key, sorted(allowed), n=1)
                hints.append(f"`{key}`" + (f" (did you mean `{close[0]}`?)" if close else ""))
            raise DbtRuntimeError(
                f"Unknown profile key(s) for type spark_contracts: {', '.join(hints)}. "
                f"Allowed keys: {', '.join(sorted(allowed - _DBT_TARGET_KEYS))}."
            )
        if data.get("method") is None:
            data["method"] = ContractsConnectionMethod.SESSION.value
        if data["method"] == ContractsConnectionMethod.ODBC.value:
            raise DbtRuntimeError(ODBC_REFUSED)
        if data["method"] in (
            ContractsConnectionMethod.THRIFT.value,
            ContractsConnectionMethod.HTTP.value,
        ):
            # dbt-spark re-sends a statement whose connection broke while it was polled (default
            # 1 retry): the server may still be running the first one, so a load could run twice.
            # Off unless the profile asks for it.
            data.setdefault("query_retries", 0)
        if data["method"] == ContractsConnectionMethod.CONNECT.value:
            # dbt-spark's default (no retry) would fail a run on the first dropped stream
            data.setdefault("connect_retries", CONNECT_DEFAULT_RETRIES)
        methods = [
            m.value for m in ContractsConnectionMethod if m != ContractsConnectionMethod.ODBC
        ]
        if data["method"] not in methods:
            raise DbtRuntimeError(
                f"Unknown `method: {data['method']}`; allowed: {', '.join(methods)} "
                "(omit it for the embedded session)."
            )
        return data

    def __post_init__(self) -> None:
        if self.method is None:
            self.method = ContractsConnectionMethod.SESSION
        user_parameters = {str(k): str(v) for k, v in self.server_side_parameters.items()}
        if self.method == ContractsConnectionMethod.SESSION and self.host is None:
            self.host = "localhost"  # dbt-spark requires a host; the embedded session has none
        if self.poll_interval is None:
            self.poll_interval = (
                DEFAULT_THRIFT_POLL_INTERVAL
                if self.method == ContractsConnectionMethod.THRIFT
                else 5
            )
        try:
            query_timeout_seconds(self.query_timeout)  # unset or more than 0, every method
        except ConfigError as exc:
            raise DbtRuntimeError(str(exc)) from exc
        if self.method == ContractsConnectionMethod.CONNECT:
            self._post_init_connect()
        else:
            super().__post_init__()
        if self.method == ContractsConnectionMethod.THRIFT:
            for key, value in THRIFT_SESSION_DEFAULTS.items():
                self.server_side_parameters.setdefault(key, value)
        # dbt-spark forces ANSI off; a value the user set in the profile wins.
        if "spark.sql.ansi.enabled" in user_parameters:
            self.server_side_parameters["spark.sql.ansi.enabled"] = user_parameters[
                "spark.sql.ansi.enabled"
            ]

    def _post_init_connect(self) -> None:
        if self.query_timeout is not None:  # once, when the profile loads
            logger.warning(
                f"query_timeout: {self.query_timeout} is not applied on method connect: "
                "statements run until they end (it applies on method session, thrift and http)"
            )
        if self.host is None:
            raise DbtRuntimeError(
                "`method: connect` needs `host`, e.g. `host: sc://localhost` with `port: 15002`."
            )
        if self.schema is None:
            raise DbtRuntimeError("Must specify `schema` in profile")
        try:
            connect_retry_settings(self.connect_retries, self.connect_timeout)
        except ConfigError as exc:
            raise DbtRuntimeError(str(exc)) from exc
        try:
            import grpc  # noqa: F401
            import pyspark.sql.connect  # noqa: F401
        except ImportError as exc:
            raise DbtRuntimeError(
                "`method: connect` needs the Spark Connect client: `pip install 'pyspark[connect]'`"
            ) from exc
        if self.database is not None and self.database != self.schema:
            raise DbtRuntimeError("On Spark, database must be omitted or equal to schema.")
        self.database = None
        self.server_side_parameters = {
            str(k): str(v) for k, v in self.server_side_parameters.items()
        }
        self.server_side_parameters["spark.sql.ansi.enabled"] = "false"

    @property
    def connect_url(self) -> str:
        """The Spark Connect URL: `host` (`sc://h[:p][/;k=v...]` or a bare host name), plus
        `port` when the host has none (unset, 443 being dbt-spark's default, means the client's
        own default, 15002), and `token` / `user` / `use_ssl` as URL parameters unless the
        host already carries them."""
        host = (self.host or "localhost").strip()
        if not host.startswith("sc://"):
            host = f"sc://{host}"
        netloc, _, rest = host[len("sc://") :].partition("/")
        if ":" not in netloc and self.port not in (None, 443):
            netloc = f"{netloc}:{self.port}"
        params = [p for p in rest.lstrip(";").split(";") if p]
        present = {p.split("=", 1)[0].strip().lower() for p in params}
        extra = {"token": self.token, "user_id": self.user}
        if self.use_ssl:
            extra["use_ssl"] = "true"
        params += [f"{k}={v}" for k, v in extra.items() if v and k not in present]
        return f"sc://{netloc}" + (f"/;{';'.join(params)}" if params else "")

    def embedded_config(self) -> EmbeddedSparkConfig:
        warehouse = Path(self.warehouse_dir or DEFAULT_WAREHOUSE_DIR).expanduser()
        if not warehouse.is_absolute():
            warehouse = (_project_root or Path.cwd()) / warehouse
        return EmbeddedSparkConfig(
            warehouse_dir=warehouse.resolve(),
            iceberg_catalog=self.iceberg_catalog,
            jars_dir=jar_resolution.configured_jars_dir(self.jars_dir),
            master=self.master,
            server_side_parameters=dict(self.server_side_parameters),
        )

    @property
    def type(self) -> str:
        return "spark_contracts"

    @property
    def unique_field(self) -> str:
        if self.method == ContractsConnectionMethod.SESSION:
            return str(self.embedded_config().warehouse_dir)
        return self.host or ""

    def _connection_keys(self) -> tuple[str, ...]:
        keys = ("method", "host", "port", "schema")
        if self.method == ContractsConnectionMethod.SESSION:
            return keys + ("warehouse_dir", "jars_dir", "iceberg_catalog")
        return keys + ("cluster", "endpoint", "organization", "iceberg_catalog")
