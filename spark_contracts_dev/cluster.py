"""A real Spark standalone cluster on this machine, from the pyspark wheel: a Derby network server
as the shared Hive metastore, a master, workers, and a Thrift and a Spark Connect server running
on it as two applications that share the metastore and the warehouse.

    python -m spark_contracts_dev.cluster start|stop|status [--dir .cluster]
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence

from dbt.adapters.spark_contracts import jars as jar_resolution
from dbt.adapters.spark_contracts.connection.session import EmbeddedSparkConfig, check_java
from spark_contracts_dev import cluster_cli
from spark_contracts_dev.cluster_commands import (  # noqa: F401 (named here for tests)
    DERBY_CLASS,
    DERBY_CLIENT_DRIVER,
    DERBY_ENGINE_JARS,
    HOST,
    MASTER_CLASS,
    WORKER_CLASS,
    Sizing,
    cluster_conf,
    derby_command,
    master_command,
    worker_command,
)
from spark_contracts_dev.procs import (
    ProcessRecord,
    is_same_process,
    process_table,
    processes_to_stop,
    read_process,
    record_of,
    signal_and_wait,
)
from spark_contracts_dev.servers import (
    MAIN_CLASSES,
    free_port,
    server_command,
    spark_home,
)

STATE_FILE = "cluster.json"

# Stop order: the applications first (their executors end with them), the metastore last.
STOP_PHASES = (("thrift", "connect"), ("worker",), ("master",), ("derby",))


class ClusterError(RuntimeError):
    def __init__(self, message: str, log: Optional[Path] = None) -> None:
        super().__init__(message)
        self.log = log  # the failed part's log, whose tail `start` prints


def log_tail(log: Path, lines: int = 40) -> str:
    try:
        with open(log, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError as error:
        return f"(log unreadable: {error})"
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class Cluster:
    """What cluster.json holds: where everything listens and every process started."""

    dir: str
    master_url: str
    master_web_ui_port: int
    derby_port: int
    warehouse_dir: str
    thrift_port: Optional[int] = None
    connect_port: Optional[int] = None
    processes: tuple[ProcessRecord, ...] = ()
    worker_web_ui_ports: tuple[int, ...] = ()

    @property
    def state_file(self) -> Path:
        return Path(self.dir) / STATE_FILE

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> Cluster:
        data = json.loads(text)
        data["processes"] = tuple(ProcessRecord(**p) for p in data.get("processes", ()))
        data["worker_web_ui_ports"] = tuple(data.get("worker_web_ui_ports", ()))
        return cls(**data)

    def process(self, name: str) -> ProcessRecord:
        return next(p for p in self.processes if p.name == name)

    def profiles_yml(self, schema: str = "analytics") -> str:
        """profiles.yml outputs for the servers that run."""
        lines = ["spark_cluster:", "  target: thrift" if self.thrift_port else "  target: connect"]
        lines.append("  outputs:")
        if self.thrift_port:
            lines += [
                "    thrift:",
                "      type: spark_contracts",
                "      method: thrift",
                "      host: 127.0.0.1",
                f"      port: {self.thrift_port}",
                "      user: dbt",
                f"      schema: {schema}",
                "      threads: 4",
            ]
        if self.connect_port:
            lines += [
                "    connect:",
                "      type: spark_contracts",
                "      method: connect",
                f"      host: sc://127.0.0.1:{self.connect_port}",
                f"      schema: {schema}",
                "      threads: 4",
            ]
        return "\n".join(lines) + "\n"

    def master_state(self, timeout: float = 5.0) -> Dict[str, Any]:
        """The master's JSON (workers, applications)."""
        url = f"http://{HOST}:{self.master_web_ui_port}/json"
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return dict(json.load(response))

    def worker_state(self, index: int, timeout: float = 5.0) -> Dict[str, Any]:
        """Worker `index` (1-based)'s JSON (its executors)."""
        url = f"http://{HOST}:{self.worker_web_ui_ports[index - 1]}/json"
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return dict(json.load(response))

    def alive(self) -> Dict[str, bool]:
        """Each recorded process: still the same process?"""
        return {p.name: is_same_process(p, read_process(p.pid)) for p in self.processes}

    def stop(self, timeout: float = 30.0) -> list[int]:
        """Stop every process this cluster started and all they spawned; remove cluster.json.
        Returns the pids that had to be killed (SIGKILL) after `timeout`."""
        killed: list[int] = []
        folder = str(Path(self.dir).resolve())
        for phase in STOP_PHASES:
            records = [p for p in self.processes if p.name.split("-")[0] in phase]
            if records:
                pids = processes_to_stop(records, process_table(), folder)
                killed += signal_and_wait(pids, timeout)
        # anything left in any of the groups (an executor whose worker died before the stop)
        left = processes_to_stop(self.processes, process_table(), folder)
        killed += signal_and_wait(left, timeout)
        self.state_file.unlink(missing_ok=True)
        return killed


def load(directory: Path) -> Optional[Cluster]:
    path = Path(directory) / STATE_FILE
    return Cluster.from_json(path.read_text()) if path.is_file() else None


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    return str(Path(java_home, "bin", "java")) if java_home else (shutil.which("java") or "java")


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


@dataclass
class _Starter:
    """Starts the parts one by one, recording each in cluster.json as soon as it runs, so that a
    failure (or a `stop` from another shell) can stop exactly what was started."""

    directory: Path
    cluster: Cluster
    env: Dict[str, str]
    timeout: float
    records: list[ProcessRecord] = field(default_factory=list)
    # the children themselves: whether one ended is `poll()`'s answer. /proc is no witness while
    # the launcher scripts exec (spark-submit -> spark-class -> java), when a read of the pid's
    # command line can fail or come back empty (seen: a start failed naming a "exited" server
    # whose log was empty; the server would have logged its own exit).
    children: Dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def launch(
        self, name: str, command: list[str], marker: str, env: Optional[Dict[str, str]] = None
    ) -> ProcessRecord:
        log = self.directory / "logs" / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.directory,
                env={**self.env, **(env or {})},
                start_new_session=True,  # outlives `make cluster`; leads its own process group
            )
        deadline = time.monotonic() + 10
        while process.poll() is None:  # the launcher scripts exec java: until the pid runs it
            info = read_process(process.pid)
            if (info is not None and marker in info.cmdline) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        record = record_of(name, process.pid, marker, log)
        self.children[name] = process
        self.records.append(record)
        self.save()
        return record

    def save(self) -> None:
        state = Cluster(**{**asdict(self.cluster), "processes": tuple(self.records)})
        self.cluster = state
        self.cluster.state_file.write_text(state.to_json())

    def wait(self, record: ProcessRecord, what: str, ready: Callable[[], bool]) -> None:
        """Until `ready()`; fail naming whichever started process ended meanwhile, or `record`
        after the timeout."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for started in self.records:
                child = self.children.get(started.name)  # None: started by an earlier start
                if child is not None and child.poll() is not None:
                    raise ClusterError(
                        f"{started.name} exited before {what}; see {started.log}",
                        Path(started.log),
                    )
            try:
                if ready():
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise ClusterError(
            f"{record.name} did not reach {what} in {self.timeout:.0f}s; see {record.log}",
            Path(record.log),
        )


def _env(directory: Path, sizing: Sizing) -> Dict[str, str]:
    env = dict(
        os.environ,
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=HOST,
        SPARK_DAEMON_MEMORY=sizing.daemon_memory,
        SPARK_LOCAL_DIRS=str(directory / "work"),
        SPARK_LOG_DIR=str(directory / "logs"),
    )
    # Python UDFs a Connect client sends (Python models) run in executors' Python workers: the
    # same Python as dbt's, with the same pyspark.
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


def restart_worker(
    cluster: Cluster, index: int, sizing: Sizing = Sizing(), timeout: float = 120.0
) -> Cluster:
    """Start `worker-<index>` again after it was lost (its web UI port and work folder as
    before) and wait until the master counts every worker ALIVE; cluster.json records the new
    process. The applications get executors on it again from the master."""
    name = f"worker-{index}"
    directory = Path(cluster.dir)
    starter = _Starter(directory, cluster, _env(directory, sizing), timeout)
    starter.records = [r for r in cluster.processes if r.name != name]
    web_port = cluster.worker_web_ui_ports[index - 1]
    command = worker_command(cluster.master_url, web_port, directory / "work" / name, sizing)
    record = starter.launch(name, command, WORKER_CLASS)
    workers = len(cluster.worker_web_ui_ports)

    def registered() -> bool:
        state = starter.cluster.master_state()
        return sum(w["state"] == "ALIVE" for w in state["workers"]) == workers

    starter.wait(record, f"{workers} registered workers", registered)
    return starter.cluster


def start(
    directory: Path | str = ".cluster",
    jars_dir: Optional[str] = None,
    servers: Sequence[str] = ("thrift", "connect"),
    sizing: Sizing = Sizing(),
    timeout: float = 240.0,
) -> Cluster:
    """Start the cluster into `directory` (warehouse, metastore, logs, cluster.json) and wait
    until every part is up; on a failure stop what was started and raise naming the part."""
    check_java()
    directory = Path(directory).resolve()
    running = load(directory)
    if running is not None and any(running.alive().values()):
        raise ClusterError(f"a cluster already runs from {running.state_file}; stop it first")
    jars = jar_resolution.configured_jars_dir(jars_dir)
    if jars is None:
        raise ClusterError(
            "The cluster needs a jar folder (profile key `jars_dir` or "
            f"${jar_resolution.JARS_ENV_VAR}) holding Delta, Iceberg and Derby's network server "
            "and client: `make jars` or `python -m dbt.adapters.spark_contracts.jars fetch DIR`."
        )
    extra = jar_resolution.cluster_jar_paths(jars)
    jar_resolution.jar_paths(jars)
    unknown = [kind for kind in servers if kind not in MAIN_CLASSES]
    if unknown:
        raise ClusterError(f"servers {unknown}: allowed are {', '.join(MAIN_CLASSES)}")

    warehouse = directory / "warehouse"
    for sub in ("logs", "derby", "work"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    config = EmbeddedSparkConfig(
        warehouse_dir=warehouse,
        jars_dir=jars,
        server_side_parameters={"spark.sql.ansi.enabled": "false"},
    )
    config.iceberg_warehouse.mkdir(parents=True, exist_ok=True)
    master_port = free_port()
    cluster = Cluster(
        dir=str(directory),
        master_url=f"spark://{HOST}:{master_port}",
        master_web_ui_port=free_port(),
        derby_port=free_port(),
        warehouse_dir=str(warehouse),
        thrift_port=free_port() if "thrift" in servers else None,
        connect_port=free_port() if "connect" in servers else None,
        worker_web_ui_ports=tuple(free_port() for _ in range(sizing.workers)),
    )
    starter = _Starter(directory, cluster, _env(directory, sizing), timeout)
    part = "derby"
    try:
        engine = [spark_home() / "jars" / name for name in DERBY_ENGINE_JARS]
        derby = starter.launch(
            "derby",
            derby_command(
                _java(), engine + [extra["derbynet"]], cluster.derby_port, directory / "derby"
            ),
            DERBY_CLASS,
        )
        starter.wait(derby, f"port {cluster.derby_port}", lambda: _port_open(cluster.derby_port))

        part = "master"
        master = starter.launch(
            "master", master_command(master_port, cluster.master_web_ui_port), MASTER_CLASS
        )
        starter.wait(master, "its web UI", lambda: bool(starter.cluster.master_state()))

        for index, web_port in enumerate(cluster.worker_web_ui_ports, start=1):
            part = f"worker-{index}"
            work = directory / "work" / part
            starter.launch(
                part, worker_command(cluster.master_url, web_port, work, sizing), WORKER_CLASS
            )

        def registered() -> bool:
            state = starter.cluster.master_state()
            alive = sum(w["state"] == "ALIVE" for w in state["workers"])
            return bool(alive == sizing.workers)

        part = "workers"
        starter.wait(master, f"{sizing.workers} registered workers", registered)

        for kind in servers:  # one after the other: the first creates the metastore's tables
            part = kind
            port = cluster.thrift_port if kind == "thrift" else cluster.connect_port
            assert port is not None
            command = server_command(
                kind,
                port,
                config,
                host=HOST,
                extra_conf=cluster_conf(
                    kind, cluster.master_url, cluster.derby_port, "metastore", sizing
                ),
                extra_class_path=[extra["derbyclient"]],
            )
            # Spark's launcher sizes the Thrift server as a daemon (SPARK_DAEMON_MEMORY wins
            # over spark.driver.memory); the master's and workers' 512m left its driver in
            # garbage collection most of the time after half an hour of tests (old gen full)
            server = starter.launch(
                kind, command, MAIN_CLASSES[kind], {"SPARK_DAEMON_MEMORY": sizing.server_memory}
            )
            starter.wait(server, f"port {port}", functools.partial(_port_open, port))
    except BaseException as error:
        starter.cluster.stop()
        if isinstance(error, ClusterError):
            raise
        log = Path(starter.records[-1].log) if starter.records else None
        where = log or directory / "logs"
        raise ClusterError(f"starting {part} failed: {error}; see {where}", log) from error
    return starter.cluster


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m spark_contracts_dev.cluster start|stop|status` (cluster_cli.py)."""
    return cluster_cli.main(argv, sys.modules[__name__])


if __name__ == "__main__":
    sys.exit(main())
