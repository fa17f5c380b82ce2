"""Connections over the wire, against a real local server (`--profile thrift` or `connect`), with
dbt run as users run it (a `dbt` subprocess):

- Ctrl-C (SIGINT) during a slow incremental load stops dbt within seconds, the server's job is
  cancelled, the Delta table is as before (rows and history), and the next run works (thrift,
  connect, and the session method with Spark inside dbt);
- (connect) a TCP proxy that drops every connection in the middle of a load: the Connect client
  retries and reattaches, the run succeeds and the rows are loaded exactly once;
- a server lost in the middle of a run, a wrong port, a stopped server and (connect) a wrong or
  missing token each give one dbt error naming the method and the server, no traceback.

The module starts its own server (the connect one requires a token) with Spark's UI on, to see
which jobs the server runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest
import yaml

from dbt.adapters.spark_contracts.connection.errors import SESSION_LEFT
from dbt.adapters.spark_contracts.core.recovery.intent import is_marker
from dbt.adapters.spark_contracts.core.recovery.late import LATE_PROPERTY
from spark_contracts_dev.servers import LocalServer, free_port, start
from tests.functional.conftest import JVM_PARAMETERS

pytestmark = pytest.mark.profile("thrift", "connect")

TOKEN = "dbt-spark-contracts-test-token"
SCHEMA = "resilience"
# The slow load: PARTITIONS tasks sleeping SLEEP_MS per row, on the server's 2 cores or fewer.
# The sleep is a filter on `reflect` (nullable, non-deterministic), which Spark keeps; the earlier
# `coalesce(reflect(...), 'x') is not null` is never null, so Spark dropped the filter and the
# sleep with it: the "slow" load took a second and the Ctrl-C test raced the commit.
PARTITIONS = 40
SLOW_ROWS = 2400
SLOW_SLEEP_MS = 100  # 2400 rows x 100 ms / 2 cores: 120 s or more
CANCEL_EXIT_S = 30.0

INCREMENTAL = """
{{ config(materialized='incremental', file_format='delta', incremental_strategy='append') }}
{% if is_incremental() %}
select id from range({{ var('start', 1000) }}, {{ var('start', 1000) }} + {{ var('rows', 0) }},
                     1, {{ var('partitions', 1) }})
where reflect('java.lang.Thread', 'sleep', cast({{ var('sleep_ms', 0) }} as bigint)) is not null
{% else %}
select id from range(0, 3)
{% endif %}
"""


@dataclass
class Server:
    kind: str
    port: int
    ui_port: int
    local: Optional[LocalServer]  # None: the session method's Spark, inside the dbt process

    def query(self, sql: str, port: Optional[int] = None) -> List[tuple]:
        """Rows of `sql`, through a client of the server's own kind."""
        if self.kind == "connect":
            from pyspark.sql import SparkSession

            session = SparkSession.builder.remote(
                f"sc://localhost:{port or self.port}/;token={TOKEN}"
            ).create()
            try:
                return [tuple(r) for r in session.sql(sql).collect()]
            finally:
                session.stop()
        from pyhive import hive

        connection = hive.connect(host="localhost", port=port or self.port, username="dbt")
        try:
            cursor = connection.cursor()
            cursor.execute(sql)
            return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
        finally:
            connection.close()

    def running_jobs(self) -> List[Dict[str, Any]]:
        """The jobs the server's SparkContext runs now (Spark's REST API)."""
        base = f"http://localhost:{self.ui_port}/api/v1/applications"
        with urllib.request.urlopen(base, timeout=60) as response:
            app = json.load(response)[0]["id"]
        with urllib.request.urlopen(f"{base}/{app}/jobs?status=running", timeout=60) as response:
            return list(json.load(response))


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    kind = request.config.getoption("--profile")
    ui_port = free_port()
    local = start(
        kind,
        str(tmp_path_factory.mktemp("resilience_warehouse")),
        token=TOKEN if kind == "connect" else None,
        conf={"spark.ui.enabled": "true", "spark.ui.port": str(ui_port)},
    )
    try:
        yield Server(kind, local.port, ui_port, local)
    finally:
        local.stop()


class Proxy:
    """A TCP proxy to `localhost:target`: `drop_all()` closes every open connection (the
    server stays up); `stop()` also stops listening (the server is gone for the client)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = int(self.listener.getsockname()[1])
        self.accepted = 0
        self._sockets: List[socket.socket] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._after: List[re.Pattern[bytes]] = []  # drop_after's patterns still to be seen
        self.dropped_after = threading.Event()
        # the connections drop_after is about to drop: their answers are held back until then;
        # a connection opened after the match is not muted (before 2026-12-04 every answer was,
        # for the half second before the drop and a moment after it, so a connection a client
        # opened in that moment could lose the server's first answer and wait for it forever:
        # a cut-off run over Connect that never ended, make cluster-test of f160c76)
        self._muted: set = set()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
                self.accepted += 1
            for source, sink, sent in ((client, upstream, True), (upstream, client, False)):
                args = (source, sink, sent)
                threading.Thread(target=self._pipe, args=args, daemon=True).start()

    def drop_after(self, *patterns: bytes) -> None:
        """Once what clients send has matched each of `patterns` (regular expressions) in
        turn, every connection open then is dropped right after the data that matched the last
        one went through: the server has the statement, the client never gets its answer (none
        of what the server sends on those connections from then on reaches their client).
        Connections opened later are left alone."""
        with self._lock:
            self._after = [re.compile(p, re.IGNORECASE | re.DOTALL) for p in patterns]

    def _watch(self, data: bytes) -> bool:
        with self._lock:
            while self._after and self._after[0].search(data):
                self._after.pop(0)
                if not self._after:
                    return True
        return False

    def _pipe(self, source: socket.socket, sink: socket.socket, sent: bool = False) -> None:
        try:
            while data := source.recv(65536):
                if not sent and sink in self._muted:
                    continue  # an answer after the statement drop_after waits for: never sent
                matched = sent and self._watch(data)
                if matched:  # before the server has it: its answer never reaches the client
                    with self._lock:
                        doomed = list(self._sockets)
                        self._muted.update(doomed)
                sink.sendall(data)
                if matched:
                    time.sleep(0.5)  # the server reads the statement, then the lines go
                    self._drop(doomed)
                    self.dropped_after.set()
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def drop_all(self) -> int:
        with self._lock:
            sockets = list(self._sockets)
        return self._drop(sockets)

    def _drop(self, sockets: List[socket.socket]) -> int:
        with self._lock:
            self._sockets = [s for s in self._sockets if s not in sockets]
            self._muted.difference_update(sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        return len(sockets) // 2

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        self.listener.close()
        self.drop_all()


@pytest.fixture
def proxy(server: Server) -> Iterator[Proxy]:
    p = Proxy(server.port)
    try:
        yield p
    finally:
        p.stop()


class TlsProxy:
    """TLS in front of `localhost:target` (a Spark Connect server speaks plaintext gRPC; TLS
    ends at a proxy in front of it, as in a real deployment): asyncio's TLS on one event loop
    thread, HTTP/2 announced by ALPN as gRPC requires."""

    def __init__(self, target: int, cert: Path, key: Path) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(cert), str(key))
        context.set_alpn_protocols(["h2"])
        self.handshakes = 0
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (OSError, ConnectionError):
                pass
            finally:
                writer.close()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.handshakes += 1  # the TLS handshake is done when the handler runs
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
            except OSError:
                writer.close()
                return
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.server = self.loop.run_until_complete(
                asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
            )
            self.port = int(self.server.sockets[0].getsockname()[1])
            started.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        assert started.wait(10), "the TLS proxy did not start"

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for localhost / 127.0.0.1 and its key, made by the openssl command."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return cert, key


def target(server: Server, port: Optional[int] = None, **keys: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"type": "spark_contracts", "schema": SCHEMA, "threads": 1}
    out.update(method=server.kind, host="localhost", port=port or server.port)
    if server.kind == "connect":
        out["token"] = TOKEN
    else:
        out["user"] = "dbt"
    out.update(keys)
    return {k: v for k, v in out.items() if v is not None}


class Project:
    def __init__(self, root: Path, models: Dict[str, str]) -> None:
        self.root = root
        (root / "models").mkdir(parents=True)
        for name, sql in models.items():
            (root / "models" / name).write_text(sql)
        (root / "dbt_project.yml").write_text(
            yaml.safe_dump({"name": "resilience", "version": "1.0", "profile": "resilience"})
        )

    def command(self, profile: Dict[str, Any], *args: str) -> List[str]:
        (self.root / "profiles.yml").write_text(
            yaml.safe_dump({"resilience": {"target": "t", "outputs": {"t": profile}}})
        )
        dirs = ["--project-dir", str(self.root), "--profiles-dir", str(self.root)]
        code = "import sys; from dbt.cli.main import cli; sys.argv[0] = 'dbt'; sys.exit(cli())"
        return [sys.executable, "-c", code, *args, *dirs]

    def run(
        self,
        profile: Dict[str, Any],
        *args: str,
        timeout: float = 300,
        env: Optional[Dict[str, str]] = None,
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command(profile, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            env={**_env(), **(env or {})},
        )

    def start(
        self, profile: Dict[str, Any], *args: str, env: Optional[Dict[str, str]] = None
    ) -> subprocess.Popen:
        out = open(self.root / "dbt-output.txt", "w")
        return subprocess.Popen(
            self.command(profile, *args),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=self.root,
            env={**_env(), **(env or {})},
            start_new_session=True,
            # dbt as a terminal starts it: a test run in the background (`make ... &`) has
            # SIGINT ignored, which a child inherits and Python then leaves ignored
            preexec_fn=_default_sigint,
        )

    @contextmanager
    def loading(
        self, server: Server, profile: Dict[str, Any], tasks: int, **slow: Any
    ) -> Iterator[subprocess.Popen]:
        """`dbt run` with the slow load (`slow`: rows, partitions, sleep_ms), handed over once
        the server runs the load's job of `tasks` tasks; killed on the way out if still alive."""
        process = self.start(profile, "run", "--vars", _vars(**slow))
        try:
            wait_for_slow_job(server, process, tasks)
            yield process
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

    def output(self) -> str:
        return (self.root / "dbt-output.txt").read_text()


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env.pop("SPARK_CONNECT_LOG_LEVEL", None)
    return env


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _vars(**values: Any) -> str:
    return json.dumps(values)


def wait_for_slow_job(server: Server, process: subprocess.Popen, tasks: int) -> None:
    """Until the server runs a job of `tasks` tasks (the slow load); only the load runs the
    model's query, so no other job of the run has that many."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert process.poll() is None, "dbt ended before the load started"
        try:
            jobs = server.running_jobs()
        except (OSError, ValueError):  # the session method's Spark (and its UI) starts with the run
            jobs = []
        if any(job.get("numTasks") == tasks for job in jobs):
            return
        time.sleep(0.5)
    raise AssertionError(f"no running job of {tasks} tasks on the server")


def wait_until_idle(server: Server, timeout: float = 30) -> List[Dict[str, Any]]:
    deadline = time.monotonic() + timeout
    jobs = server.running_jobs()
    while jobs and time.monotonic() < deadline:
        time.sleep(0.5)
        jobs = server.running_jobs()
    return jobs


def delta_state(server: Server, relation: str) -> tuple:
    rows = sorted(server.query(f"select id from {relation}"))
    versions = [r[0] for r in server.query(f"describe history {relation}")]
    return rows, max(versions)


LEASE_5S = {"DBT_SPARK_CONTRACTS_LEASE_SECONDS": "5"}  # a lease runs out in 5 s, not 30
# the run that takes such a lease over, then commits: a lease of its own long enough that a
# heartbeat slowed by a loaded server stays within nine tenths of it (make cluster-test with 3
# workers, 2026-12-01: a taker under a 5-s lease refused to commit, its beat 4.7 s old)
LEASE_TAKER = {"DBT_SPARK_CONTRACTS_LEASE_SECONDS": "15"}


def run_cut_off(
    project: Project, server: Server, proxy: Proxy, patterns: tuple, *args: str
) -> subprocess.CompletedProcess:
    """`dbt run *args` through `proxy`, every connection dropped right after what the client
    sent matched each of `patterns` in turn (`Proxy.drop_after`; Connect: no retry): the run
    failed, with no traceback, and the server has nothing running any more."""
    proxy.drop_after(*patterns)
    cut = target(server, port=proxy.port, connect_retries=0, connect_timeout=2)
    lost = project.run(cut, "run", *args, env=LEASE_5S)
    assert proxy.dropped_after.is_set(), lost.stdout + lost.stderr
    assert lost.returncode == 1, lost.stdout + lost.stderr
    assert_no_traceback(lost.stdout + lost.stderr)
    wait_until_idle(server)
    return lost


def assert_no_traceback(output: str) -> None:
    for marker in ("Traceback (most recent call last)", "\tat org.", "\tat java."):
        assert marker not in output, output


def label(server: Server, port: int) -> str:
    address = f"sc://localhost:{port}" if server.kind == "connect" else f"localhost:{port}"
    return f"spark_contracts method {server.kind}, {address}"


def test_ctrl_c_cancels_the_load_on_the_server(server: Server, tmp_path: Path) -> None:
    project = Project(tmp_path / "p", {"slow_inc.sql": INCREMENTAL})
    profile = target(server)
    first = project.run(profile, "run")
    assert first.returncode == 0, first.stdout + first.stderr
    relation = f"{SCHEMA}.slow_inc"
    before = delta_state(server, relation)
    assert before[0] == [(0,), (1,), (2,)]

    slow = dict(rows=SLOW_ROWS, partitions=PARTITIONS, sleep_ms=SLOW_SLEEP_MS)
    with project.loading(server, profile, PARTITIONS, **slow) as process:
        time.sleep(2)  # the load statement is well under way
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
        took = time.monotonic() - interrupted
    output = project.output()
    assert process.returncode != 0, output
    assert took < CANCEL_EXIT_S, f"dbt took {took:.0f}s to stop after Ctrl-C:\n{output}"
    assert "CANCEL query model.resilience.slow_inc" in output, output
    # dbt itself prints the KeyboardInterrupt's traceback (any adapter); none of the adapter,
    # pyspark, gRPC or the JVM
    assert "KeyboardInterrupt" in output, output
    for frame in ("spark_contracts", "pyspark", "grpc", "pyhive", "\tat org."):
        assert frame not in output.split("Encountered an error:")[-1], output
    # the server no longer runs the load, and the table is as it was (no new Delta commit)
    assert wait_until_idle(server) == []
    assert delta_state(server, relation) == before

    again = project.run(profile, "run", "--vars", _vars(rows=2))
    assert again.returncode == 0, again.stdout + again.stderr
    rows, version = delta_state(server, relation)
    assert rows == [(0,), (1,), (2,), (1000,), (1001,)]
    assert version == before[1] + 1


@pytest.mark.profile("session")
def test_ctrl_c_cancels_the_load_in_the_embedded_session(tmp_path: Path, worker_spark: Any) -> None:
    """The session method, Spark inside the dbt process: on Ctrl-C dbt interrupts the
    connection's own session (`interruptAll`) and exits, which also ends its Spark; dbt stops
    within seconds, the Delta table gets no commit and the next run loads its rows once. The
    load is watched through that Spark's UI; the rows are read by path by the test process's
    Spark."""
    spark = Server("session", 0, free_port(), None)
    warehouse = tmp_path / "warehouse"
    profile = {
        "type": "spark_contracts",
        "method": "session",
        "schema": SCHEMA,
        "threads": 1,
        "warehouse_dir": str(warehouse),
        "server_side_parameters": {
            **JVM_PARAMETERS,
            "spark.ui.enabled": "true",
            "spark.ui.port": str(spark.ui_port),
        },
    }
    project = Project(tmp_path / "p", {"slow_inc.sql": INCREMENTAL})
    first = project.run(profile, "run")
    assert first.returncode == 0, first.stdout + first.stderr
    log = warehouse / f"{SCHEMA}.db" / "slow_inc" / "_delta_log"
    before = sorted(log.glob("*.json"))
    assert len(before) == 1

    slow = dict(rows=SLOW_ROWS, partitions=PARTITIONS, sleep_ms=SLOW_SLEEP_MS)
    with project.loading(spark, profile, PARTITIONS, **slow) as process:
        time.sleep(2)  # the load statement is well under way
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
        took = time.monotonic() - interrupted
    output = project.output()
    assert process.returncode != 0, output
    assert took < CANCEL_EXIT_S, f"dbt took {took:.0f}s to stop after Ctrl-C:\n{output}"
    assert "CANCEL query model.resilience.slow_inc" in output, output
    assert sorted(log.glob("*.json")) == before  # no commit

    again = project.run(profile, "run", "--vars", _vars(rows=2))
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(sorted(log.glob("*.json"))) == len(before) + 1
    table = worker_spark.read.format("delta").load(str(log.parent))
    assert [r.id for r in table.orderBy("id").collect()] == [0, 1, 2, 1000, 1001]


@pytest.mark.profile("connect")
def test_connect_retries_a_dropped_connection_and_loads_once(
    server: Server, proxy: Proxy, tmp_path: Path
) -> None:
    project = Project(tmp_path / "p", {"reload_once.sql": INCREMENTAL})
    profile = target(server, port=proxy.port, connect_retries=5, connect_timeout=2)
    first = project.run(profile, "run")
    assert first.returncode == 0, first.stdout + first.stderr
    relation = f"{SCHEMA}.reload_once"

    partitions, rows = 8, 400  # 400 x 50 ms on 2 cores: about 10 s
    with project.loading(
        server, profile, partitions, rows=rows, partitions=partitions, sleep_ms=50
    ) as process:
        accepted = proxy.accepted
        assert proxy.drop_all() >= 1  # every connection of the run, mid-load
        process.wait(timeout=240)
    output = project.output()
    assert process.returncode == 0, output
    assert proxy.accepted > accepted, "the client did not reconnect after the drop"
    loaded = sorted(r[0] for r in server.query(f"select id from {relation}"))
    assert loaded == [0, 1, 2] + list(range(1000, 1000 + rows))  # exactly once


QUARANTINING = """
{{ config(materialized='incremental', file_format='delta', incremental_strategy='append',
          schema_contract={'data_type': 'discard_row', 'quarantine': true}) }}
{% if is_incremental() %}
select id, case when id % 10 = 0 then 'bad' else cast(id as string) end as n
from range(100, 200)
{% else %}
select id, id as n from range(0, 3)
{% endif %}
"""


def test_a_load_whose_answer_is_lost_keeps_its_discarded_rows(
    server: Server, proxy: Proxy, tmp_path: Path
) -> None:
    """A quarantining run whose connection drops right after it sent its load (the server has
    the statement, the client never gets its answer; connect: no retry): the server may commit
    that load after dbt has failed. The run drops none of its discarded rows; the next run
    settles them from the table's log: every load in the table has its 10 discarded rows in
    the quarantine once, no pending table or run record is left, and that run loads its own
    rows. (Before 2026-11-30 a run that could still read the log after such a failure dropped
    its pending rows; the scripted matrix, test_fault_matrix_pending.py, has the late commit.)"""
    project = Project(tmp_path / "p", {"qlost.sql": QUARANTINING})
    direct = target(server)
    first = project.run(direct, "run")
    assert first.returncode == 0, first.stdout + first.stderr
    relation = f"{SCHEMA}.qlost"

    # the pending table made, then the load into the model (the first pass, before it, fails)
    patterns = (
        rb"create\s+table\s+[`\w.]*__quarantine__pending_",
        rb"insert\s+into\s+[`\w.]*qlost`?\s",
    )
    run_cut_off(project, server, proxy, patterns)

    again = project.run(direct, "run", env=LEASE_TAKER)
    assert again.returncode == 0, again.stdout + again.stderr
    history = server.query(f"describe history {relation}")
    loads = [r[0] for r in server.query(f"select count(*) from {relation} where id >= 100")]
    assert loads[0] in (90, 180), loads  # the lost run's load landed, or it never did
    if loads[0] == 90:  # its pending rows were dropped: only once a marker under the lost
        # run's writes' id made the log final for its load: its own (the connection came back
        # for its undo, as Spark Connect's does) or the next run's, once it took the lease over
        assert any(is_marker(str(value)) for row in history for value in row), history
    per_run = server.query(
        f"select _dbt_run_id, count(*) from {relation}__quarantine group by _dbt_run_id"
    )
    assert sorted(n for _, n in per_run) == [10] * (loads[0] // 90), (per_run, history)
    tables = {str(r[1]) for r in server.query(f"show tables in {SCHEMA}")}
    assert not [t for t in tables if "__pending_" in t or "__dbt_lease_" in t], tables


def assert_as_control(
    server: Server, model: str, control: str, rows: int, watched: bool = False
) -> None:
    """`model`'s (id, twice) rows are the never-interrupted `control`'s, `rows` of them, and no
    run record (lease) of `model` is left, but one kept with a watch for a late commit of its
    run where `watched` (core/recovery/late.py). (The tests share one schema: another model's
    watched record may be there.)"""
    found = {
        name: sorted(server.query(f"select id, twice from {SCHEMA}.{name}"))
        for name in (model, control)
    }
    assert found[model] == found[control] and len(found[model]) == rows, found
    tables = {str(r[1]) for r in server.query(f"show tables in {SCHEMA}")}
    left = sorted(t for t in tables if t.startswith(f"{model}__dbt_lease_"))
    assert len(left) == (1 if watched else 0), tables
    for table in left:
        shown = server.query(f"show tblproperties {SCHEMA}.{table}")
        properties = {str(r[0]): str(r[1]) for r in shown}
        assert properties.get(LATE_PROPERTY), (table, properties)


MULTI_STEP = """
{{ config(materialized='incremental', file_format='delta', unique_key='id',
          schema_evolution=({'columns': {'twice': {'backfill': 'id * 10'}}} if var('v', 1) != 1 else {})) }}
{% if var('v', 1) == 1 %}
select id from range(3)
{% else %}
select id, id * 10 as twice from range(3, 6)
{% endif %}
"""


def test_an_alter_whose_answer_is_lost_is_repaired_by_the_next_run(
    server: Server, proxy: Proxy, tmp_path: Path
) -> None:
    """A multi-step Delta run (ADD COLUMNS, a backfill UPDATE, the MERGE) whose connection drops
    right after it sent its ADD COLUMNS: the server may commit it after dbt has failed, and an
    ALTER carries no transaction id a marker could fence off. The run puts nothing back (a
    restore could be overtaken by it), fails with `StepUnanswered` naming the statement, and
    leaves its record; the next run takes the lease over once it ran out, repairs and carries
    the change out: the table ends as a model never cut off (`mcontrol`), the record kept with a
    watch for the ALTER landing late (since 2026-12-01; before, it was dropped, and a late ALTER
    stayed)."""
    project = Project(tmp_path / "p", {"mcut.sql": MULTI_STEP, "mcontrol.sql": MULTI_STEP})
    direct = target(server)
    first = project.run(direct, "run")
    assert first.returncode == 0, first.stdout + first.stderr
    v2 = ("--vars", "{v: 2}")
    control = project.run(direct, "run", "--select", "mcontrol", *v2)
    assert control.returncode == 0, control.stdout + control.stderr

    alter = rb"alter\s+table\s+[`\w.]*mcut`?\s+add\s+columns"
    lost = run_cut_off(project, server, proxy, (alter,), "--select", "mcut", *v2)
    assert "gave no answer for the run's statement" in lost.stdout, lost.stdout
    # nothing put back at once: the run's record (its intent) is left for the next run, and
    # the table's log has no RESTORE
    tables = {str(r[1]) for r in server.query(f"show tables in {SCHEMA}")}
    assert [t for t in tables if t.startswith("mcut__dbt_lease_")], tables
    history = server.query(f"describe history {SCHEMA}.mcut")
    assert not [row for row in history if "RESTORE" in {str(v) for v in row}], history

    again = project.run(direct, "run", "--select", "mcut", *v2, env=LEASE_TAKER)
    assert again.returncode == 0, again.stdout + again.stderr
    # the server may still commit the ALTER (Delta takes no transaction id for it): the record
    # stays, watched, so the model's next run RESTOREs a late one away (run-guarantees.md)
    assert_as_control(server, "mcut", "mcontrol", 6, watched=True)


PARQUET_APPEND = """
{{ config(materialized='incremental', file_format='parquet', incremental_strategy='append') }}
{% if is_incremental() %}
select id from range({{ var('start', 3) }}, {{ var('start', 3) }} + 3)
{% else %}
select id from range(0, 3)
{% endif %}
"""


def test_a_parquet_load_whose_answer_is_lost_holds_the_model_until_it_has_ended(
    server: Server, proxy: Proxy, tmp_path: Path
) -> None:
    """A Parquet append (no change in steps) whose connection drops right after it sent its
    load: the server may still run it, and a Parquet table keeps no log a late write could be
    fenced off or taken back by. Sent to a server, the load is made under the run's record
    (its lease held alone, its intent written first), which stays unreleased: the run fails
    with `StepUnanswered`. The next run loads nothing: once that
    lease ran out it refuses it (`UnguardedTakeover`, naming the record and the repair by
    hand), the table as it was. Released by hand as the error says, once the statement has
    ended on the server, the run after loads: the table holds the first rows, the lost load's
    if it landed, and that run's, each once, and no record is left. (Before 2026-12-01 the run
    let go of its lease at once, and a late statement could land over a later run's load.)"""
    project = Project(tmp_path / "p", {"pcut.sql": PARQUET_APPEND})
    direct = target(server)
    first = project.run(direct, "run")
    assert first.returncode == 0, first.stdout + first.stderr
    relation = f"{SCHEMA}.pcut"

    load = rb"insert\s+(into|overwrite)\s+(table\s+)?[`\w.]*pcut`?\s"
    lost = run_cut_off(project, server, proxy, (load,))
    assert "keeps no log to fence off" in lost.stdout, lost.stdout
    tables = {str(r[1]) for r in server.query(f"show tables in {SCHEMA}")}
    records = [t for t in tables if t.startswith("pcut__dbt_lease_")]
    assert len(records) == 1, tables
    before = sorted(r[0] for r in server.query(f"select id from {relation}"))
    assert before in ([0, 1, 2], [0, 1, 2, 3, 4, 5]), before  # the lost load landed, or not

    refused = project.run(direct, "run", "--vars", "{start: 6}", env=LEASE_5S)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "may still run a statement" in refused.stdout, refused.stdout
    assert_no_traceback(refused.stdout + refused.stderr)
    assert sorted(r[0] for r in server.query(f"select id from {relation}")) == before
    by_hand = re.search(
        r"release its lease, (ALTER TABLE \S+ SET TBLPROPERTIES \([^)]*\))", refused.stdout
    )
    assert by_hand is not None and records[0] in by_hand.group(1), refused.stdout
    server.query(by_hand.group(1))

    again = project.run(direct, "run", "--vars", "{start: 6}", env=LEASE_TAKER)
    assert again.returncode == 0, again.stdout + again.stderr
    after = sorted(r[0] for r in server.query(f"select id from {relation}"))
    assert after == sorted(before + [6, 7, 8]), after
    tables = {str(r[1]) for r in server.query(f"show tables in {SCHEMA}")}
    assert not [t for t in tables if t.startswith("pcut__dbt_lease_")], tables


SLOW_BACKFILL = """
{{ config(materialized='incremental', file_format='delta', unique_key='id',
          schema_evolution=({'columns': {'twice': {'backfill':
            "id * 10 + 0 * aggregate(sequence(id, id + " ~ var('work', 0)
            ~ "), 0L, (a, x) -> a + x)"}}} if var('v', 1) != 1 else {})) }}
{% if var('v', 1) == 1 %}
select id from range(0, {{ var('rows', 3) }}, 1, {{ var('partitions', 1) }})
{% else %}
select id, id * 10 as twice from range(3, 6)
{% endif %}
"""


def test_ctrl_c_in_a_fenced_write_leaves_its_session(server: Server, tmp_path: Path) -> None:
    """Ctrl-C while a multi-step Delta run's backfill UPDATE (a write under its lease's
    transaction id) runs on the server: the server answers "cancelled" at once, and the
    statement may still commit, reading the id from its session when it does. So the run
    leaves that session as it is (unsetting the id there could let the write commit with
    none, which no marker fences off) and its undo runs in a new session. The table ends as
    the control's once the next run repaired and loaded, and no record is left."""
    project = Project(tmp_path / "p", {"mslow.sql": SLOW_BACKFILL, "mctl.sql": SLOW_BACKFILL})
    profile = target(server)
    parts = 8
    first = project.run(profile, "run", "--vars", _vars(rows=400, partitions=parts))
    assert first.returncode == 0, first.stdout + first.stderr
    control = project.run(profile, "run", "--select", "mctl", "--vars", _vars(v=2))
    assert control.returncode == 0, control.stdout + control.stderr

    # an UPDATE takes deterministic expressions only (no sleep): a sum over 2 M numbers a row
    slow = _vars(v=2, work=2_000_000)
    process = project.start(profile, "run", "--select", "mslow", "--vars", slow, env=LEASE_5S)
    try:
        log_file = project.root / "logs" / "dbt.log"
        deadline = time.monotonic() + 240
        # the backfill sent (it takes 20 s or more): the statement's own line, not the plan's
        while "\nUPDATE resilience.mslow" not in (
            log_file.read_text() if log_file.exists() else ""
        ):
            assert process.poll() is None and time.monotonic() < deadline, project.output()
            time.sleep(0.5)
        time.sleep(3)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = project.output()
    assert process.returncode != 0, output
    log = log_file.read_text()
    assert SESSION_LEFT in log, log[-6000:]
    # the undo after it, in the new session: the marker under the run's id, then the restore
    after = log[log.index(SESSION_LEFT) :]
    assert "fenced off the writes of" in after, after
    assert "restore table resilience.mslow" in after.split("fenced off the writes of")[1], after
    wait_until_idle(server)

    again = project.run(profile, "run", "--select", "mslow", "--vars", _vars(v=2), env=LEASE_TAKER)
    assert again.returncode == 0, again.stdout + again.stderr
    assert_as_control(server, "mslow", "mctl", 400)


def test_server_lost_in_the_middle_of_a_run(server: Server, proxy: Proxy, tmp_path: Path) -> None:
    project = Project(tmp_path / "p", {"lost.sql": INCREMENTAL})
    profile = target(server, port=proxy.port, connect_retries=1, connect_timeout=1)
    first = project.run(profile, "run")
    assert first.returncode == 0, first.stdout + first.stderr

    with project.loading(server, profile, 8, rows=400, partitions=8, sleep_ms=50) as process:
        proxy.stop()  # the server is gone for dbt
        process.wait(timeout=120)
    output = project.output()
    assert process.returncode == 1, output
    assert f"{label(server, proxy.port)}: lost the connection to the server" in output, output
    assert_no_traceback(output)

    # and the stopped server (nothing listens there any more) on the next run
    again = project.run(profile, "run")
    assert again.returncode != 0
    text = again.stdout + again.stderr
    assert f"{label(server, proxy.port)}: could not connect" in text, text
    assert_no_traceback(text)


@pytest.mark.profile("connect")
@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_connect_over_tls(server: Server, tmp_path: Path) -> None:
    """`use_ssl: true` with the token: the run goes through TLS when the client trusts the
    server's certificate (gRPC's root file), and fails as one error naming method and server
    when it does not."""
    cert, key = self_signed_certificate(tmp_path)
    proxy = TlsProxy(server.port, cert, key)
    try:
        project = Project(tmp_path / "p", {"over_tls.sql": "select 1 as id"})
        profile = target(server, port=proxy.port, use_ssl=True)
        trusted = project.run(profile, "run", env={"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(cert)})
        assert trusted.returncode == 0, trusted.stdout + trusted.stderr
        assert proxy.handshakes >= 1
        assert server.query(f"select id from {SCHEMA}.over_tls") == [(1,)]

        untrusted = project.run(profile, "run")  # the default roots do not know the certificate
        text = untrusted.stdout + untrusted.stderr
        assert untrusted.returncode != 0, text
        assert f"{label(server, proxy.port)}: could not connect" in text, text
        assert TOKEN not in text
        assert_no_traceback(text)
    finally:
        proxy.stop()


@pytest.mark.parametrize("command", ["run", "debug"])
def test_wrong_port_is_one_error_naming_method_and_server(
    server: Server, tmp_path: Path, command: str
) -> None:
    port = free_port()
    project = Project(tmp_path / "p", {"m.sql": "select 1 as id"})
    result = project.run(target(server, port=port), command, timeout=120)
    text = result.stdout + result.stderr
    assert result.returncode != 0, text
    assert text.count(f"{label(server, port)}: could not connect") == 1, text
    assert_no_traceback(text)


@pytest.mark.profile("connect")
@pytest.mark.parametrize("token", ["wrong-token", None])
def test_connect_token(server: Server, tmp_path: Path, token: Optional[str]) -> None:
    project = Project(tmp_path / "p", {"m.sql": "select 1 as id"})
    refused = project.run(target(server, token=token), "run", timeout=120)
    text = refused.stdout + refused.stderr
    assert refused.returncode != 0, text
    assert f"{label(server, server.port)}: could not connect: UNAUTHENTICATED" in text, text
    assert TOKEN not in text and "wrong-token" not in text
    assert_no_traceback(text)

    accepted = project.run(target(server), "run", timeout=120)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert server.query(f"select id from {SCHEMA}.m") == [(1,)]
