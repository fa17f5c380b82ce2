"""The local cluster's pure parts (no Spark): the commands it runs, cluster.json, and which
processes it may signal (real short-lived `sleep` processes stand in for its JVMs)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.connection.session import EmbeddedSparkConfig
from spark_contracts_dev import cluster as local_cluster
from spark_contracts_dev.cluster import Cluster, Sizing, cluster_conf
from spark_contracts_dev.procs import (
    ProcessInfo,
    ProcessRecord,
    is_same_process,
    parse_stat,
    process_table,
    processes_to_stop,
    read_process,
    record_of,
    signal_and_wait,
)
from spark_contracts_dev.servers import server_command

JARS = (
    "delta-spark_2.13-4.3.1.jar",
    "delta-storage-4.3.1.jar",
    "iceberg-spark-runtime-4.1_2.13-1.12.0.jar",
    "derbynet-10.16.1.1.jar",
    "derbyclient-10.16.1.1.jar",
)


LLAP = ("hive-llap-common-2.3.10.jar", "hive-llap-client-2.3.10.jar")


def _confs(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


@pytest.fixture
def jars_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "jars"
    folder.mkdir()
    for name in JARS:
        (folder / name).write_bytes(b"PK")
    (folder / "thrift").mkdir()  # Hive's LLAP jars, there: nothing is fetched
    for name in LLAP:
        (folder / "thrift" / name).write_bytes(b"PK")
    return folder


# ---- commands ------------------------------------------------------------------------------


def test_local_server_command_is_unchanged_by_the_cluster_options(tmp_path, jars_dir):
    config = EmbeddedSparkConfig(warehouse_dir=tmp_path / "wh", jars_dir=jars_dir)
    command = server_command("connect", 15002, config)
    conf = _confs(command)
    assert command[-1] == "spark-internal"
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.connect.grpc.binding.port"] == "15002"
    assert "spark.connect.grpc.binding.address" not in conf  # every interface, Spark's default
    assert conf["spark.driver.extraClassPath"].split(":") == [str(jars_dir / n) for n in JARS[:3]]
    assert "jdbc:derby:;databaseName=" in conf["spark.hadoop.javax.jdo.option.ConnectionURL"]
    thrift = server_command("thrift", 10000, config)
    assert "hive.server2.thrift.bind.host=localhost" in thrift
    assert "hive.server2.thrift.port=10000" in thrift
    # a Thrift server's driver has Hive's LLAP jars too (a session's close hangs without them)
    thrift_path = _confs(thrift)["spark.driver.extraClassPath"].split(":")
    assert thrift_path[3:] == [str(jars_dir / "thrift" / n) for n in LLAP]


def test_cluster_server_command(tmp_path, jars_dir):
    config = EmbeddedSparkConfig(warehouse_dir=tmp_path / "wh", jars_dir=jars_dir)
    extra = cluster_conf("thrift", "spark://127.0.0.1:7077", 1527, "metastore", Sizing())
    command = server_command(
        "thrift",
        10001,
        config,
        host="127.0.0.1",
        extra_conf=extra,
        extra_class_path=[jars_dir / "derbyclient-10.16.1.1.jar"],
    )
    conf = _confs(command)
    assert command[:3][1:] == ["--class", local_cluster.MAIN_CLASSES["thrift"]]
    assert conf["spark.master"] == "spark://127.0.0.1:7077"
    # shipped to the executors, and on the driver's class path with the metastore's client
    assert conf["spark.jars"].split(",") == [str(jars_dir / n) for n in JARS[:3]]
    assert conf["spark.driver.extraClassPath"].split(":") == [
        str(jars_dir / n) for n in JARS[:3] + JARS[4:]
    ] + [str(jars_dir / "thrift" / n) for n in LLAP]
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == (
        "jdbc:derby://127.0.0.1:1527/metastore;create=true"
    )
    assert conf["spark.hadoop.javax.jdo.option.ConnectionDriverName"] == (
        "org.apache.derby.jdbc.ClientDriver"
    )
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf["spark.sql.warehouse.dir"] == str(tmp_path / "wh")
    assert conf["spark.sql.catalog.iceberg.warehouse"] == str(tmp_path / "wh" / "iceberg")
    assert (conf["spark.cores.max"], conf["spark.executor.cores"]) == ("2", "1")
    assert conf["spark.executor.memory"] == "1g"
    assert conf["spark.driver.memory"] == Sizing().server_memory == "2g"
    assert "hive.server2.thrift.bind.host=127.0.0.1" in command
    connect = _confs(server_command("connect", 15003, config, host="127.0.0.1", extra_conf=extra))
    assert connect["spark.connect.grpc.binding.address"] == "127.0.0.1"


def test_sizing_lets_both_servers_run_executors_at_once():
    sizing = Sizing()
    apps = 2
    executors_per_app = sizing.app_cores_max // sizing.executor_cores
    assert apps * executors_per_app * sizing.executor_cores <= sizing.workers * sizing.worker_cores
    memory = int(sizing.executor_memory.rstrip("g")) * apps * executors_per_app
    assert memory <= sizing.workers * int(sizing.worker_memory.rstrip("g"))


def test_daemon_commands(tmp_path):
    master = local_cluster.master_command(7077, 8080)
    assert master[1:] == [
        local_cluster.MASTER_CLASS,
        "--host",
        "127.0.0.1",
        "--port",
        "7077",
        "--webui-port",
        "8080",
    ]
    assert master[0].endswith("bin/spark-class")
    worker = local_cluster.worker_command("spark://127.0.0.1:7077", 8081, tmp_path, Sizing())
    assert worker[1] == local_cluster.WORKER_CLASS and worker[-1] == "spark://127.0.0.1:7077"
    assert worker[worker.index("--cores") + 1] == "2"
    assert worker[worker.index("--memory") + 1] == "2g"
    assert worker[worker.index("--work-dir") + 1] == str(tmp_path)
    derby = local_cluster.derby_command("java", [Path("a.jar"), Path("b.jar")], 1527, tmp_path)
    assert derby[derby.index("-cp") + 1] == "a.jar:b.jar"
    assert f"-Dderby.system.home={tmp_path}" in derby
    assert derby[derby.index(local_cluster.DERBY_CLASS) :] == [
        local_cluster.DERBY_CLASS,
        "start",
        "-h",
        "127.0.0.1",
        "-p",
        "1527",
        "-noSecurityManager",
    ]


# ---- cluster.json --------------------------------------------------------------------------

records = st.builds(
    ProcessRecord,
    name=st.sampled_from(["derby", "master", "worker-1", "thrift", "connect"]),
    pid=st.integers(1, 2**22),
    start_time=st.integers(0, 2**40),
    marker=st.text(min_size=1, max_size=30),
    log=st.text(max_size=40),
)
ports = st.integers(1024, 65535)


@given(
    processes=st.lists(records, max_size=6).map(tuple),
    thrift=st.none() | ports,
    connect=st.none() | ports,
    workers=st.lists(ports, max_size=3).map(tuple),
    directory=st.text(min_size=1, max_size=20),
)
def test_cluster_json_round_trip(processes, thrift, connect, workers, directory):
    cluster = Cluster(
        dir=directory,
        master_url="spark://127.0.0.1:7077",
        master_web_ui_port=8080,
        derby_port=1527,
        warehouse_dir=f"{directory}/warehouse",
        thrift_port=thrift,
        connect_port=connect,
        processes=processes,
        worker_web_ui_ports=workers,
    )
    assert Cluster.from_json(cluster.to_json()) == cluster


def test_profiles_yml_names_both_servers():
    cluster = Cluster("d", "spark://127.0.0.1:1", 2, 3, "d/wh", thrift_port=4, connect_port=5)
    outputs = yaml.safe_load(cluster.profiles_yml("s"))["spark_cluster"]["outputs"]
    assert outputs["thrift"] == {
        "type": "spark_contracts",
        "method": "thrift",
        "host": "127.0.0.1",
        "port": 4,
        "user": "dbt",
        "schema": "s",
        "threads": 4,
    }
    assert outputs["connect"]["host"] == "sc://127.0.0.1:5"
    only_connect = Cluster("d", "spark://127.0.0.1:1", 2, 3, "d/wh", connect_port=5)
    profile = yaml.safe_load(only_connect.profiles_yml())["spark_cluster"]
    assert profile["target"] == "connect" and list(profile["outputs"]) == ["connect"]


# ---- the same process? ---------------------------------------------------------------------


def test_parse_stat_with_parentheses_and_spaces_in_the_name():
    fields = ["S", "41", "40"] + [str(i) for i in range(6, 22)] + ["987654", "0", "0"]
    text = "123 (java (x) y) " + " ".join(fields)
    assert parse_stat(text) == ("S", 41, 40, 987654)


REC = ProcessRecord("worker-1", 100, 5000, "org.apache.spark.deploy.worker.Worker", "w.log")


@pytest.mark.parametrize(
    "info, same",
    [
        (
            ProcessInfo(
                100,
                1,
                100,
                5000,
                "S",
                "java ... org.apache.spark.deploy.worker.Worker --host",
                "/c",
            ),
            True,
        ),
        (None, False),  # gone
        (
            ProcessInfo(
                100, 1, 100, 7000, "S", "java ... org.apache.spark.deploy.worker.Worker", "/c"
            ),
            False,
        ),
        (ProcessInfo(100, 1, 100, 5000, "S", "/usr/bin/vim notes.txt", "/c"), False),
        (
            ProcessInfo(
                101, 1, 100, 5000, "S", "java ... org.apache.spark.deploy.worker.Worker", "/c"
            ),
            False,
        ),
    ],
    ids=["same", "gone", "pid_reused_later", "other_command", "other_pid"],
)
def test_is_same_process(info, same):
    assert is_same_process(REC, info) is same


def test_a_real_process_is_itself_until_it_ends(tmp_path):
    process = subprocess.Popen(["sleep", "30"], cwd=tmp_path)
    try:
        record = record_of("thrift", process.pid, "sleep", tmp_path / "log")
        # right after the start the child may still exec `sleep` (an empty command line)
        assert is_same_process(record, read_process(process.pid))
        assert read_process(process.pid).cwd == str(tmp_path)
        assert not is_same_process(
            ProcessRecord("thrift", process.pid, record.start_time + 1, "sleep", ""),
            read_process(process.pid),
        )
    finally:
        process.kill()
        process.wait()
    assert read_process(process.pid) is None
    assert not is_same_process(record, read_process(process.pid))


def test_a_process_in_the_middle_of_an_exec_is_still_itself():
    record = ProcessRecord("thrift", 7, 100, "HiveThriftServer2", "")
    assert is_same_process(record, ProcessInfo(7, 1, 7, 100, "R", "", "/"))
    assert is_same_process(record, ProcessInfo(7, 1, 7, 100, "S", "java HiveThriftServer2", "/"))
    assert not is_same_process(record, ProcessInfo(7, 1, 7, 100, "S", "python other.py", "/"))
    assert not is_same_process(record, ProcessInfo(7, 1, 7, 101, "R", "", "/"))


def _info(pid, ppid, pgid, cwd, cmd="java", start=1):
    return ProcessInfo(pid, ppid, pgid, start, "S", cmd, cwd)


def test_processes_to_stop_takes_children_and_orphans_inside_the_folder():
    worker = ProcessRecord("worker-1", 10, 1, "Worker", "")
    reused = ProcessRecord("thrift", 20, 1, "HiveThriftServer2", "")
    dead = ProcessRecord("worker-2", 30, 1, "Worker", "")
    table = [
        _info(10, 1, 10, "/c", "java Worker"),
        _info(11, 10, 10, "/c/work/worker-1/app/0"),  # its executor
        _info(12, 11, 10, "/c/work/worker-1/app/0"),  # the executor's child
        _info(13, 10, 10, "/elsewhere"),  # not in the cluster's folder: left alone
        _info(20, 1, 20, "/c", "vim", start=9),  # pid 20 reused by someone else
        _info(31, 1, 30, "/c/work/worker-2/app/1"),  # executor orphaned by a killed worker
        _info(32, 1, 99, "/c/work/x"),  # another group
        _info(40, 1, 40, "/cluster-other"),  # a sibling folder's name shares the prefix
    ]
    assert processes_to_stop([worker, reused, dead], table, "/c") == [10, 11, 12, 31]


def test_signal_and_wait_kills_what_ignores_sigterm(tmp_path):
    polite = subprocess.Popen(["sleep", "60"])
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, "
            "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert stubborn.stdout.readline().strip() == "ready"
    killed = signal_and_wait([polite.pid, stubborn.pid], timeout=1.0)
    assert killed == [stubborn.pid]  # the polite one ended on SIGTERM
    assert read_process(polite.pid) is None and read_process(stubborn.pid) is None


def test_stop_ends_recorded_processes_and_their_children_only(tmp_path):
    folder = tmp_path / "cluster"
    (folder / "work").mkdir(parents=True)
    started = []

    def launch(name, script):
        process = subprocess.Popen(["bash", "-c", script], cwd=folder, start_new_session=True)
        started.append(process)
        time.sleep(0.2)
        return record_of(name, process.pid, "sleep", folder / f"{name}.log")

    # a "worker" whose child runs in the work folder, like an executor
    worker = launch("worker-1", "(cd work && exec sleep 60) & wait; : sleep")
    thrift = launch("thrift", "exec sleep 60")
    bystander = subprocess.Popen(["sleep", "60"], cwd=folder)  # same folder, not ours
    cluster = Cluster(
        str(folder), "spark://127.0.0.1:1", 2, 3, str(folder / "wh"), processes=(worker, thrift)
    )
    cluster.state_file.write_text(cluster.to_json())
    try:
        children = [p.pid for p in process_table() if p.pgid == worker.pid and p.pid != worker.pid]
        assert children
        assert local_cluster.load(folder) == cluster
        assert cluster.alive() == {"worker-1": True, "thrift": True}
        cluster.stop(timeout=5)
        for pid in [worker.pid, thrift.pid, *children]:
            assert read_process(pid) is None, pid
        assert bystander.poll() is None
        assert not cluster.state_file.exists()
    finally:
        bystander.kill()
        for process in started:
            process.kill()
        for process in [bystander, *started]:
            process.wait()


def test_cli_without_a_cluster(tmp_path, capsys):
    assert local_cluster.main(["status", "--dir", str(tmp_path)]) == 1
    assert local_cluster.main(["stop", "--dir", str(tmp_path)]) == 0
    assert "cluster.json absent" in capsys.readouterr().out


@given(st.integers(1024, 64000), st.integers(0, 1500))
def test_port_candidates_stay_outside_the_ephemeral_range(low, width):
    from spark_contracts_dev.servers import port_candidates

    high = min(low + width, 65535)
    candidates = port_candidates(low, high)
    assert len(candidates) > 0
    assert all(not (low <= port <= high) for port in (candidates[0], candidates[-1]))
    assert 1024 <= candidates[0] and candidates[-1] <= 65535


def test_ephemeral_range_reads_the_kernel_setting_or_falls_back():
    from spark_contracts_dev.servers import ephemeral_range

    assert ephemeral_range("32768\t60999\n") == (32768, 60999)
    assert ephemeral_range("40000 50000") == (40000, 50000)
    assert ephemeral_range("garbage") == (32768, 60999)


def test_free_port_is_outside_the_ephemeral_range_and_bindable():
    import socket

    from spark_contracts_dev.servers import ephemeral_range, free_port

    low, high = ephemeral_range()
    for _ in range(20):
        port = free_port()
        assert not (low <= port <= high)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_start_failure_prints_the_tail_of_the_failed_parts_log(tmp_path, monkeypatch, capsys):
    log = tmp_path / "connect.log"
    log.write_text("\n".join(f"line {i}" for i in range(100)) + "\nBindException: Address in use\n")

    def failing_start(*args, **kwargs):
        raise local_cluster.ClusterError(f"connect exited before port 1; see {log}", log)

    monkeypatch.setattr(local_cluster, "start", failing_start)
    assert local_cluster.main(["start", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "connect exited before port 1" in err
    assert "BindException: Address in use" in err and "line 99" in err
    assert "line 10\n" not in err  # the tail, not the whole log
