"""A real standalone cluster: its lifecycle, the metastore its Thrift and Connect servers share,
and a `dbt run` that loses a worker (and its executors, SIGKILL) while it loads; the worker is
started again afterwards (`cluster.restart_worker`), so the cluster serves the tests after it.

`TestCluster` runs on the cluster `make cluster-ci` / `make cluster-test` share
($DBT_SPARK_CONTRACTS_CLUSTER), or on one of its own when none is named; it runs once, in the
thrift pass (its profile is its own whatever --profile says), its tests in this order on one
xdist worker (`--dist loadscope` keeps a class on one worker). `TestOwnClusterStop` starts and
stops a cluster of its own (make cluster-test only).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_contracts_dev import cluster as local_cluster
from spark_contracts_dev.procs import process_table, read_process
from tests.functional.conftest import running_cluster

pytestmark = [pytest.mark.profile("thrift")]

DBT = str(Path(sys.executable).with_name("dbt"))
FIRST_ROWS = 10
NEW_ROWS = 240  # 24 partitions of 10 rows, 0.2 s a row: ~2 s a task, ~25 s on two cores
SLOW_MODEL = """
{{{{ config(materialized='incremental', incremental_strategy='append', file_format='{fmt}') }}}}
{{% if var('v', 1) == 1 %}}
select id, 'first' as s from range(0, {first})
{{% else %}}
select id, reflect('java.lang.Thread', 'sleep', cast(200 as bigint)) as s
from range({first}, {last}, 1, 24)
{{% endif %}}
"""
# The same load under a contract that discards every fifth row into the quarantine: the
# discarded rows go from the executors to the run's pending table, then the quarantine.
SLOW_QUARANTINE_MODEL = """
{{{{ config(materialized='incremental', incremental_strategy='append', file_format='{fmt}',
          schema_contract={{'data_type': 'discard_row', 'quarantine': true}}) }}}}
{{% if var('v', 1) == 1 %}}
select id, 'first' as s, cast(id as bigint) as n from range(0, {first})
{{% else %}}
select id, reflect('java.lang.Thread', 'sleep', cast(200 as bigint)) as s,
       if(id % 5 = 0, concat('bad-', cast(id as string)), cast(id as string)) as n
from range({first}, {last}, 1, 24)
{{% endif %}}
"""
MODELS = {
    **{
        f"slow_{fmt}.sql": SLOW_MODEL.format(fmt=fmt, first=FIRST_ROWS, last=FIRST_ROWS + NEW_ROWS)
        for fmt in ("delta", "iceberg")
    },
    **{
        f"slow_q_{fmt}.sql": SLOW_QUARANTINE_MODEL.format(
            fmt=fmt, first=FIRST_ROWS, last=FIRST_ROWS + NEW_ROWS
        )
        for fmt in ("delta", "iceberg")
    },
}
NEW_IDS = range(FIRST_ROWS, FIRST_ROWS + NEW_ROWS)
DISCARDED = [i for i in NEW_IDS if i % 5 == 0]


# Session-scoped: under xdist another module's tests may run between two of these on the same
# worker, which would tear a class-scoped cluster down and start a second one.
@pytest.fixture(scope="session")
def own_cluster(tmp_path_factory: pytest.TempPathFactory):
    began = time.monotonic()
    cluster = local_cluster.start(tmp_path_factory.mktemp("cluster"))
    print(f"own cluster up in {time.monotonic() - began:.0f}s")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def cluster_under_test(request: pytest.FixtureRequest):
    """The shared cluster when one is named, else a cluster of this module's own."""
    shared = running_cluster()
    return shared if shared is not None else request.getfixturevalue("own_cluster")


@pytest.fixture(scope="class")
def warehouse_dir(cluster_under_test) -> str:
    return cluster_under_test.warehouse_dir


@pytest.fixture(scope="class")
def dbt_profile_target(cluster_under_test) -> dict:
    return {
        "type": "spark_contracts",
        "method": "thrift",
        "host": "127.0.0.1",
        "port": cluster_under_test.thrift_port,
        "user": "dbt",
        "threads": 4,
    }


def _connect_session(cluster):
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(f"sc://127.0.0.1:{cluster.connect_port}").getOrCreate()


def _ids(project, relation: str) -> list[int]:
    rows = project.run_sql(f"select id from {relation} order by id", fetch="all")
    return [int(r[0]) for r in rows]


def _commits(project, fmt: str, relation: str) -> list[tuple[str, str]]:
    """(version, operation) of every Delta commit / (snapshot id, operation) of every Iceberg
    snapshot, oldest first."""
    if fmt == "delta":
        rows = project.run_sql(f"describe history {relation}", fetch="all")
        return [(str(r[0]), str(r[4])) for r in sorted(rows, key=lambda r: int(r[0]))]
    rows = project.run_sql(
        f"select committed_at, snapshot_id, operation from {relation}.snapshots", fetch="all"
    )
    return [(str(r[1]), str(r[2])) for r in sorted(rows, key=lambda r: str(r[0]))]


def _data_files(table_dir: Path) -> int:
    return sum(1 for _ in table_dir.rglob("*.parquet")) if table_dir.exists() else 0


class TestCluster:
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    def test_lifecycle_and_shared_metastore(self, project, cluster_under_test):
        own_cluster = cluster_under_test
        state_file = Path(own_cluster.dir) / local_cluster.STATE_FILE
        assert local_cluster.Cluster.from_json(state_file.read_text()) == own_cluster
        assert own_cluster.alive() == {p.name: True for p in own_cluster.processes}
        assert sorted(own_cluster.alive()) == sorted(
            ["derby", "master", "worker-1", "worker-2", "thrift", "connect"]
        )

        master = own_cluster.master_state()
        # a worker lost and started again (test_worker_loss_during_load) stays listed as DEAD
        assert [w["state"] for w in master["workers"] if w["state"] != "DEAD"] == [
            "ALIVE",
            "ALIVE",
        ]
        apps = {a["name"]: a for a in master["activeapps"]}
        assert set(apps) == {"dbt-spark-contracts-thrift", "dbt-spark-contracts-connect"}
        assert {a["state"] for a in apps.values()} == {"RUNNING"}
        for index in (1, 2):  # both applications have an executor on each worker
            executors = own_cluster.worker_state(index)["executors"]
            assert {e["appdesc"]["name"] for e in executors} == set(apps), index

        schema = project.test_schema
        project.run_sql(f"create table {schema}.from_thrift using delta as select 1 as id")
        project.run_sql(f"create namespace if not exists iceberg.{schema}")
        project.run_sql(
            f"create table iceberg.{schema}.from_thrift_ice using iceberg as select 2 as id"
        )
        spark = _connect_session(own_cluster)
        try:
            assert spark.sql(f"select id from {schema}.from_thrift").collect()[0][0] == 1
            assert (
                spark.sql(f"select id from iceberg.{schema}.from_thrift_ice").collect()[0][0] == 2
            )
            spark.sql(f"create table {schema}.from_connect using delta as select 3 as id")
        finally:
            spark.stop()
        assert _ids(project, f"{schema}.from_connect") == [3]
        table_dir = Path(own_cluster.warehouse_dir) / f"{schema}.db" / "from_connect"
        assert (table_dir / "_delta_log").is_dir()  # written into the shared warehouse

    def test_worker_loss_during_load(self, project, cluster_under_test):
        """SIGKILL a worker and its executors while both models load: the run either succeeds
        (Spark retried the lost tasks; every new row once) or fails with each table as before.
        The worker is started again afterwards, and both applications get executors on it."""
        try:
            self._lose_a_worker(project, cluster_under_test)
        finally:
            local_cluster.restart_worker(local_cluster.load(Path(cluster_under_test.dir)), 1)
        restarted = local_cluster.load(Path(cluster_under_test.dir))
        assert restarted is not None and all(restarted.alive().values()), restarted
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the master gives the applications executors again
            executors = restarted.worker_state(1)["executors"]
            if len({e["appdesc"]["name"] for e in executors}) == 2:
                break
            time.sleep(1)
        assert {e["appdesc"]["name"] for e in executors} == {
            "dbt-spark-contracts-thrift",
            "dbt-spark-contracts-connect",
        }

    def _lose_a_worker(self, project, own_cluster) -> None:
        from dbt.tests.util import run_dbt

        schema = project.test_schema
        run_dbt(["run"])
        relations = {"delta": f"{schema}.slow_delta", "iceberg": f"iceberg.{schema}.slow_iceberg"}
        for fmt in ("delta", "iceberg"):  # the quarantining models' tables, built by the v1 run
            relation = (
                f"{schema}.slow_q_{fmt}" if fmt == "delta" else f"iceberg.{schema}.slow_q_{fmt}"
            )
            assert _ids(project, relation) == list(range(FIRST_ROWS))
        table_dirs = {
            "delta": Path(own_cluster.warehouse_dir) / f"{schema}.db" / "slow_delta",
            "iceberg": Path(own_cluster.warehouse_dir) / "iceberg" / schema / "slow_iceberg",
        }
        before = {
            fmt: (_ids(project, rel), _commits(project, fmt, rel)) for fmt, rel in relations.items()
        }
        assert all(ids == list(range(FIRST_ROWS)) for ids, _ in before.values())
        files_before = {fmt: _data_files(d) for fmt, d in table_dirs.items()}

        run = subprocess.Popen(
            [DBT, "run", "--vars", "{v: 2}", "--project-dir", str(project.project_root)]
            + ["--profiles-dir", str(project.profiles_dir)],
            cwd=project.project_root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        # loading: both tables have new (uncommitted) data files
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and run.poll() is None:
            if all(_data_files(d) > files_before[f] for f, d in table_dirs.items()):
                break
            time.sleep(0.2)
        assert run.poll() is None, "the run ended before the kill: make the load slower"
        worker = own_cluster.process("worker-1")
        executors = [p.pid for p in process_table() if p.ppid == worker.pid]
        assert executors, "worker-1 runs no executor"
        for pid in [worker.pid, *executors]:
            os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        output, _ = run.communicate(timeout=900)
        print(f"dbt run ended {time.monotonic() - killed_at:.0f}s after the kill: {run.returncode}")
        assert all(read_process(pid) is None for pid in [worker.pid, *executors])

        for fmt, relation in relations.items():
            ids = _ids(project, relation)
            commits = _commits(project, fmt, relation)
            old_ids, old_commits = before[fmt]
            if run.returncode == 0:
                assert ids == list(range(FIRST_ROWS + NEW_ROWS)), (fmt, len(ids))  # each once
                new = commits[len(old_commits) :]
                assert commits[: len(old_commits)] == old_commits, fmt
                data_commits = [op for _, op in new if op in ("WRITE", "append")]
                assert len(data_commits) == 1, (fmt, new)
            else:
                assert ids == old_ids, (fmt, output[-3000:])
                assert commits == old_commits, (fmt, commits)
        # the quarantining models: every row once, in the table or in the quarantine, and the
        # run's count exact, whatever Spark re-ran after the executors were lost
        results = {}
        if run.returncode == 0:
            path = Path(project.project_root) / "target" / "run_results.json"
            results = {
                r["unique_id"].split(".")[-1]: r["adapter_response"]
                for r in json.loads(path.read_text())["results"]
            }
        for fmt in ("delta", "iceberg"):
            relation = f"{schema}.slow_q_{fmt}"
            if fmt == "iceberg":
                relation = f"iceberg.{relation}"
            kept = [i for i in NEW_IDS if i % 5 != 0]
            quarantined = _ids(project, f"{relation}__quarantine") if run.returncode == 0 else []
            if run.returncode == 0:
                assert _ids(project, relation) == list(range(FIRST_ROWS)) + kept, fmt
                assert quarantined == DISCARDED, (fmt, quarantined)
                assert results[f"slow_q_{fmt}"]["rows_discarded"] == len(DISCARDED), results
            else:
                assert _ids(project, relation) in (
                    list(range(FIRST_ROWS)),
                    list(range(FIRST_ROWS)) + kept,
                ), (fmt, output[-3000:])
        master = own_cluster.master_state()
        alive = sum(w["state"] == "ALIVE" for w in master["workers"])
        assert alive == len(own_cluster.worker_web_ui_ports) - 1, master["workers"]


class TestOwnClusterStop:
    def test_stop_ends_every_process(self, own_cluster):
        groups = {p.pid for p in own_cluster.processes}
        own_cluster.stop()
        assert not (Path(own_cluster.dir) / local_cluster.STATE_FILE).exists()
        left = [p for p in process_table() if p.pgid in groups or p.pid in groups]
        assert left == []
        assert local_cluster.load(Path(own_cluster.dir)) is None


def test_start_failure_names_the_part_and_stops_what_started(tmp_path):
    """A worker that cannot start (a memory size Spark rejects): the error names it and its
    log, and the metastore and master already started are stopped again."""
    with pytest.raises(local_cluster.ClusterError) as info:
        local_cluster.start(tmp_path, sizing=local_cluster.Sizing(worker_memory="2x"))
    message = str(info.value)
    worker = re.search(r"(worker-[12]) exited before 2 registered workers; see (\S+)", message)
    assert worker is not None, message
    assert worker.group(2) == str(tmp_path / "logs" / f"{worker.group(1)}.log")
    assert "Usage: Worker" in Path(worker.group(2)).read_text()  # Spark rejected its options
    assert not (tmp_path / local_cluster.STATE_FILE).exists()
    ours = [p for p in process_table() if p.cwd.startswith(str(tmp_path))]
    assert ours == []
