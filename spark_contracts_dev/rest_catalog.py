"""Iceberg's own REST catalog server as a local JVM process, for tests and development.

    python -m spark_contracts_dev.rest_catalog fetch .jars/rest      # once (`make jars` does it)
    python -m spark_contracts_dev.rest_catalog start --dir .rest-catalog [--port 8181]

The server is `org.apache.iceberg.rest.RESTCatalogServer` from the `test-fixtures` jar of
`org.apache.iceberg:iceberg-open-api:1.11.0` (the code of the apache/iceberg-rest-fixture Docker
image). Its backend is a `JdbcCatalog` on a SQLite file (`<dir>/catalog.db`), its warehouse a
local folder (`<dir>/warehouse`, tables at `<warehouse>/<namespace>/<table>`), its log
`<dir>/rest-catalog.log`. A Spark client reaches it with

    spark.sql.catalog.iceberg.type = rest
    spark.sql.catalog.iceberg.uri  = http://127.0.0.1:<port>

The iceberg-open-api POM declares no dependencies (its test fixtures' dependencies live only in
Iceberg's Gradle build), so `REST_SERVER_JARS` lists them: the classes the fixtures' byte code
names (iceberg-core and its `tests` jar for RESTCatalogAdapter / RESTCatalogServlet, the
aws / gcp / azure property classes, Jetty 12.1 ee10 with gzip compression, sqlite-jdbc), closed
over their own POMs' runtime dependencies (`mvn dependency:list`, November 2026). Hadoop
(`Configuration`, and `HadoopFileIO` for the file warehouse) comes from the pyspark wheel's
shaded `hadoop-client-api` / `hadoop-client-runtime`, as Spark itself uses it.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from dbt.adapters.spark_contracts import jars as jar_resolution
from dbt.adapters.spark_contracts.connection.session import DEFAULT_ICEBERG_CATALOG, check_java
from dbt.adapters.spark_contracts.jars import MavenJar
from spark_contracts_dev.procs import serve_until_interrupted
from spark_contracts_dev.servers import free_port, spark_home

MAIN_CLASS = "org.apache.iceberg.rest.RESTCatalogServer"
SERVER_ICEBERG_VERSION = "1.11.0"
# The folder under the jar folder (`make jars`: .jars/rest) that holds REST_SERVER_JARS.
JARS_SUBDIR = "rest"
JETTY = "12.1.14"
_ICEBERG = SERVER_ICEBERG_VERSION

REST_SERVER_JARS: Tuple[MavenJar, ...] = (
    MavenJar("org.apache.iceberg", "iceberg-open-api", _ICEBERG, "test-fixtures"),
    MavenJar("org.apache.iceberg", "iceberg-core", _ICEBERG),
    MavenJar("org.apache.iceberg", "iceberg-core", _ICEBERG, "tests"),
    MavenJar("org.apache.iceberg", "iceberg-api", _ICEBERG),
    MavenJar("org.apache.iceberg", "iceberg-common", _ICEBERG),
    MavenJar("org.apache.iceberg", "iceberg-bundled-guava", _ICEBERG),
    MavenJar("org.apache.iceberg", "iceberg-aws", _ICEBERG),
    MavenJar("org.apache.iceberg", "iceberg-gcp", _ICEBERG),
    MavenJar("org.apache.iceberg", "iceberg-azure", _ICEBERG),
    MavenJar("org.apache.avro", "avro", "1.12.1"),
    MavenJar("com.fasterxml.jackson.core", "jackson-core", "2.21.3"),
    MavenJar("com.fasterxml.jackson.core", "jackson-databind", "2.21.3"),
    MavenJar("com.fasterxml.jackson.core", "jackson-annotations", "2.21"),
    MavenJar("org.apache.httpcomponents.client5", "httpclient5", "5.6.1"),
    MavenJar("org.apache.httpcomponents.core5", "httpcore5", "5.4"),
    MavenJar("org.apache.httpcomponents.core5", "httpcore5-h2", "5.4"),
    MavenJar("com.github.ben-manes.caffeine", "caffeine", "2.9.3"),
    MavenJar("org.roaringbitmap", "RoaringBitmap", "1.6.14"),
    MavenJar("io.airlift", "aircompressor", "2.0.3"),
    MavenJar("dev.failsafe", "failsafe", "3.3.2"),
    MavenJar("org.checkerframework", "checker-qual", "3.19.0"),
    MavenJar("com.google.errorprone", "error_prone_annotations", "2.10.0"),
    MavenJar("org.apache.commons", "commons-compress", "1.28.0"),
    MavenJar("org.apache.commons", "commons-lang3", "3.18.0"),
    MavenJar("commons-io", "commons-io", "2.20.0"),
    MavenJar("commons-codec", "commons-codec", "1.19.0"),
    MavenJar("org.slf4j", "slf4j-api", "2.0.17"),
    MavenJar("org.slf4j", "slf4j-simple", "2.0.17"),
    MavenJar("org.xerial", "sqlite-jdbc", "3.50.3.0"),
    MavenJar("jakarta.servlet", "jakarta.servlet-api", "6.0.0"),
    MavenJar("org.eclipse.jetty.ee10", "jetty-ee10-servlet", JETTY),
    MavenJar("org.eclipse.jetty", "jetty-server", JETTY),
    MavenJar("org.eclipse.jetty", "jetty-http", JETTY),
    MavenJar("org.eclipse.jetty", "jetty-io", JETTY),
    MavenJar("org.eclipse.jetty", "jetty-util", JETTY),
    MavenJar("org.eclipse.jetty", "jetty-security", JETTY),
    MavenJar("org.eclipse.jetty", "jetty-session", JETTY),
    MavenJar("org.eclipse.jetty.compression", "jetty-compression-server", JETTY),
    MavenJar("org.eclipse.jetty.compression", "jetty-compression-common", JETTY),
    MavenJar("org.eclipse.jetty.compression", "jetty-compression-gzip", JETTY),
)

# A small server: the catalogue's metadata calls only; Spark reads and writes the data files.
JAVA_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def rest_jars_dir(jars_dir: Optional[str] = None) -> Path:
    """`<jar folder>/rest`: the jar folder from `jars_dir`, else $DBT_SPARK_CONTRACTS_JARS."""
    base = jar_resolution.configured_jars_dir(jars_dir)
    if base is None:
        raise RuntimeError(
            f"No jar folder: set ${jar_resolution.JARS_ENV_VAR} (make jars fills "
            f".jars/{JARS_SUBDIR})"
        )
    return base / JARS_SUBDIR


def fetch(target: Path) -> List[Path]:
    """Fill `target` with REST_SERVER_JARS (only the missing ones; mvn or HTTPS with sha1)."""
    return jar_resolution.fetch(target, REST_SERVER_JARS)


def class_path(jars_dir: Path) -> List[Path]:
    """The server's class path: REST_SERVER_JARS in `jars_dir`, and pyspark's Hadoop client."""
    try:
        own = jar_resolution.jar_paths(jars_dir, REST_SERVER_JARS)
    except jar_resolution.JarsNotFound as exc:
        raise jar_resolution.JarsNotFound(
            f"The REST catalog server's jar folder {jars_dir} is incomplete: fill it with "
            f"`python -m spark_contracts_dev.rest_catalog fetch {jars_dir}` (or `make jars`). "
            f"({exc})"
        ) from None
    hadoop = sorted((spark_home() / "jars").glob("hadoop-client-*.jar"))
    if not hadoop:
        raise RuntimeError(f"no hadoop-client-*.jar in {spark_home() / 'jars'}")
    return own + hadoop


def catalog_conf(uri: str, catalog: str = DEFAULT_ICEBERG_CATALOG) -> Dict[str, str]:
    """The Spark settings (`server_side_parameters` of a profile, or a server's conf) that point
    the adapter's Iceberg catalog `catalog` at the REST catalog at `uri`."""
    return {
        f"spark.sql.catalog.{catalog}.type": "rest",
        f"spark.sql.catalog.{catalog}.uri": uri,
    }


@dataclass
class RestCatalog:
    """A running REST catalog server."""

    port: int
    root: Path
    process: subprocess.Popen[bytes]

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def catalog_db(self) -> Path:
        return self.root / "catalog.db"

    @property
    def log_path(self) -> Path:
        return self.root / "rest-catalog.log"

    def spark_conf(self, catalog: str = DEFAULT_ICEBERG_CATALOG) -> Dict[str, str]:
        return catalog_conf(self.uri, catalog)

    def tables(self) -> List[Tuple[str, str]]:
        """(namespace, table) of every table in the server's SQLite catalogue."""
        with closing(sqlite3.connect(f"file:{self.catalog_db}?mode=ro", uri=True)) as db:
            rows = db.execute(
                "select table_namespace, table_name from iceberg_tables order by 1, 2"
            ).fetchall()
        return [(str(ns), str(name)) for ns, name in rows]

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


def _ready(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/v1/config", timeout=2) as response:
            return response.status == 200 and "endpoints" in json.loads(response.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False


def start(
    root: Path,
    port: Optional[int] = None,
    jars_dir: Optional[Path] = None,
    timeout: float = 60.0,
) -> RestCatalog:
    """Start a server whose catalogue and warehouse live in `root` (kept between starts: the
    SQLite file is the catalogue), wait until it answers `GET /v1/config`, and stop it when this
    process exits (atexit; and the kernel kills it should this process die first:
    `setpriv --pdeathsig`, where present). A free port unless `port`: tried again on another
    should a process take it between the choice and the server's bind."""
    for attempt in range(3):
        try:
            return _start(root, port, jars_dir, timeout)
        except _PortTaken:
            if port is not None or attempt == 2:
                raise
    raise AssertionError("unreachable")


class _PortTaken(RuntimeError):
    pass


def _start(
    root: Path, port: Optional[int], jars_dir: Optional[Path], timeout: float
) -> RestCatalog:
    check_java()
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    path = class_path(jars_dir or rest_jars_dir())
    port = port or free_port()
    warehouse, catalog_db = root / "warehouse", root / "catalog.db"
    log_path = root / "rest-catalog.log"
    warehouse.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CATALOG_")}
    # RESTCatalogServer reads its catalogue's properties from CATALOG_* variables
    # (RCKUtils.environmentCatalogConfig: CATALOG_ dropped, `__` -> `-`, `_` -> `.`, lower case).
    env.update(
        CATALOG_WAREHOUSE=warehouse.as_uri(),
        CATALOG_URI=f"jdbc:sqlite:{catalog_db}",
        CATALOG_JDBC_SCHEMA__VERSION="V1",
        CATALOG_REST_PORT=str(port),
        # one SQLite connection: commits are serialized, no SQLITE_BUSY between two connections
        CATALOG_CLIENTS="1",
    )
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home, "bin", "java")) if java_home else "java"
    command = [java, *JAVA_OPTIONS, "-cp", os.pathsep.join(map(str, path)), MAIN_CLASS]
    setpriv = shutil.which("setpriv")
    if setpriv:
        command = [setpriv, "--pdeathsig", "SIGKILL", *command]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=root, env=env)
    server = RestCatalog(port, root, process)
    atexit.register(server.stop)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            log_text = server.log_path.read_text(errors="replace")
            error = _PortTaken if "Address already in use" in log_text else RuntimeError
            raise error(
                f"the REST catalog server exited with {server.process.returncode}; "
                f"see {server.log_path}"
            )
        if _ready(server.uri):
            return server
        time.sleep(0.25)
    server.stop()
    raise RuntimeError(
        f"the REST catalog server did not answer on {server.uri} in {timeout:.0f}s; "
        f"see {server.log_path}"
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_contracts_dev.rest_catalog")
    sub = parser.add_subparsers(dest="command", required=True)
    fetch_cmd = sub.add_parser("fetch", help="download the REST catalog server's jars")
    fetch_cmd.add_argument("target", type=Path)
    sub.add_parser("list", help="print the Maven coordinates `fetch` downloads")
    start_cmd = sub.add_parser("start", help="run a server in the foreground (Ctrl-C stops it)")
    start_cmd.add_argument("--dir", type=Path, default=Path(".rest-catalog"))
    start_cmd.add_argument("--port", type=int, default=None)
    start_cmd.add_argument(
        "--jars-dir",
        type=Path,
        default=None,
        help=f"default: ${{DBT_SPARK_CONTRACTS_JARS}}/{JARS_SUBDIR}",
    )
    args = parser.parse_args(argv)
    if args.command == "list":
        for jar in REST_SERVER_JARS:
            print(jar.coordinate)
        return 0
    if args.command == "fetch":
        for path in fetch(args.target.expanduser().resolve()):
            print(path)
        return 0
    server = start(args.dir, args.port, args.jars_dir)
    print(f"REST catalog on {server.uri} (warehouse {server.warehouse}, log {server.log_path})")
    for key, value in server.spark_conf().items():
        print(f"  {key}: {value}")
    return serve_until_interrupted(server)


if __name__ == "__main__":
    sys.exit(main())
