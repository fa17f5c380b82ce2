"""Start a local Spark Thrift Server or Spark Connect server from the pyspark wheel, configured
like the embedded session (Delta, Iceberg catalog, warehouse, jars).

    python -m spark_contracts_dev.servers thrift --port 10000 --warehouse-dir ./wh
    python -m spark_contracts_dev.servers connect --port 15002 --token s3cret
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence

from dbt.adapters.spark_contracts import jars as jar_resolution
from dbt.adapters.spark_contracts.connection.session import EmbeddedSparkConfig, check_java
from spark_contracts_dev.procs import serve_until_interrupted

MAIN_CLASSES = {
    "thrift": "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
    "connect": "org.apache.spark.sql.connect.service.SparkConnectServer",
}

# Spark Connect's server reads `spark.connect.authenticate.token` from this variable too.
CONNECT_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range(text: Optional[str] = None) -> tuple[int, int]:
    """The kernel's range for ports it hands out on its own (Linux; 32768-60999 elsewhere)."""
    try:
        if text is None:
            text = EPHEMERAL_RANGE_FILE.read_text()
        low, high = (int(part) for part in text.split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def port_candidates(low: int, high: int) -> range:
    """Ports outside the ephemeral range [low, high]: from 20000 up to it when there is room
    (above the usual fixed ports: 10000 Thrift, 15002 Connect), else above it, else below it."""
    if low > 21000:
        return range(20000, low)
    if high < 64000:
        return range(high + 1, 65536)
    return range(1024, max(low, 1025))


def free_port() -> int:
    """A port free now and outside the ephemeral range. A port the kernel picked (bind to 0)
    is released before the server binds it, and meanwhile any process's outgoing or ephemeral
    socket (a Spark driver's RPC, an executor's block manager) may get it: on CI the Connect
    server of the cluster lost its port so."""
    candidates = port_candidates(*ephemeral_range())
    for _ in range(200):
        port = random.choice(candidates)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port in {candidates.start}-{candidates.stop - 1} after 200 tries")


@dataclass
class LocalServer:
    kind: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def spark_home() -> Path:
    """The Spark distribution inside the pyspark wheel (bin/spark-submit, bin/spark-class, jars/)."""
    import pyspark

    return Path(pyspark.__file__).parent


# Spark 4 ships Hive 2.3's hive-exec without the LLAP jars. A Thrift server then fails a
# session's close whenever that close has to build Hive's FunctionRegistry (its static init
# loads GenericUDTFGetSplits, which needs LlapSigner): NoClassDefFoundError in
# TCloseSessionResp, and Hive's function registration stays pending, so a later session's close
# waits in `Hive.registerAllFunctionsOnce` for ever (seen on 2026-11-29: `make cluster-test`'s
# Thrift pass hung 20 minutes in PyHive's CloseSession; SPARK-51041 added these jars to
# Spark's own Thrift server tests for that hang). Every Thrift server started here gets them.
LLAP_JARS = ("hive-llap-common", "hive-llap-client")
HIVE_VERSION = "2.3.10"  # pyspark 4.1.1's jars/hive-exec-2.3.10-core.jar


def llap_jars(jars_dir: Path) -> list[Path]:
    """The LLAP jars in `<jars_dir>/thrift`, fetched there when missing (`make jars` does)."""
    wanted = [jar_resolution.MavenJar("org.apache.hive", a, HIVE_VERSION) for a in LLAP_JARS]
    return jar_resolution.fetch(Path(jars_dir) / "thrift", wanted)


def server_command(
    kind: str,
    port: int,
    config: EmbeddedSparkConfig,
    *,
    host: Optional[str] = None,
    extra_conf: Optional[Mapping[str, str]] = None,
    extra_class_path: Sequence[Path] = (),
) -> list[str]:
    """The spark-submit command of a Thrift or Connect server: local mode by default, a cluster
    when `config.master` names one (`spark://...`), with `extra_conf` over the session's conf
    and `extra_class_path` (e.g. a metastore's JDBC driver) on the driver's class path. `host`
    is the address the server listens on."""
    command = [str(spark_home() / "bin" / "spark-submit"), "--class", MAIN_CLASSES[kind]]
    conf = config.spark_conf()
    class_path = list(extra_class_path)
    if config.jars_dir is not None:
        # `spark.jars` alone is not enough for a server: the thrift server resolves data sources
        # (`USING delta`) through a class loader that does not see them. Put the jars on the
        # driver's own class path (in client mode spark-submit's JVM is the driver); `spark.jars`
        # still ships them to the executors.
        class_path = jar_resolution.jar_paths(config.jars_dir) + class_path
        if kind == "thrift":
            class_path += llap_jars(config.jars_dir)
    if class_path:
        conf["spark.driver.extraClassPath"] = os.pathsep.join(str(p) for p in class_path)
    conf.update(extra_conf or {})
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    if kind == "thrift":
        command += [
            "--hiveconf",
            f"hive.server2.thrift.port={port}",
            "--hiveconf",
            f"hive.server2.thrift.bind.host={host or 'localhost'}",
        ]
    else:
        command += ["--conf", f"spark.connect.grpc.binding.port={port}"]
        if host is not None:  # else every interface, as Spark's default
            command += ["--conf", f"spark.connect.grpc.binding.address={host}"]
    return command + ["spark-internal"]


def start(
    kind: str,
    warehouse_dir: str,
    port: Optional[int] = None,
    jars_dir: Optional[str] = None,
    timeout: float = 180.0,
    token: Optional[str] = None,
    conf: Optional[Dict[str, str]] = None,
) -> LocalServer:
    """Start a server and wait until its port accepts connections. `token` (connect only):
    clients must send it as their bearer token (`sc://host/;token=...`), Spark's
    `spark.connect.authenticate.token`, handed over in the environment, not the command line.
    `conf`: Spark settings over the embedded session's (e.g. `spark.ui.enabled`)."""
    check_java()
    if kind not in MAIN_CLASSES:
        raise ValueError(f"server kind {kind!r}: allowed are {', '.join(MAIN_CLASSES)}")
    if token is not None and kind != "connect":
        raise ValueError("--token is for the connect server only")
    port = port or free_port()
    warehouse = Path(warehouse_dir).resolve()
    config = EmbeddedSparkConfig(
        warehouse_dir=warehouse,
        jars_dir=jar_resolution.configured_jars_dir(jars_dir),
        # the session default for dbt-spark's credentials; servers get it from their conf.
        # `conf` is there too: one that sets the Iceberg catalog's type (e.g. rest) replaces the
        # Hadoop catalog as on the embedded session.
        server_side_parameters={"spark.sql.ansi.enabled": "false", **(conf or {})},
    )
    if config.iceberg_catalog_is_hadoop:
        config.iceberg_warehouse.mkdir(parents=True, exist_ok=True)
    log_path = warehouse / f"{kind}-server-{port}.log"
    env = dict(os.environ, SPARK_HOME=str(spark_home()))
    env.pop(CONNECT_TOKEN_ENV, None)
    # Python UDFs a Connect client sends run in workers of this Python (pyspark, same version)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    if token is not None:
        env[CONNECT_TOKEN_ENV] = token
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            server_command(kind, port, config, extra_conf=conf),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=warehouse,
            env=env,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{kind} server exited with {process.returncode}; see {log_path}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return LocalServer(kind, port, process, log_path)
        except OSError:
            time.sleep(1)
    process.kill()
    raise RuntimeError(f"{kind} server did not open port {port} in {timeout:.0f}s; see {log_path}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_contracts_dev.servers")
    parser.add_argument("kind", choices=sorted(MAIN_CLASSES))
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--warehouse-dir", default="spark-warehouse")
    parser.add_argument("--jars-dir", default=None)
    parser.add_argument(
        "--token",
        default=None,
        help=f"connect: the bearer token clients must send (default: ${CONNECT_TOKEN_ENV})",
    )
    args = parser.parse_args(argv)
    token = args.token or (os.environ.get(CONNECT_TOKEN_ENV) if args.kind == "connect" else None)
    server = start(args.kind, args.warehouse_dir, args.port, args.jars_dir, token=token)
    print(f"{args.kind} server listening on localhost:{server.port} (log: {server.log_path})")
    return serve_until_interrupted(server)


if __name__ == "__main__":
    sys.exit(main())
