"""The embedded Spark: one in-process SparkSession per process, Delta owning `spark_catalog`,
Iceberg as a named Hadoop catalog (or the catalog `server_side_parameters` set up, e.g. a REST
catalog), and a persistent warehouse and Derby metastore on disk."""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from dbt.adapters.spark_contracts import jars as jar_resolution
from dbt.adapters.spark_contracts.connection import derby_metastore
from dbt.adapters.spark_contracts.core.contracts.constraints import not_null_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_WAREHOUSE_DIR = "spark-warehouse"
DEFAULT_ICEBERG_CATALOG = "iceberg"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


class EmbeddedSparkError(RuntimeError):
    pass


@dataclass(frozen=True)
class EmbeddedSparkConfig:
    """Everything that decides how the embedded session is built."""

    warehouse_dir: Path
    iceberg_catalog: str = DEFAULT_ICEBERG_CATALOG
    jars_dir: Optional[Path] = None
    master: str = "local[*]"
    server_side_parameters: Mapping[str, str] = field(default_factory=dict)

    @property
    def metastore_dir(self) -> Path:
        return self.warehouse_dir / "metastore_db"

    @property
    def metastore_url(self) -> str:
        return f"jdbc:derby:;databaseName={self.metastore_dir};create=true"

    @property
    def iceberg_warehouse(self) -> Path:
        return self.warehouse_dir / "iceberg"

    @property
    def iceberg_catalog_is_hadoop(self) -> bool:
        """Whether the Iceberg catalog is the default Hadoop catalog under `warehouse_dir`: unless
        `server_side_parameters` give it another `type` (e.g. `rest`) or a `catalog-impl`. The
        catalog is then theirs alone: no Hadoop `type` or local `warehouse` is added (a REST
        server reads `warehouse` as its own setting)."""
        prefix = f"spark.sql.catalog.{self.iceberg_catalog}."
        params = self.server_side_parameters
        if f"{prefix}catalog-impl" in params:
            return False
        return str(params.get(f"{prefix}type", "hadoop")).lower() == "hadoop"

    def spark_conf(self) -> Dict[str, str]:
        """The Spark configuration, also used to start local thrift / connect servers."""
        conf: Dict[str, str] = {
            "spark.master": self.master,
            "spark.app.name": "dbt-spark-contracts",
            "spark.sql.extensions": ",".join(
                [
                    "io.delta.sql.DeltaSparkSessionExtension",
                    "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
                ]
            ),
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            f"spark.sql.catalog.{self.iceberg_catalog}": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.warehouse.dir": str(self.warehouse_dir),
            "spark.sql.catalogImplementation": "hive",
            derby_metastore.URL_KEY: self.metastore_url,
            "spark.driver.extraJavaOptions": (
                f"-Dderby.system.home={self.warehouse_dir} -Dlog4j2.configurationFile={LOG4J_CONFIG}"
            ),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.sql.shuffle.partitions": "4",
            "spark.sql.session.timeZone": "UTC",
            # A plain `CREATE TABLE` (no USING: hooks, run-operations, `saveAsTable`) makes a
            # Delta table, like the adapter's models; Spark's default is parquet. (Spark 4.1
            # already defaults spark.sql.legacy.createHiveTableByDefault to false, so no Hive
            # serde table either.) An explicit USING / STORED AS and the Iceberg catalog are
            # unaffected.
            "spark.sql.sources.default": "delta",
            # Delta: new tables can widen types in place (metadata only).
            "spark.databricks.delta.properties.defaults.enableTypeWidening": "true",
        }
        if self.iceberg_catalog_is_hadoop:
            conf[f"spark.sql.catalog.{self.iceberg_catalog}.type"] = "hadoop"
            conf[f"spark.sql.catalog.{self.iceberg_catalog}.warehouse"] = str(
                self.iceberg_warehouse
            )
        if self.jars_dir is not None:
            conf["spark.jars"] = ",".join(str(p) for p in jar_resolution.jar_paths(self.jars_dir))
        else:
            conf["spark.jars.packages"] = ",".join(jar_resolution.PACKAGE_COORDINATES)
        conf.update(self.server_side_parameters)
        return with_not_null_twin(conf, self.iceberg_catalog)


def with_not_null_twin(conf: Dict[str, str], catalog: str) -> Dict[str, str]:
    """`conf` with the Iceberg catalog's twin (core/contracts/constraints.not_null_catalog): the same
    catalog, whose CREATE / REPLACE TABLE AS SELECT keeps the query's NOT NULL columns
    (`use-nullable-query-schema=false`) and caches no table, so an Iceberg build with NOT NULL
    columns replaces the table in one commit."""
    prefix, twin = f"spark.sql.catalog.{catalog}", f"spark.sql.catalog.{not_null_catalog(catalog)}"
    if prefix not in conf or twin in conf:
        return conf
    for key, value in list(conf.items()):
        if key == prefix or key.startswith(prefix + "."):
            conf[twin + key[len(prefix) :]] = value
    conf[f"{twin}.use-nullable-query-schema"] = "false"
    conf[f"{twin}.cache-enabled"] = "false"
    return conf


def check_java() -> None:
    """Fail with one clear message when no Java runtime can start Spark."""
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else None
    if java is not None and java.is_file():
        return
    if java_home is None and shutil.which("java"):
        return
    where = f"JAVA_HOME={java_home} has no bin/java" if java_home else "no `java` on PATH"
    raise EmbeddedSparkError(
        f"The embedded Spark (method: session) needs Java 17, but {where}. Install a JDK 17 "
        "(e.g. `apt-get install openjdk-17-jdk-headless`) and put it on PATH or set JAVA_HOME."
    )


_lock = threading.Lock()
_active: Optional[SparkSession] = None
_active_config: Optional[EmbeddedSparkConfig] = None


def get_session(config: EmbeddedSparkConfig) -> SparkSession:
    """The process-wide embedded session, built once; a second, different config is an error."""
    global _active, _active_config
    with _lock:
        if _active is not None:
            if _active_config is not None and _differs(_active_config, config):
                raise EmbeddedSparkError(
                    "One process holds one embedded SparkSession; it was started with "
                    f"warehouse_dir={_active_config.warehouse_dir}, jars_dir="
                    f"{_active_config.jars_dir}, but now {config.warehouse_dir}, {config.jars_dir}. "
                    "Use one embedded target per process."
                )
            return _active
        check_java()
        _wait_for_the_metastore(config)
        # The Iceberg Hadoop catalog cannot list namespaces under a folder that does not exist.
        if config.iceberg_catalog_is_hadoop:
            config.iceberg_warehouse.mkdir(parents=True, exist_ok=True)
        from pyspark.sql import SparkSession

        builder = SparkSession.builder
        for key, value in config.spark_conf().items():
            builder = builder.config(key, value)
        session = builder.enableHiveSupport().getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        _widen_view_text(session, config)
        _active, _active_config = session, config
        return session


METASTORE_WAIT_SECONDS = 60.0


def _wait_for_the_metastore(
    config: EmbeddedSparkConfig, wait: float = METASTORE_WAIT_SECONDS
) -> None:
    """The embedded Derby metastore admits one JVM at a time. A dbt process killed a moment ago
    leaves its Spark JVM running until that notices its parent is gone; a run started at once
    (a retry) would fail to open the metastore. So, on positive evidence only (the kernel's
    lock table names the process that has it booted, derby_metastore.lock_holder), wait for it
    to let go, up to `wait` seconds, saying so; then go on (a process that still holds it is
    another live run on this warehouse, which Spark names in its error)."""
    if not derby_metastore.applies(config.spark_conf(), config.metastore_url):
        return
    deadline, told = time.monotonic() + wait, False
    while time.monotonic() < deadline:
        holder = derby_metastore.lock_holder(config.metastore_dir)
        if holder is None or holder == os.getpid():
            return
        if not told:
            _logger().info(
                f"The embedded metastore {config.metastore_dir} is open in process {holder} "
                "(a dbt run that ended a moment ago lets go of it once its Spark stops); "
                f"waiting up to {wait:.0f} s"
            )
            told = True
        time.sleep(0.5)


def _widen_view_text(session: SparkSession, config: EmbeddedSparkConfig) -> None:
    """Views longer than 32,700 characters on the embedded Derby metastore (derby_metastore):
    its view text columns become CLOBs, before any statement runs. Should that fail, the
    session still starts (only such views are affected), with a warning saying so."""
    conf = dict(session.sparkContext.getConf().getAll())
    if not derby_metastore.applies(conf, config.metastore_url):
        return
    try:
        widened = derby_metastore.widen_view_text(
            session._jvm,
            config.metastore_url,
            config.metastore_dir,
            lambda: session.catalog.databaseExists("default"),
        )
    except Exception as exc:
        _logger().warning(
            f"Could not make the view text columns of the embedded Derby metastore "
            f"({config.metastore_dir}) CLOBs: {_reason(exc)}. "
            f"A view whose SQL is longer than {derby_metastore.LONG_VARCHAR_LIMIT:,} characters "
            "will fail to create; materialize such a model as a table, or use method thrift or "
            "connect with a metastore on a server database."
        )
        return
    if widened:
        _logger().info(
            f"Embedded Derby metastore {config.metastore_dir}: {', '.join(widened)} are now "
            f"CLOBs (views longer than {derby_metastore.LONG_VARCHAR_LIMIT:,} characters)"
        )


def _reason(exc: Exception) -> str:
    """The first line of the root cause's message (of the Java exception behind a py4j error:
    Derby's own, e.g. "ERROR XSDB6: Another instance of Derby may have already booted ...")."""
    java = getattr(exc, "java_exception", None)
    try:
        while java is not None and java.getCause() is not None:
            java = java.getCause()
        text = str(java.toString()) if java is not None else str(exc).strip()
    except Exception:
        text = str(exc).strip()
    return text.splitlines()[0].rstrip(".") if text else repr(exc)


def _logger() -> Any:
    from dbt.adapters.events.logging import AdapterLogger

    return AdapterLogger("SparkContracts")


def thread_session(config: EmbeddedSparkConfig) -> SparkSession:
    """A session of its own for one dbt connection (one per thread): it shares the process's
    SparkContext, metastore and caches, but has its own SQL conf, temporary views and
    functions, so settings one model makes (Delta's commit tag, schema-evolution switches)
    never reach a model running on another thread."""
    session = get_session(config).newSession()
    for key, value in config.server_side_parameters.items():
        try:
            session.conf.set(key, value)
        except Exception:  # static settings were applied when the root session was built
            pass
    return session


def _differs(a: EmbeddedSparkConfig, b: EmbeddedSparkConfig) -> bool:
    return (a.warehouse_dir, a.jars_dir, a.iceberg_catalog, a.master) != (
        b.warehouse_dir,
        b.jars_dir,
        b.iceberg_catalog,
        b.master,
    )
