"""Fault injection: `kill -9` of a real `dbt run` at each commit of an evolving run, under every
`--profile` (session: the embedded Spark dies with dbt; thrift/connect: only the client dies).

For each kill point k, a `dbt run` of its own model is started as a process and killed with
SIGKILL as soon as the k-th new commit of its table appears (Delta: `_delta_log/N.json`; Iceberg:
`metadata/vN.metadata.json`). Over a server the statement in flight is not stopped by the
client's death: the test waits until the table's commits settle (no new commit for SETTLE
seconds). Then, read from the table's own log/metadata files (no Spark): the table is as before,
as after, or carries the dead run's intent. One more `dbt run` (all models, threads 4) must repair
every table that carries an intent first (reported in run_results), and every table must end
exactly like a control model that was never killed. A table killed mid-run that another writer
then commits to is not repaired over that commit: the run fails naming it, the commit stays.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

import pytest
import yaml

from dbt.adapters.spark_contracts import run as runs
from dbt.adapters.spark_contracts.core.recovery.pending import run_key
from dbt.adapters.spark_contracts.core.recovery.record import REPLACING_PROPERTY
from dbt.adapters.spark_contracts.run.lease import LEASE_ENV
from tests.functional.conftest import JVM_PARAMETERS, iceberg_rest

DBT = str(Path(sys.executable).with_name("dbt"))
INTENT = "dbt_spark_contracts.intent"
SETTLE = 8.0  # seconds without a new commit: the server has finished the dead client's statement
FOREIGN_KILL_POINT = 1  # the first change is on the table (the intent in the run's record)

MODELS = {
    # Delta: a default and a backfill make the change multi-step (feature, ADD COLUMNS, SET
    # DEFAULT, UPDATE, MERGE; the intent is in the run's record): every step is a commit.
    "delta": """
{{ config(materialized='incremental', file_format='delta', unique_key='id',
          schema_evolution=({'columns': {'note': {'default': "'n'"}, 'twice': {'backfill': 'id * 10'}}} if var('v', 1) != 1 else {})) }}
{% if var('v', 1) == 1 %}
select id from range(3)
{% else %}
select id, 'x' as note, id * 10 as twice from range(3, 6)
{% endif %}
""",
    # Iceberg: a new column is multi-step (ADD COLUMNS, MERGE snapshot; the intent in the record).
    "iceberg": """
{{ config(materialized='incremental', file_format='iceberg', unique_key='id', schema_evolution={}) }}
{% if var('v', 1) == 1 %}
select id from range(3)
{% else %}
select id, 'x' as note from range(3, 6)
{% endif %}
""",
}
KILL_POINTS = {"delta": 5, "iceberg": 2}

# Another writer's commit, tagged like a streaming job's, through the same connection method.
FOREIGN_WRITE = f"""
{{% macro foreign_write(table) %}}
  {{% do run_query("set `{runs.DELTA_USER_METADATA}`=`streaming-job`") %}}
  {{% do run_query("set `{runs.ICEBERG_SNAPSHOT_TAG}`=`streaming-job`") %}}
  {{% do run_query("insert into " ~ table ~ " (id) values (99)") %}}
{{% endmacro %}}
"""


# A killed run's lease (core/recovery/lease.py) is taken over at once where its process is gone
# on this host (the session); over a server it is watched until it runs out: this soon here
# (set for every dbt this test starts). Not shorter: a live run confirms its own lease before each
# step, and on a busy machine a beat (a commit to the lease table) can take seconds. Over a
# server, the product's default: there a beat took up to 12.7 s on the 2-core cluster under load
# (2026-11-29), longer than a 10-s lease lets a run stay sure of its lease (its fence then
# failed the retry with `LeaseLost`, unconfirmed).
SESSION_LEASE_SECONDS = 10.0
SERVER_LEASE_SECONDS = 30.0


def lease_seconds_for(config: pytest.Config) -> float:
    """The lease length the tests' dbt runs get under `--profile`."""
    if config.getoption("--profile") == "session":
        return SESSION_LEASE_SECONDS
    return SERVER_LEASE_SECONDS


@pytest.fixture(autouse=True)
def _short_leases(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEASE_ENV, str(lease_seconds_for(request.config)))


def kill_points(fmt: str) -> list[int]:
    """Every commit (`make faults`), or the middle and the last one (`make faults-ci`, which
    sets DBT_SPARK_CONTRACTS_KILL_SAMPLE to stay within the CI budget): mid-plan, and after the
    load before the run's record is dropped (its intent in it)."""
    last = KILL_POINTS[fmt]
    if os.environ.get("DBT_SPARK_CONTRACTS_KILL_SAMPLE"):
        return sorted({(last + 1) // 2, last})
    return list(range(1, last + 1))


class Project:
    def __init__(
        self,
        root: Path,
        fmt: str,
        kill_target: tuple,
        body: str = "",
        names=(),
    ):
        """`kill_target`: the profile's output (conftest's `dbt_profile_target`), where the
        tables' files are (the embedded session's or the local server's warehouse), and the
        Spark that reads them by path (the session method's) or None."""
        target, warehouse, self.reader = kill_target
        self.root, self.fmt, self.warehouse = root, fmt, warehouse
        self.runs = 0
        # a cluster's metastore and warehouse outlive the test session (and serve both methods'
        # passes and every xdist worker): a schema of this project's own
        self.schema = f"kills_{fmt}_{uuid.uuid4().hex[:8]}"
        (root / "models").mkdir(parents=True)
        (root / "macros").mkdir()
        (root / "macros" / "foreign_write.sql").write_text(FOREIGN_WRITE)
        (root / "dbt_project.yml").write_text(
            "name: kills\nversion: '1.0'\nprofile: kills\nconfig-version: 2\n"
        )
        output = dict(target, schema=self.schema, threads=4)
        profiles = {"kills": {"target": "dev", "outputs": {"dev": output}}}
        (root / "profiles.yml").write_text(yaml.safe_dump(profiles))
        kills = [f"kill_{k}" for k in range(1, KILL_POINTS[fmt] + 1)]
        self.names = list(names) or ["control", "foreign", *kills]
        for name in self.names:
            (root / "models" / f"{name}.sql").write_text(body or MODELS[fmt])

    def relation(self, table: str) -> str:
        prefix = "iceberg." if self.fmt == "iceberg" else ""
        return f"{prefix}{self.schema}.{table}"

    def dbt(
        self,
        *args: str,
        kill_at: int = 0,
        table: str = "",
        command: str = "run",
        kill_delay: float = 0.0,
        settle: bool = True,
    ) -> int:
        argv = [DBT, command, "--profiles-dir", str(self.root), *args]
        self.runs += 1  # each dbt's output kept beside the project, for a failure's story
        with open(self.root / f"dbt-{self.runs}.log", "wb") as out:
            process = subprocess.Popen(argv, cwd=self.root, stdout=out, stderr=subprocess.STDOUT)
        if kill_at:
            start = len(self.commits(table))
            deadline = time.monotonic() + 300
            while process.poll() is None and time.monotonic() < deadline:
                if len(self.commits(table)) - start >= kill_at:
                    time.sleep(kill_delay)  # the next statement has been sent
                    os.kill(process.pid, signal.SIGKILL)
                    break
                time.sleep(0.02)
        code = process.wait(timeout=600)
        if kill_at and settle:
            self.settle(table)
        return code

    def settle(self, table: str) -> None:
        """Wait until no new commit has appeared for SETTLE seconds: a server goes on with the
        statement the killed client sent (Spark Connect and the Thrift Server do not cancel an
        operation when its client disappears)."""
        seen, quiet_since = len(self.commits(table)), time.monotonic()
        deadline = quiet_since + 300
        while time.monotonic() - quiet_since < SETTLE:
            assert time.monotonic() < deadline, f"{table}: commits did not settle in 300 s"
            time.sleep(0.5)
            now = len(self.commits(table))
            if now != seen:
                seen, quiet_since = now, time.monotonic()

    def table_dir(self, table: str) -> Path:
        if self.fmt == "delta":
            return self.warehouse / f"{self.schema}.db" / table
        return self.warehouse / "iceberg" / self.schema / table

    def commits(self, table: str) -> list[Path]:
        if self.fmt == "delta":
            folder = self.table_dir(table) / "_delta_log"
            return sorted(folder.glob("[0-9]*.json")) if folder.exists() else []
        folder = self.table_dir(table) / "metadata"
        return sorted(folder.glob("v*.metadata.json")) if folder.exists() else []

    def history(self, table: str) -> list[tuple[int, str, str]]:
        """Delta: (version, operation, tag) of every commit, from the log files."""
        out = []
        for path in self.commits(table):
            for line in path.read_text().splitlines():
                info = json.loads(line).get("commitInfo")
                if info is not None:
                    tag = str(info.get("userMetadata") or "")  # the run's invocation id
                    run = tag.split(":")[1] if tag.count(":") >= 2 else tag
                    out.append((int(path.stem), str(info["operation"]), run))
        return out

    def state(self, table: str) -> tuple[list, bool]:
        """(schema fields, intent present) from the files: the table's schema, and whether a
        run's record of it (core/recovery/record.py, `<table>__dbt_lease_<run>`) carries an
        intent, or (an earlier build's) the table's own properties do."""
        schema, properties = self.meta(self.table_dir(table))
        records = self.table_dir(table).parent.glob(f"{table}__dbt_lease_*")
        # an intent cleared (an empty value: a record kept for its pending rows or a watch) is none
        intent = bool(properties.get(INTENT)) or any(
            self.meta(d, True)[1].get(INTENT) for d in records
        )
        return schema, intent

    def meta(self, folder: Path, being_made: bool = False) -> tuple[list, dict]:
        """(schema fields, properties) of the table at `folder`, from its own files;
        `being_made`: it may have no commit yet (a record a run is creating): none then."""
        if self.fmt == "delta":
            meta = None
            for path in sorted((folder / "_delta_log").glob("[0-9]*.json")):
                for line in path.read_text().splitlines():
                    action = json.loads(line)
                    if "metaData" in action:
                        meta = action["metaData"]
            if meta is None and being_made:
                return [], {}
            assert meta is not None, folder
            fields = json.loads(meta["schemaString"])["fields"]
            schema = [(f["name"], json.dumps(f["type"])) for f in fields]
            return schema, meta.get("configuration", {})
        metadata = folder / "metadata"
        # the newest vN.metadata.json, as Iceberg's Hadoop catalogue finds it without the hint
        # (version-hint.text is deleted and renamed back on every commit: a reader polling
        # during a run meets the gap)
        versions = [int(p.name[1:].split(".")[0]) for p in metadata.glob("v*.metadata.json")]
        if not versions and being_made:
            return [], {}
        version = max(versions)
        meta = json.loads((metadata / f"v{version}.metadata.json").read_text())
        current = next(s for s in meta["schemas"] if s["schema-id"] == meta["current-schema-id"])
        schema = [(f["name"], json.dumps(f["type"])) for f in current["fields"]]
        return schema, meta.get("properties", {})

    def rows(self, tables: list[str]) -> dict:
        """Every row of each table (of any schema: a row travels as its JSON): read by path
        through this process's Spark for the session method (no JVM of a `dbt show`), else
        through the same connection method by one `dbt show`."""
        if self.reader is not None:
            from pyspark.sql import functions as F

            return {
                t: [
                    json.loads(r[0])
                    for r in self.reader.read.format(self.fmt)
                    .load(str(self.table_dir(t)))
                    .select(F.to_json(F.struct("*")), "id")
                    .orderBy("id")
                    .collect()
                ]
                for t in tables
            }
        union = " union all ".join(
            f"select '{t}' as _table, id, to_json(struct(*)) as _row from {self.relation(t)}"
            for t in tables
        )
        shown = subprocess.run(
            [DBT, "show", "--profiles-dir", str(self.root), "--quiet", "--output", "json"]
            + ["--limit", "10000", "--inline", f"select * from ({union}) order by _table, id"],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert shown.returncode == 0, shown.stdout + shown.stderr
        out: dict = {t: [] for t in tables}
        for row in json.loads(shown.stdout)["show"]:
            out[row["_table"]].append(json.loads(row["_row"]))
        return out

    def results(self) -> dict:
        results = json.loads((self.root / "target" / "run_results.json").read_text())
        return {r["unique_id"].split(".")[-1]: r for r in results["results"]}


@pytest.fixture
def kill_target(request, tmp_path) -> tuple:
    """The profile output, warehouse and reader (see Project) of the `--profile` under test; the
    session method gets a warehouse of its own (each dbt process is then its own embedded
    Spark), read by path by the test process's."""
    if iceberg_rest(request.config) and "iceberg" in request.node.nodeid.lower():
        pytest.skip(
            "--iceberg-catalog rest: this test times its SIGKILL by the Hadoop catalogue's "
            "metadata/vN.metadata.json files and reads the table by path; a REST catalog "
            "commits NNNNN-<uuid>.metadata.json files that a read by path cannot load"
        )
    if request.config.getoption("--profile") == "session":
        warehouse = tmp_path / "warehouse"
        target = {
            "type": "spark_contracts",
            "warehouse_dir": str(warehouse),
            "server_side_parameters": dict(JVM_PARAMETERS),
        }
        return target, warehouse, request.getfixturevalue("worker_spark")
    target = request.getfixturevalue("dbt_profile_target")
    return target, Path(request.getfixturevalue("warehouse_dir")).resolve(), None


class TestKillAtEveryCommit:
    @pytest.mark.parametrize("fmt", ["delta", "iceberg"])
    def test_kill_9_at_every_commit_is_repaired(self, tmp_path, kill_target, fmt):
        project = Project(tmp_path / "project", fmt, kill_target)
        assert project.dbt() == 0  # v1 of every model
        before, _ = project.state("control")
        assert project.dbt("--select", "control", "--vars", "{v: 2}") == 0
        after, intent = project.state("control")
        assert not intent and after != before

        left_intent = {}
        for k in kill_points(fmt):
            table = f"kill_{k}"
            project.dbt("--select", table, "--vars", "{v: 2}", kill_at=k, table=table)
            schema, intent = project.state(table)
            assert intent or schema in (before, after), (k, schema)
            left_intent[table] = intent
        assert any(left_intent.values()), left_intent  # some kill landed mid-run

        # another writer commits to a table a killed run left mid-way
        project.dbt(
            "--select", "foreign", "--vars", "{v: 2}", kill_at=FOREIGN_KILL_POINT, table="foreign"
        )
        assert project.state("foreign")[1], "the kill left no intent in the run's record"
        foreign_args = ["foreign_write", "--args", f"{{table: {project.relation('foreign')}}}"]
        assert project.dbt(*foreign_args, command="run-operation") == 0

        assert project.dbt("--vars", "{v: 2}", "--exclude", "foreign") == 0  # repairs, then loads
        repairs = {
            name: r["adapter_response"].get("repairs") for name, r in project.results().items()
        }
        for table, intent in left_intent.items():
            assert bool(repairs.get(table)) == intent, (table, repairs.get(table))
            assert project.state(table) == (after, False), table
        rows = project.rows(["control", *left_intent])
        for table in left_intent:
            assert rows[table] == rows["control"], (table, rows[table])

        # the repair does not undo the other writer's commit: it fails naming it
        assert project.dbt("--select", "foreign", "--vars", "{v: 2}") != 0
        message = project.results()["foreign"]["message"]
        assert "another writer committed" in message and "streaming-job" in message, message
        assert 99 in [row["id"] for row in project.rows(["foreign"])["foreign"]]


# The backfill is slow in the run that is killed (a nested loop per row, not foldable, of
# `--vars {loop: N}` steps): the UPDATE is still running when its client is killed right after
# the commit before it. Its value is id * 10 whatever the loop; the other runs loop once.
SLOW_BACKFILL = MODELS["delta"].replace(
    "'id * 10'",
    "'id * 10 + aggregate(sequence(1, ' ~ var('loop', 1) ~ ' + cast(id * 0 as int)), 0L, "
    "(a, x) -> a + aggregate(sequence(1, ' ~ var('loop', 1) ~ ' + cast(id * 0 as int)), 0L, "
    "(b, y) -> b))'",
)
SLOW = "{v: 2, loop: 3000}"
BEFORE_UPDATE = 3  # column defaults feature, ADD COLUMNS, SET DEFAULT; then the UPDATE


class TestRepairWhileTheDeadStatementRuns:
    @pytest.mark.profile("thrift", "connect")  # an embedded Spark dies with its dbt process
    def test_repair_while_the_dead_runs_statement_still_runs(self, tmp_path, kill_target):
        """Over a server the killed client's UPDATE goes on; the repair run starts at once (no
        settling): the dead statement commits before the repair's RESTORE (undone with the dead
        run's changes) or after it (Delta's optimistic concurrency rejects it: the RESTORE changed
        the table's metadata), and the table ends like the control."""
        names = ["control", "dead"]
        project = Project(tmp_path / "project", "delta", kill_target, SLOW_BACKFILL, names)
        assert project.dbt() == 0
        assert project.dbt("--select", "control", "--vars", "{v: 2}") == 0
        after = project.state("control")
        assert after[1] is False
        project.dbt(
            *("--select", "dead", "--vars", SLOW),
            kill_at=BEFORE_UPDATE,
            kill_delay=1.0,
            table="dead",
            settle=False,
        )
        assert project.state("dead")[1], "the kill left no intent in the run's record"
        repaired = project.dbt("--select", "dead", "--vars", "{v: 2}")
        project.settle("dead")
        history = project.history("dead")
        print("history of the dead run's table:", history)  # what interleaved (pytest -rA shows it)
        assert repaired == 0, (project.results()["dead"]["message"], history)
        assert project.results()["dead"]["adapter_response"].get("repairs"), history
        assert project.state("dead") == after, history
        rows = project.rows(["control", "dead"])
        assert rows["dead"] == rows["control"], (rows, history)


# A backfill on each format (iceberg: ADD COLUMNS, then UPDATE; delta: the column defaults feature,
# ADD COLUMNS, SET DEFAULT, then UPDATE), slow enough to be killed while the UPDATE runs.
# The entries are in place from v1 on, before their columns exist (as users write them).
AHEAD = SLOW_BACKFILL.replace("schema_evolution=(", "schema_evolution=").replace(
    " if var('v', 1) != 1 else {})", ""
)
SLOW_BACKFILL_MODELS = {
    "delta": AHEAD,
    "iceberg": AHEAD.replace("file_format='delta'", "file_format='iceberg'"),
}


# discard_row with quarantine: on the embedded session the load collects the discarded rows and
# the quarantine insert follows it under the run's intent (commits: the intent, the load, ...).
# Thrift and Connect stage the rows and quarantine them before the load: no window there.
QUARANTINE_MODEL = """
{{{{ config(materialized='incremental', file_format='{fmt}', incremental_strategy='append',
          schema_contract={{'data_type': 'discard_row', 'quarantine': true}}) }}}}
{{% if var('v', 1) == 1 %}}
select id, cast(id as bigint) as n from range(3)
{{% else %}}
select id, if(id % 2 = 0, concat('bad-', cast(id as string)), cast(id as string)) as n
from range(3, 9)
{{% endif %}}
"""
AFTER_LOAD = 1  # the load (its discarded rows wait in the run's pending table)


# One class per format: pytest-xdist's loadscope gives each class to a worker of its own.
class TestKillMidRunDelta:
    def test_kills_mid_run_are_repaired(self, tmp_path, kill_target):
        kills_mid_run(tmp_path, kill_target, "delta")


class TestKillMidRunIceberg:
    def test_kills_mid_run_are_repaired(self, tmp_path, kill_target):
        kills_mid_run(tmp_path, kill_target, "iceberg")


def kills_mid_run(tmp_path, kill_target, fmt: str) -> None:
    """Two real SIGKILLs in one project (one set of dbt processes: each starts its own JVM).

    `dead`: killed while the backfill's UPDATE runs (the new columns are on the table, the
    backfill is not). The intent covers every step of the plan, so the table carries it, and the
    next run puts the table back and runs the whole plan again.

    `q_dead` (the embedded session): killed right after its load commits, before its discarded
    rows reach the quarantine: they wait in the run's pending table, which the load's commit
    names (core/recovery/pending.py). The next run, once the dead run's lease has run out, moves them
    into the quarantine and runs: the load that finished stays.

    `dead` ends like its control; `q_dead` like its control plus the dead run's load, whose
    discarded rows are in its quarantine exactly once."""
    names = ["control", "dead"]
    project = Project(tmp_path / "project", fmt, kill_target, SLOW_BACKFILL_MODELS[fmt], names)
    quarantines = project.reader is not None  # the embedded session: kill_target gives a reader
    quarantining = ["q_control", "q_dead"]
    if quarantines:
        for name in quarantining:
            (project.root / "models" / f"{name}.sql").write_text(QUARANTINE_MODEL.format(fmt=fmt))
    assert project.dbt() == 0
    argv = [DBT, "run", "--profiles-dir", str(project.root), "--select", "dead", "--vars", SLOW]
    process = subprocess.Popen(
        argv, cwd=project.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        schema, _ = project.state("dead")
        if "twice" in [name for name, _ in schema]:  # the ALTERs are done: the UPDATE runs
            time.sleep(1.0)
            os.kill(process.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    process.wait(timeout=600)
    assert process.returncode == -signal.SIGKILL, "the run ended before the kill"
    if not quarantines:  # a server may finish the dead statement
        project.settle("dead")
    schema, intent = project.state("dead")
    assert intent, "the kill during the UPDATE left no intent in the run's record"
    if quarantines:  # the embedded Spark dies with its dbt: nothing goes on to settle
        project.dbt(
            *("--select", "q_dead", "--vars", "{v: 2}"),
            kill_at=AFTER_LOAD,
            table="q_dead",
            settle=False,
        )
        if fmt == "delta":
            assert project.history("q_dead")[-1][1] == "WRITE", "the kill came before the load"
        assert not project.state("q_dead")[1], "a quarantining run writes no intent"
        pending = list(project.table_dir("q_dead").parent.glob("q_dead__quarantine__pending_*"))
        moved = project.rows(["q_dead__quarantine"])["q_dead__quarantine"]
        assert pending or moved, "the dead run's discarded rows are nowhere"

    # the next run: the controls' first v2 runs, and the dead runs' tables repaired and loaded;
    time.sleep(float(os.environ[LEASE_ENV]))  # the dead processes' leases run out (_short_leases)
    assert project.dbt("--vars", "{v: 2}") == 0
    results = {name: r["adapter_response"] for name, r in project.results().items()}
    assert results["dead"].get("repairs") and not results["control"].get("repairs"), results
    after = project.state("control")
    assert after[1] is False
    assert project.state("dead") == after
    tables = ["control", "dead"]
    if quarantines:
        assert results["q_dead"]["rows_discarded"] == 3
        tables += ["q_control", "q_dead", "q_control__quarantine", "q_dead__quarantine"]
    rows = project.rows(tables)
    assert rows["dead"] == rows["control"], rows
    if quarantines:  # the dead run's load stayed, then the next run's: v2 twice
        assert [r["id"] for r in rows["q_control"]] == [0, 1, 2, 3, 5, 7]
        assert [r["id"] for r in rows["q_dead"]] == [0, 1, 2, 3, 3, 5, 5, 7, 7]
        quarantined = {t: [r["id"] for r in rows[t]] for t in tables[-2:]}
        assert quarantined == {
            "q_control__quarantine": [4, 6, 8],
            "q_dead__quarantine": [4, 4, 6, 6, 8, 8],
        }, quarantined
        runs_ = {r["_dbt_run_id"] for r in rows["q_dead__quarantine"]}
        assert len(runs_) == 2, runs_  # each run's rows once


class TestRetryAtOnce:
    @pytest.mark.profile("session")  # the positive evidence: the dead run's process on this host
    @pytest.mark.parametrize("fmt", ["delta", "iceberg"])
    def test_a_retry_at_once_after_a_kill_repairs_and_loads(
        self, tmp_path, kill_target, fmt, monkeypatch
    ):
        """The most common death: a cancelled CI job (SIGKILL at the run's first commit), retried at
        once, with the default lease. The dead run's process on this host is gone, so the retry
        takes its lease over without waiting for it to run out, repairs the table and loads: it
        ends like a run never killed, well inside one lease's length."""
        monkeypatch.setenv(LEASE_ENV, "30")  # the default: a retry that waited would take 30 s more
        names = ["control", "dead"]
        project = Project(tmp_path / "project", fmt, kill_target, names=names)
        assert project.dbt() == 0
        project.dbt("--select", "dead", "--vars", "{v: 2}", kill_at=1, table="dead")
        assert project.state("dead")[1], "the kill at the first commit left no intent"
        # the retry, and beside it the control's first v2 run (one dbt process less)
        assert project.dbt("--vars", "{v: 2}") == 0, project.results()
        after = project.state("control")
        assert after[1] is False
        # what the retry said: it took the lease over on the evidence that the dead run's process
        # has ended, and never waited (it says so on the console as soon as it waits; a time
        # bound failed on a loaded machine, where a retry that repairs is slow without waiting)
        said = (project.root / f"dbt-{project.runs}.log").read_text()
        assert "(its process on this host has ended)" in said, said
        assert "waiting up to" not in said, said
        assert project.results()["dead"]["adapter_response"].get("repairs")
        assert project.state("dead") == after
        rows = project.rows(["control", "dead"])
        assert rows["dead"] == rows["control"], rows


def _stopped_run(
    project: Project, table: str, argv_vars: str, stopped: Callable[[subprocess.Popen], bool], **env
) -> subprocess.Popen:
    """A `dbt run` of `table` (its output in dbt-stalled.log, for a failure's story), returned
    once `stopped(process)` says it is stopped (it may stop it); `env`: beside os.environ."""
    argv = [DBT, "run", "--profiles-dir", str(project.root), "--select", table]
    with open(project.root / "dbt-stalled.log", "wb") as out:
        process = subprocess.Popen(
            [*argv, "--vars", argv_vars],
            cwd=project.root,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, **env),
        )
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        if stopped(process):
            return process
        time.sleep(0.02)
    raise AssertionError(f"{table}: the run ended (or ran on) without stopping")


def _stop_at(project: Project, table: str, argv_vars: str, commits: int) -> subprocess.Popen:
    """A `dbt run` of `table` started, and stopped (SIGSTOP) once `commits` new commits of
    its table are there: mid-run, alive but stalled (a long pause, a stopped laptop)."""
    start = len(project.commits(table))

    def stop(process: subprocess.Popen) -> bool:
        if len(project.commits(table)) - start < commits:
            return False
        os.kill(process.pid, signal.SIGSTOP)
        return True

    return _stopped_run(project, table, argv_vars, stop)


STALL_LEASE = 15.0  # seconds: the stopped run's lease runs out this soon here


def leftovers(project: Project, table: str) -> list[str]:
    """The leases and pending tables of `table` still in the warehouse (their folders)."""
    found = project.table_dir(table).parent.glob(f"{table}__*")
    return sorted(p.name for p in found if "__dbt_lease_" in p.name or "__pending_" in p.name)


def resumed_result(project: Project, table: str) -> dict:
    """The resumed run's result (it ended last: its run_results.json is there)."""
    results = json.loads((project.root / "target" / "run_results.json").read_text())
    (resumed,) = [r for r in results["results"] if r["unique_id"].endswith(f".{table}")]
    return resumed


@pytest.fixture
def stall_target(request, tmp_path) -> tuple:
    """As `kill_target`, but on the session method the two dbt processes share one metastore
    (a Derby network server, as test_concurrent_runs.py starts it): the stopped process keeps
    its embedded Derby open, which no second process could boot."""
    if request.config.getoption("--profile") != "session":
        return request.getfixturevalue("kill_target")
    from tests.functional.evolution.test_concurrent_runs import shared_metastore

    home = tmp_path / "derby"
    home.mkdir()
    warehouse = tmp_path / "warehouse"
    iceberg = request.getfixturevalue("iceberg_parameters")
    target = {
        "type": "spark_contracts",
        "warehouse_dir": str(warehouse),
        "server_side_parameters": {**shared_metastore(request, home), **iceberg},
    }
    return target, warehouse, request.getfixturevalue("worker_spark")


class TestStalledRun:
    @pytest.mark.profile("session", "thrift")
    @pytest.mark.parametrize("fmt", ["delta", "iceberg"])
    def test_a_stalled_run_that_lost_its_lease_commits_nothing(
        self, tmp_path, stall_target, fmt, monkeypatch
    ):
        """A run stopped (SIGSTOP) in the middle of its multi-step change, past its lease; the model
        is run again, which takes the lease over (the stopped run's process is alive, so only once
        the lease ran out while it watched), repairs and loads; then the first run resumes
        (SIGCONT). It fails, naming the run that took over, and commits nothing: the table ends
        like a run never stopped, and no success is reported for a load that is not there."""
        monkeypatch.setenv(LEASE_ENV, str(STALL_LEASE))
        names = ["control", "stalled"]
        project = Project(tmp_path / "project", fmt, stall_target, names=names)
        assert project.dbt() == 0
        assert project.dbt("--select", "control", "--vars", "{v: 2}") == 0
        after = project.state("control")
        first = _stop_at(project, "stalled", "{v: 2}", 1)  # its first change (its intent recorded)
        try:
            time.sleep(STALL_LEASE)
            assert project.state("stalled")[1], "the stopped run's record holds no intent"
            assert project.dbt("--select", "stalled", "--vars", "{v: 2}") == 0, project.results()
            second = project.results()["stalled"]
            assert second["adapter_response"].get("repairs"), second
            assert project.state("stalled") == after
        finally:
            os.kill(first.pid, signal.SIGCONT)
        assert first.wait(timeout=600) != 0  # the resumed run fails
        resumed = resumed_result(project, "stalled")
        assert resumed["status"] == "error" and "lost its lease" in resumed["message"], resumed
        project.settle("stalled")
        assert project.state("stalled") == after
        rows = project.rows(["control", "stalled"])
        assert rows["stalled"] == rows["control"], rows
        # the run record taken over: the run that took it over repaired what it said and kept it,
        # watched for a late commit of the stopped run (core/recovery/late.py: on Delta its ALTERs
        # and its own undo's RESTORE take no transaction id), which the model's next
        # run drops where that run's statements can no longer run (its embedded session ended with
        # it; a server's application still runs)
        assert len(leftovers(project, "stalled")) == 1, leftovers(project, "stalled")
        assert project.dbt("--select", "stalled", "--vars", "{v: 2}") == 0, project.results()
        if project.reader is None:  # over a server: kept until it runs another application
            assert len(leftovers(project, "stalled")) == 1, leftovers(project, "stalled")
            return
        assert leftovers(project, "stalled") == []


class TestStalledQuarantiningRun:
    @pytest.mark.profile("session", "thrift")
    @pytest.mark.parametrize("fmt", ["delta", "iceberg"])
    def test_a_quarantining_run_stalled_after_its_load_commits_nothing_more(
        self, tmp_path, stall_target, fmt, monkeypatch
    ):
        """A quarantining load stopped (SIGSTOP) once its load is in the table, before its discarded
        rows move from its pending table into the quarantine, past its lease. The model is run
        again: it watches the pending table's lease run out, takes it over, moves the rows (the
        load that carries their run's tag is in the table), and loads. The first run, resumed,
        fails naming its lost lease and moves nothing again: every load's discarded rows are in the
        quarantine once, nothing is left pending. (Where the stop came after the run had moved its
        rows already, it ends successfully and the next run finds nothing to settle: the same end.)"""
        monkeypatch.setenv(LEASE_ENV, str(STALL_LEASE))
        body = QUARANTINE_MODEL.format(fmt=fmt)
        project = Project(tmp_path / "project", fmt, stall_target, body, names=["q_stalled"])
        assert project.dbt() == 0
        first = _stop_at(project, "q_stalled", "{v: 2}", AFTER_LOAD)
        try:
            time.sleep(STALL_LEASE)
            assert project.dbt("--select", "q_stalled", "--vars", "{v: 2}") == 0, project.results()
            second = project.results()["q_stalled"]["adapter_response"]
        finally:
            os.kill(first.pid, signal.SIGCONT)
        code = first.wait(timeout=600)
        resumed = resumed_result(project, "q_stalled")
        settled = [r for r in second.get("repairs") or [] if "settled run" in r]
        if code != 0:  # stopped before it moved its rows: the next run moved them
            assert "lost its lease" in resumed["message"], resumed
            assert settled, second
        else:  # it had moved them before the stop took hold
            assert resumed["status"] == "success" and not settled, (resumed, second)
        two_loads_each_quarantined_once(project, "q_stalled")


def two_loads_each_quarantined_once(project: Project, table: str) -> None:
    """After `QUARANTINE_MODEL`'s first run and two runs of v 2 that loaded (one by the run
    itself or its settler): both loads' kept rows in the table, each load's discarded rows in
    the quarantine once, nothing left pending."""
    project.settle(table)
    rows = project.rows([table, f"{table}__quarantine"])
    assert [r["id"] for r in rows[table]] == [0, 1, 2, 3, 3, 5, 5, 7, 7], rows
    quarantined = rows[f"{table}__quarantine"]
    assert sorted(r["id"] for r in quarantined) == [4, 4, 6, 6, 8, 8], quarantined
    assert len({r["_dbt_run_id"] for r in quarantined}) == 2, quarantined  # each run's once
    assert leftovers(project, table) == []


def _stop_before(
    project: Project, table: str, argv_vars: str, write: int | str
) -> subprocess.Popen:
    """A `dbt run` of `table` that stops itself (SIGSTOP, connection/failpoint.py) right before
    it sends its `write`-th statement that changes something (or, `sql:<start>`, the first one
    whose text starts so): after every check the run makes before that statement (its fence
    too), before the statement reaches Spark."""

    def stopped(process: subprocess.Popen) -> bool:
        state = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state == "T"

    return _stopped_run(
        project, table, argv_vars, stopped, DBT_SPARK_CONTRACTS_STOP_BEFORE=str(write)
    )


def write_index(log: Path, start: str) -> int:
    """The number, among a run's writes (its `DBT_SPARK_CONTRACTS_WRITES_LOG`), of the first
    statement that starts with `start` (the load: `insert into <model> `)."""
    for line in log.read_text().splitlines():
        number, statement = line.split("\t", 1)
        statement = statement.split("*/", 1)[-1].strip()  # after dbt's query comment
        if statement.lower().startswith(start.lower()):
            return int(number)
    raise AssertionError(f"no {start!r} in {log.read_text()}")


class TestLateLoad:
    @pytest.mark.profile("session", "thrift")
    def test_a_load_sent_after_its_lease_was_taken_over_is_fenced_off_inside_the_commit(
        self, tmp_path, stall_target, monkeypatch
    ):
        """The window the fence before each step leaves: a quarantining Delta run stopped (SIGSTOP)
        right before its load reaches Spark, after its fence passed, and past its lease. The model
        run again takes the lease of the stopped run's record over, commits an empty marker under
        that run's transaction id, finds no load of it in the table's log and drops its discarded
        rows at once (the marker is the positive evidence that the load can no longer commit;
        before, they were kept while the stopped process lived, and its load then committed a
        second time), and loads. The first run, resumed, sends its load, which commits nothing
        (its rows' table is gone, and the marker fences it off), and fails naming its lost lease.
        Every row is in the table once, every discarded row of the load that stands is in the
        quarantine once, nothing is left pending."""
        monkeypatch.setenv(LEASE_ENV, str(STALL_LEASE))
        body = QUARANTINE_MODEL.format(fmt="delta")
        names = ["q_control", "q_fenced"]
        project = Project(tmp_path / "project", "delta", stall_target, body, names=names)
        assert project.dbt() == 0
        writes = tmp_path / "writes.log"
        monkeypatch.setenv("DBT_SPARK_CONTRACTS_WRITES_LOG", str(writes))
        assert project.dbt("--select", "q_control", "--vars", "{v: 2}") == 0
        monkeypatch.delenv("DBT_SPARK_CONTRACTS_WRITES_LOG")
        load = write_index(writes, f"insert into {project.relation('q_control')} ")
        first = _stop_before(project, "q_fenced", "{v: 2}", load)
        try:
            time.sleep(STALL_LEASE)
            assert project.dbt("--select", "q_fenced", "--vars", "{v: 2}") == 0, project.results()
            second = project.results()["q_fenced"]["adapter_response"]
        finally:
            os.kill(first.pid, signal.SIGCONT)
        assert first.wait(timeout=600) != 0
        resumed = resumed_result(project, "q_fenced")
        assert resumed["status"] == "error" and "lost its lease" in resumed["message"], resumed
        settled = [r for r in second.get("repairs") or [] if "settled run" in r]
        assert settled and "fences that run's writes off" in settled[0], second
        project.settle("q_fenced")
        rows = project.rows(["q_fenced", "q_fenced__quarantine", "q_control"])
        assert [r["id"] for r in rows["q_fenced"]] == [0, 1, 2, 3, 5, 7], rows
        assert rows["q_fenced"] == rows["q_control"], rows
        quarantined = rows["q_fenced__quarantine"]
        assert sorted(r["id"] for r in quarantined) == [4, 6, 8], quarantined
        assert len({r["_dbt_run_id"] for r in quarantined}) == 1, quarantined
        # the taker's marker, and after it nothing of the resumed run (it ended last)
        results = json.loads((project.root / "target" / "run_results.json").read_text())
        stopped = results["metadata"]["invocation_id"]
        history = project.history("q_fenced")
        markers = [v for v, _, tag in history if tag.startswith("dbt-spark-contracts-fence")]
        assert markers and not [h for h in history if h[0] > markers[0] and h[2] == stopped], (
            history
        )
        assert leftovers(project, "q_fenced") == []


class TestLateIcebergMove:
    @pytest.mark.profile("session", "thrift")
    def test_an_iceberg_move_landing_between_a_settlers_move_and_its_drop_adds_no_row_twice(
        self, tmp_path, stall_target, monkeypatch
    ):
        """Iceberg fences no append inside its commit. A quarantining Iceberg run (A) stopped
        (SIGSTOP) right before its own move of its discarded rows into the quarantine, after its
        load and its fence, past its lease. The model run again (B) takes the lease over, finds A's
        load in the table's log and moves A's rows, and is stopped right before it drops A's
        pending table. A, resumed, sends its move there: the window where a late move finds the
        pending table still there. As a MERGE on the run's id (`moves_own_rows_by_merge`) it finds
        the rows and inserts none, or its commit meets B's and fails (an append added them a
        second time); A fails naming its lost lease. B, resumed, drops A's pending table and
        record, and loads. Each run's discarded rows are in the quarantine once, nothing is left
        pending."""
        from dbt.adapters.spark_contracts.core.evolution.capabilities import row_of

        monkeypatch.setenv(LEASE_ENV, str(STALL_LEASE))
        project = Project(
            tmp_path / "project",
            "iceberg",
            stall_target,
            QUARANTINE_MODEL.format(fmt="iceberg"),
            names=["q_moved"],
        )
        assert project.dbt() == 0
        quarantine = f"{project.relation('q_moved')}__quarantine"
        verb = "merge" if row_of("iceberg").moves_own_rows_by_merge else "insert"
        first = _stop_before(project, "q_moved", "{v: 2}", f"sql:{verb} into {quarantine} ")
        second = None
        try:
            time.sleep(STALL_LEASE)
            drop = f"sql:drop table if exists {quarantine}__pending_"
            second = _stop_before(project, "q_moved", "{v: 2}", drop)
            os.kill(first.pid, signal.SIGCONT)
            assert first.wait(timeout=600) != 0
            resumed = resumed_result(project, "q_moved")
        finally:  # neither left stopped, whatever failed
            for process in (first, second):
                if process is not None and process.poll() is None:
                    os.kill(process.pid, signal.SIGCONT)
        assert resumed["status"] == "error" and "lost its lease" in resumed["message"], resumed
        assert second.wait(timeout=600) == 0, project.results()
        settled = project.results()["q_moved"]["adapter_response"].get("repairs") or []
        assert [r for r in settled if "settled run" in r and "moved" in r], settled
        two_loads_each_quarantined_once(project, "q_moved")


def _backfill_sent_after_a_takeover(project: Project, monkeypatch) -> str:
    """Models `control` and `stalled` built, `control` run to v 2, then a run of `stalled` to
    v 2 stopped right before its backfill UPDATE past its lease while the model runs again,
    then resumed (`_sent_after_a_takeover`). Returns its invocation id."""
    monkeypatch.setenv(LEASE_ENV, str(STALL_LEASE))
    assert project.dbt() == 0
    assert project.dbt("--select", "control", "--vars", "{v: 2}") == 0
    # by its text: a run's n-th write differs between methods (Iceberg over Thrift)
    update = f"sql:update {project.relation('stalled')} "
    return _sent_after_a_takeover(project, "{v: 2}", update, "{v: 2}")


def _sent_after_a_takeover(project: Project, stopped_vars: str, stop: str, again_vars: str) -> str:
    """A run of `stalled` (`stopped_vars`) stopped right before its statement `stop` (its fence
    passed) and left stopped past its lease, while the model runs again (`again_vars`: it
    takes the lease over, repairs and loads); then resumed: it fails naming its lost lease.
    Returns its invocation id, once the table's commits settled."""
    first = _stop_before(project, "stalled", stopped_vars, stop)
    try:
        time.sleep(STALL_LEASE)
        assert project.dbt("--select", "stalled", "--vars", again_vars) == 0, project.results()
        assert project.results()["stalled"]["adapter_response"].get("repairs")
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert first.wait(timeout=600) != 0
    resumed = resumed_result(project, "stalled")
    assert resumed["status"] == "error" and "lost its lease" in resumed["message"], resumed
    results = json.loads((project.root / "target" / "run_results.json").read_text())
    project.settle("stalled")
    return results["metadata"]["invocation_id"]


class TestLateBackfill:
    @pytest.mark.profile("session", "thrift")
    def test_a_backfill_sent_after_its_lease_was_taken_over_is_skipped_inside_the_commit(
        self, tmp_path, stall_target, monkeypatch
    ):
        """Delta's skip itself: a multi-step Delta run stopped (SIGSTOP) right before its backfill
        UPDATE reaches Spark (its fence passed), past its lease. The model run again takes the
        lease over, commits its marker under the stopped run's transaction id, repairs the table
        (RESTORE) and carries the whole change out itself. The first run, resumed, sends its
        UPDATE: it has no source a repair could drop, so without the fence it would commit over
        the second run's load; Delta skips it (its version is below the marker's), and the run
        fails naming its lost lease. No commit of the first run follows the marker."""
        project = Project(tmp_path / "project", "delta", stall_target, names=["control", "stalled"])
        stopped = _backfill_sent_after_a_takeover(project, monkeypatch)
        after = project.state("control")
        history = project.history("stalled")
        markers = [v for v, _, tag in history if tag.startswith("dbt-spark-contracts-fence")]
        assert markers and not [h for h in history if h[0] > markers[0] and h[2] == stopped], (
            history
        )
        assert project.state("stalled") == after
        rows = project.rows(["control", "stalled"])
        assert rows["stalled"] == rows["control"], rows
        # the stopped run's record stays, watched for a late commit that takes no id (an ALTER, its
        # own undo's RESTORE: core/recovery/late.py), until its statements can no longer run: the
        # next run drops it where they ran in its embedded session, which ended with it
        assert [name for name in leftovers(project, "stalled") if run_key(stopped) in name]
        assert project.dbt("--select", "stalled", "--vars", "{v: 2}") == 0, project.results()
        if project.reader is not None:
            assert leftovers(project, "stalled") == []


def lineage_runs(project: Project, table: str) -> list[str]:
    """Iceberg: the invocation id tagging each snapshot of the current lineage, oldest first
    (by parent ids, from the newest metadata file; "" for an untagged one)."""
    metadata = project.table_dir(table) / "metadata"
    version = max(int(p.name[1:].split(".")[0]) for p in metadata.glob("v*.metadata.json"))
    meta = json.loads((metadata / f"v{version}.metadata.json").read_text())
    by_id = {s["snapshot-id"]: s for s in meta.get("snapshots", [])}
    runs_, at = [], meta.get("current-snapshot-id")
    while at is not None and at in by_id:
        tag = str(by_id[at].get("summary", {}).get(runs.ICEBERG_TAG_KEY) or "")
        runs_.append(tag.split(":")[1] if tag.count(":") >= 2 else tag)
        at = by_id[at].get("parent-snapshot-id")
    return runs_[::-1]


# Iceberg, a backfill: a multi-step change whose UPDATE reads no table a repair drops (a MERGE
# reads the run's stage, which the repair drops: a late MERGE fails). Its new rows carry other
# values than the backfill gives old ones, so an UPDATE that lands after the next run's load
# changes rows that load wrote.
ICEBERG_BACKFILL = """
{{ config(materialized='incremental', file_format='iceberg', unique_key='id',
          schema_evolution=({'columns': {'twice': {'backfill': 'id * 10'}}} if var('v', 1) != 1 else {})) }}
{% if var('v', 1) == 1 %}
select id from range(3)
{% else %}
{% set start = var('start', 3) %}
select id, id * 100 as twice from range({{ start }}, {{ start }} + 3)
{% endif %}
"""


class TestLateIcebergBackfill:
    @pytest.mark.profile("session", "thrift")
    def test_an_iceberg_backfill_sent_after_its_lease_was_taken_over_is_rolled_back_by_the_next_run(
        self, tmp_path, stall_target, monkeypatch
    ):
        """Iceberg has no transaction id, so the window the fence before each step leaves stays
        open: a multi-step Iceberg run (ADD COLUMNS, its backfill UPDATE, its MERGE) stopped
        (SIGSTOP) right before its UPDATE reaches Spark, after its fence passed, past its lease.
        The model run again takes the lease over, repairs the table (drops the column, rolls back)
        and carries the change out itself; since the stopped run's statements may still run, it
        keeps that run's record with a watch (its tag, the snapshot after the repair). Resumed, the
        first run sends its UPDATE, which commits on top (it sets the backfill's value on the rows
        the second run loaded too), and fails naming its lost lease. The run after that finds the
        late snapshot at the head of the table's lineage, rolls it back, drops the record and
        loads: no snapshot of the stopped run is left on the lineage, and the table is as a run
        never stopped."""
        names = ["control", "stalled"]
        project = Project(tmp_path / "project", "iceberg", stall_target, ICEBERG_BACKFILL, names)
        stopped = _backfill_sent_after_a_takeover(project, monkeypatch)
        after = project.state("control")
        # the late UPDATE landed on top (what Delta's marker refuses), and the record stays watched
        assert lineage_runs(project, "stalled")[-1] == stopped, lineage_runs(project, "stalled")
        rows = project.rows(["control", "stalled"])
        assert rows["stalled"] != rows["control"], rows
        assert any(run_key(stopped) in name for name in leftovers(project, "stalled"))
        assert project.dbt("--select", "stalled", "--vars", "{v: 2}") == 0, project.results()
        repairs = project.results()["stalled"]["adapter_response"].get("repairs") or []
        assert any("rolled back snapshot" in r and stopped in r for r in repairs), repairs
        assert stopped not in lineage_runs(project, "stalled"), lineage_runs(project, "stalled")
        assert project.state("stalled") == after
        rows = project.rows(["control", "stalled"])
        assert rows["stalled"] == rows["control"], rows
        assert [r["twice"] for r in rows["stalled"]] == [0, 10, 20, 300, 400, 500], rows
        assert leftovers(project, "stalled") == []


def _taken_back_by_the_next_run(project: Project, stopped: str, operation: str, again: str) -> dict:
    """The stopped run's late `operation` is the last commit of `stalled` and its record is
    watched; the model's next run (`again`: its vars) takes it back (RESTORE to the version
    before it) and the table ends as `control`'s. Returns both tables' rows."""
    history = project.history("stalled")
    assert history[-1][1:] == (operation, stopped), history
    assert any(run_key(stopped) in name for name in leftovers(project, "stalled"))
    assert project.dbt("--select", "stalled", "--vars", again) == 0, project.results()
    repairs = project.results()["stalled"]["adapter_response"].get("repairs") or []
    assert any("rolled back version" in r and stopped in r for r in repairs), repairs
    assert project.state("stalled") == project.state("control")
    rows = project.rows(["control", "stalled"])
    assert rows["stalled"] == rows["control"], rows
    return rows


# Delta, a column removal on a table whose column mapping is on from its creation, so the run's
# only step is its DROP COLUMNS (an ALTER: Delta takes no transaction id for it). v 1 keeps
# `gone`; each run appends the ids from `start`.
DELTA_DROP = """
{{ config(materialized='incremental', file_format='delta', schema_evolution={},
          tblproperties={'delta.columnMapping.mode': 'name'}) }}
{% set start = var('start', 0) %}
{% if var('v', 1) == 1 %}
select id, id * 10 as gone from range({{ start }}, {{ start }} + 3)
{% else %}
select id from range({{ start }}, {{ start }} + 3)
{% endif %}
"""


def _drop_sent_after_a_takeover(project: Project, monkeypatch) -> str:
    """Models `control` and `stalled` built (`DELTA_DROP` or `ICEBERG_DROP`), `control` loaded
    from 3, then a run of `stalled` removing `gone` from 3 stopped right before its DROP
    COLUMNS past its lease while the model, keeping `gone`, runs again from 3; then resumed
    (`_sent_after_a_takeover`). Returns its invocation id."""
    monkeypatch.setenv(LEASE_ENV, str(STALL_LEASE))
    assert project.dbt() == 0
    assert project.dbt("--select", "control", "--vars", "{start: 3}") == 0
    removal = "{v: 2, start: 3, allow_column_removal: true}"
    drop = f"sql:alter table {project.relation('stalled')} drop columns"
    return _sent_after_a_takeover(project, removal, drop, "{start: 3}")


class TestLateDropColumns:
    @pytest.mark.profile("session", "thrift")
    def test_a_delta_drop_columns_sent_after_its_lease_was_taken_over_is_put_back_by_the_next_run(
        self, tmp_path, stall_target, monkeypatch
    ):
        """Delta fences rows' writes inside the commit, not an ALTER: a run removing a column
        (`allow_column_removal`) stopped (SIGSTOP) right before its DROP COLUMNS reaches Spark,
        after its fence passed, past its lease. The model, changed back to keep the column, runs
        again: it takes the lease over, repairs and loads, and (the stopped run's statements may
        still run) keeps that run's record with a watch. Resumed, the first run sends its DROP
        COLUMNS, which lands (the column and its values leave the current version), and fails
        naming its lost lease. The run after that finds the late commit at the head of the table's
        log, RESTOREs to the version before it (the column's values are back), drops the record
        and loads: the table is as a run never stopped left it."""
        names = ["control", "stalled"]
        project = Project(tmp_path / "project", "delta", stall_target, DELTA_DROP, names)
        stopped = _drop_sent_after_a_takeover(project, monkeypatch)
        # the late DROP COLUMNS landed on top (what the marker cannot refuse), the record is watched
        assert "gone" not in [name for name, _ in project.state("stalled")[0]]
        assert project.dbt("--select", "control", "--vars", "{start: 6}") == 0
        rows = _taken_back_by_the_next_run(project, stopped, "DROP COLUMNS", "{start: 6}")
        assert [r["gone"] for r in rows["stalled"]] == [0, 10, 20, 30, 40, 50, 60, 70, 80], rows
        assert leftovers(project, "stalled") == []


# Iceberg, the same removal: its DROP COLUMNS goes after the load (a rollback keeps the schema),
# so the stopped run has loaded (`gone` NULL in its rows) when it stops before it.
ICEBERG_DROP = DELTA_DROP.replace("file_format='delta'", "file_format='iceberg'").replace(
    ",\n          tblproperties={'delta.columnMapping.mode': 'name'}", ""
)


class TestLateIcebergDropColumns:
    @pytest.mark.profile("session", "thrift")
    def test_an_iceberg_drop_columns_sent_after_its_lease_was_taken_over_fails_on_its_guard(
        self, tmp_path, stall_target, monkeypatch
    ):
        """An Iceberg ALTER makes no snapshot, so a late one could not be found and taken back:
        it is sent behind the table's history (core/recovery/history_guard.py). A run removing
        a column (`allow_column_removal`) loads, then is stopped (SIGSTOP) right before its DROP
        COLUMNS reaches Spark, after its fence passed, past its lease. The model, changed back
        to keep the column, runs again: it takes the lease over (an empty marker commit on the
        table), repairs (rolls the stopped run's load back) and loads. Resumed, the first run
        sends its DROP COLUMNS, whose guard finds the history changed: the column and its
        values stay, and the run fails naming its lost lease. Before the guard the DROP landed
        and took the column's values out of the current version."""
        names = ["control", "stalled"]
        project = Project(tmp_path / "project", "iceberg", stall_target, ICEBERG_DROP, names)
        stopped = _drop_sent_after_a_takeover(project, monkeypatch)
        assert stopped not in lineage_runs(project, "stalled"), lineage_runs(project, "stalled")
        assert "gone" in [name for name, _ in project.state("stalled")[0]]
        assert project.state("stalled") == project.state("control")
        rows = project.rows(["control", "stalled"])
        assert rows["stalled"] == rows["control"], rows
        assert [r["gone"] for r in rows["stalled"]] == [0, 10, 20, 30, 40, 50], rows
        # the model's next run loads on (the stopped run's record says nothing left to do)
        assert project.dbt("--select", "control", "stalled", "--vars", "{start: 6}") == 0
        rows = project.rows(["control", "stalled"])
        assert rows["stalled"] == rows["control"], rows


# a table model that quarantines (its load: a rebuild's `create or replace` from its pending
# table, under the run's lease); `start` moves each run's rows, every even id's `n` discarded
REBUILD_MODEL = """
{{ config(materialized='table', file_format='iceberg',
          schema_contract={'data_type': 'discard_row', 'quarantine': true}) }}
{% set start = var('start', 0) %}
{% if var('v', 1) == 1 %}
select id, cast(id as bigint) as n from range(3)
{% else %}
select id, if(id % 2 = 0, concat('bad-', cast(id as string)), cast(id as string)) as n
from range({{ start }}, {{ start }} + 6)
{% endif %}
"""


class TestLateIcebergRebuild:
    @pytest.mark.profile("session", "thrift")
    def test_an_iceberg_rebuild_sent_after_the_next_runs_load_fails_on_its_guard(
        self, tmp_path, stall_target, monkeypatch
    ):
        """Iceberg's `create or replace` makes a snapshot without a parent, off the lineage a
        watch for a late commit follows, and takes no transaction id: a late one replaced the
        next run's load. A quarantining table model's run (it holds a lease for its pending
        rows) is stopped (SIGSTOP) after its fence, before its record says `replacing` (see
        TestInFlightIcebergRebuild), past its lease. The model runs again: it keeps the stopped
        run's pending rows (its process lives) and rebuilds. Resumed, the first run sends its replace behind the
        history it read before its fence (core/recovery/history_guard.py), which fails: the
        table keeps the second run's rows, and the first run fails naming the change. Its
        pending rows go (its load never landed): each quarantine holds the discarded rows of
        the loads that stand, as a control's."""
        monkeypatch.setenv(LEASE_ENV, str(STALL_LEASE))
        names = ["control", "stalled"]
        project = Project(tmp_path / "project", "iceberg", stall_target, REBUILD_MODEL, names)
        assert project.dbt() == 0
        # a run that discarded (a table model takes its pending table at once: no first pass)
        assert project.dbt("--vars", "{v: 2, start: 3}") == 0, project.results()
        mark = f"has:'{REPLACING_PROPERTY}'"  # its record's mark (run/replace_alone.py)
        first = _stop_before(project, "stalled", "{v: 2, start: 10}", mark)
        try:
            time.sleep(STALL_LEASE)
            again = "{v: 2, start: 20}"
            assert project.dbt("--select", "stalled", "--vars", again) == 0, project.results()
        finally:
            os.kill(first.pid, signal.SIGCONT)
        assert first.wait(timeout=600) != 0
        resumed = resumed_result(project, "stalled")
        assert resumed["status"] == "error", resumed
        assert "changed since this run read it before its fence" in resumed["message"], resumed
        project.settle("stalled")
        stopped = json.loads((project.root / "target" / "run_results.json").read_text())
        assert stopped["metadata"]["invocation_id"] not in lineage_runs(project, "stalled")
        assert project.dbt("--select", "control", "--vars", "{v: 2, start: 20}") == 0
        rows = project.rows(["control", "stalled"])
        assert [r["id"] for r in rows["stalled"]] == [21, 23, 25], rows
        assert rows["stalled"] == rows["control"], rows
        assert project.dbt("--vars", "{v: 2, start: 30}") == 0, project.results()
        tables = ["control__quarantine", "stalled__quarantine"]
        quarantined = {t: sorted(r["id"] for r in project.rows(tables)[t]) for t in tables}
        assert quarantined["stalled__quarantine"] == [4, 6, 8, 20, 22, 24, 30, 32, 34], quarantined
        assert quarantined["stalled__quarantine"] == quarantined["control__quarantine"]
        assert leftovers(project, "stalled") == []


class TestInFlightIcebergRebuild:
    @pytest.mark.profile("session", "thrift")
    def test_no_run_replaces_an_iceberg_table_while_another_runs_replace_may_still_run(
        self, tmp_path, stall_target, monkeypatch
    ):
        """Iceberg commits a replace already sent onto whatever the table is by then, and the
        snapshot committed meanwhile is gone from the table's metadata too
        (benchmarks/experiments/iceberg_replace_inflight.py): no guard or repair can stop or
        find it once sent. A quarantining table model's run is stopped (SIGSTOP) right before
        it sends its replace (its record says `replacing`), past its lease: to the next run
        its replace may be running on the server or in its JVM (a stop after the send cannot
        be placed from the client; either looks the same to that run). The model runs again:
        it waits for that lease to run out, then changes nothing and fails naming the stopped
        run (run/replace_alone.py), letting go of its own record and pending rows. Resumed, the
        first run's replace lands (nothing committed since its read) and it succeeds; the
        next run succeeds; each quarantine holds the discarded rows of the loads that stand,
        as a control's."""
        monkeypatch.setenv(LEASE_ENV, str(STALL_LEASE))
        names = ["control", "stalled"]
        project = Project(tmp_path / "project", "iceberg", stall_target, REBUILD_MODEL, names)
        assert project.dbt() == 0
        assert project.dbt("--vars", "{v: 2, start: 3}") == 0, project.results()
        first = _stop_before(project, "stalled", "{v: 2, start: 10}", "sql:create or replace")
        try:
            time.sleep(STALL_LEASE)
            again = "{v: 2, start: 20}"
            assert project.dbt("--select", "stalled", "--vars", again) != 0, project.results()
            refused = project.results()["stalled"]
            assert refused["status"] == "error", refused
            assert "was replacing" in refused["message"], refused
        finally:
            os.kill(first.pid, signal.SIGCONT)
        assert first.wait(timeout=600) == 0, (project.root / "dbt-stalled.log").read_text()
        assert project.dbt("--select", "control", "--vars", "{v: 2, start: 10}") == 0
        rows = project.rows(["control", "stalled"])
        assert [r["id"] for r in rows["stalled"]] == [11, 13, 15], rows
        assert rows["stalled"] == rows["control"], rows
        assert project.dbt("--vars", "{v: 2, start: 30}") == 0, project.results()
        tables = ["control__quarantine", "stalled__quarantine"]
        quarantined = {t: sorted(r["id"] for r in project.rows(tables)[t]) for t in tables}
        assert quarantined["stalled__quarantine"] == [4, 6, 8, 10, 12, 14, 30, 32, 34], quarantined
        assert quarantined["stalled__quarantine"] == quarantined["control__quarantine"]
        assert leftovers(project, "stalled") == []


class TestDryRunOverADeadRun:
    # the dead run's process on this host: its lease is free at once
    @pytest.mark.profile("session")
    def test_a_dry_run_over_a_dead_runs_half_change_repairs_nothing(self, tmp_path, kill_target):
        """A Delta run killed (SIGKILL) at its first commit leaves its change half done and its
        record. A dry run of the model (`schema_evolution_dry_run`) then names the record in a
        warning and changes nothing: no commit on the table, the record and its intent still
        there. The real run after it repairs and loads, and ends as a run never killed."""
        project = Project(tmp_path / "project", "delta", kill_target, names=["control", "dead"])
        assert project.dbt() == 0
        project.dbt("--select", "dead", "--vars", "{v: 2}", kill_at=1, table="dead")
        before = (project.state("dead"), project.history("dead"), leftovers(project, "dead"))
        assert before[0][1], "the kill at the first commit left no intent"
        dry = "{v: 2, schema_evolution_dry_run: true}"
        assert project.dbt("--select", "dead", "--vars", dry) == 0, project.results()
        said = (project.root / f"dbt-{project.runs}.log").read_text()
        assert "dry run: not repaired" in said and "dead__dbt_lease_" in said, said
        assert (
            project.state("dead"),
            project.history("dead"),
            leftovers(project, "dead"),
        ) == before
        assert project.dbt("--vars", "{v: 2}") == 0, project.results()
        assert project.results()["dead"]["adapter_response"].get("repairs")
        assert project.state("dead") == project.state("control")
        rows = project.rows(["control", "dead"])
        assert rows["dead"] == rows["control"], rows
        assert leftovers(project, "dead") == []


class TestLateRepairerRestore:
    @pytest.mark.profile("session", "thrift")
    def test_a_repairers_restore_sent_after_its_lease_was_taken_over_is_taken_back_by_the_next_run(
        self, tmp_path, stall_target, monkeypatch
    ):
        """A run repairing a dead run's half change can stall too. A Delta run is killed (SIGKILL)
        at its first commit (its intent left). The model's next run, stopped (SIGSTOP) right before
        its repair's RESTORE (its fence passed), stays stopped past its lease. A third run takes
        that lease over (the stopped repairer's record names its commit tag: it watches for it),
        repairs and loads. Resumed, the repairer sends its RESTORE, which lands and undoes that
        load, and fails naming its lost lease. The run after that finds the late RESTORE at the
        head of the table's log and RESTOREs to the version before it: the load is back, and the
        table is as a run never killed or stopped left it."""
        monkeypatch.setenv(LEASE_ENV, str(STALL_LEASE))
        project = Project(tmp_path / "project", "delta", stall_target, names=["control", "stalled"])
        assert project.dbt() == 0
        assert project.dbt("--select", "control", "--vars", "{v: 2}") == 0
        project.dbt("--select", "stalled", "--vars", "{v: 2}", kill_at=1, table="stalled")
        assert project.state("stalled")[1], "the kill at the first commit left no intent"
        restore = f"sql:restore table {project.relation('stalled')} "
        stopped = _sent_after_a_takeover(project, "{v: 2}", restore, "{v: 2}")
        # the late RESTORE landed on top, undoing the taker's load
        assert project.state("stalled") != project.state("control")
        _taken_back_by_the_next_run(project, stopped, "RESTORE", "{v: 2}")
        if project.reader is not None:  # over a server the killed run's record stays watched
            assert leftovers(project, "stalled") == []


class TestLateIcebergRepairerRollback:
    @pytest.mark.profile("session", "thrift")
    def test_a_repairers_rollback_sent_after_its_lease_was_taken_over_fails_on_the_fence(
        self, tmp_path, stall_target, monkeypatch
    ):
        """Iceberg's rollback is no commit and names no one, so no watch could tell a stalled
        repairer's late rollback from a person's. An Iceberg run (ADD COLUMNS, its backfill
        UPDATE, its MERGE) is killed (SIGKILL) once its UPDATE committed (its intent left). The
        model's next run, stopped (SIGSTOP) right before its repair's rollback (its fence
        passed), stays stopped past its lease. A third run takes that lease over, repairs, and,
        since the stopped run may still send its rollback, fences it off: an empty commit past
        the snapshot it would roll back to, then that snapshot expired. Then it loads. Resumed,
        the repairer sends its rollback, which fails on the expired snapshot, and the run fails
        naming its lost lease. The third run's load stays: the table is as a run never killed or
        stopped left it, with no further run needed."""
        monkeypatch.setenv(LEASE_ENV, str(STALL_LEASE))
        names = ["control", "stalled"]
        project = Project(tmp_path / "project", "iceberg", stall_target, ICEBERG_BACKFILL, names)
        assert project.dbt() == 0
        assert project.dbt("--select", "control", "--vars", "{v: 2}") == 0
        point = lineage_snapshots(project, "stalled")[0]  # where a repair puts the table back
        # killed once its UPDATE committed (the ADD COLUMNS before it is no snapshot)
        project.dbt("--select", "stalled", "--vars", "{v: 2}", kill_at=2, table="stalled")
        assert project.state("stalled")[1], "the kill left no intent"
        assert lineage_snapshots(project, "stalled")[0] != point, "the kill left no snapshot"
        rollback = "sql:call iceberg.system.rollback_to_snapshot("
        stopped = _sent_after_a_takeover(project, "{v: 2}", rollback, "{v: 2}")
        assert point not in all_snapshots(project, "stalled"), "the rollback's target stayed"
        taker = lineage_runs(project, "stalled")[-1]
        assert taker and taker != stopped, lineage_runs(project, "stalled")
        assert project.state("stalled") == project.state("control")
        rows = project.rows(["control", "stalled"])
        assert rows["stalled"] == rows["control"], rows
        assert [r["twice"] for r in rows["stalled"]] == [0, 10, 20, 300, 400, 500], rows


class TestLateIcebergTakeBackRollback:
    @pytest.mark.profile("session", "thrift")
    def test_a_take_backs_rollback_sent_after_its_lease_was_taken_over_fails_on_the_fence(
        self, tmp_path, stall_target, monkeypatch
    ):
        """The take-back of a late commit is a rollback too. A run's backfill UPDATE lands late
        on Iceberg (TestLateIcebergBackfill), and its record is watched. The next run, stopped
        (SIGSTOP) right before the rollback that takes that UPDATE back (its fence passed),
        stays stopped past its lease. A third run takes that lease over, takes the UPDATE back
        itself and, since the stopped run may still send its rollback, fences it off (the
        snapshot both roll back to expired behind an empty commit), then loads new rows. Resumed, the
        stopped run's rollback fails on the expired snapshot and the run fails naming its lost
        lease. The third run's load stays: the table is as a run never stopped left it."""
        names = ["control", "stalled"]
        project = Project(tmp_path / "project", "iceberg", stall_target, ICEBERG_BACKFILL, names)
        late = _backfill_sent_after_a_takeover(project, monkeypatch)
        assert lineage_runs(project, "stalled")[-1] == late, lineage_runs(project, "stalled")
        back_to = lineage_snapshots(project, "stalled")[1]  # where a take-back puts it
        # the third run loads new rows (6 to 8), which a late rollback would take out
        assert project.dbt("--select", "control", "--vars", "{v: 2, start: 6}") == 0
        rollback = "sql:call iceberg.system.rollback_to_snapshot("
        stopped = _sent_after_a_takeover(project, "{v: 2}", rollback, "{v: 2, start: 6}")
        runs_ = lineage_runs(project, "stalled")
        assert late not in runs_ and runs_[-1] != stopped, runs_
        assert project.state("stalled") == project.state("control")
        rows = project.rows(["control", "stalled"])
        assert rows["stalled"] == rows["control"], rows
        assert [r["id"] for r in rows["stalled"]] == list(range(9)), rows
        assert back_to not in all_snapshots(project, "stalled"), "the rollback's target stayed"

    @pytest.mark.profile("session", "thrift")
    def test_a_take_back_killed_before_its_fence_leaves_it_to_the_next_run(
        self, tmp_path, stall_target, monkeypatch
    ):
        """As above, but the run that takes the late UPDATE back (over the stopped run's lease)
        is killed (SIGKILL) after its rollback landed, before its fence's empty commit. It
        noted on the watched record, before the rollback, the snapshot it rolled back to: the
        next run builds that fence first (its own takeover found no run that may still send a
        rollback: the killed one is gone), then loads new rows. The stopped run, resumed, fails
        on the fence, and the new rows stay. Before the note, nothing told the next run to
        fence: the stopped run's rollback took its rows out."""
        names = ["control", "stalled"]
        project = Project(tmp_path / "project", "iceberg", stall_target, ICEBERG_BACKFILL, names)
        late = _backfill_sent_after_a_takeover(project, monkeypatch)
        back_to = lineage_snapshots(project, "stalled")[1]  # where a take-back puts it
        assert project.dbt("--select", "control", "--vars", "{v: 2, start: 6}") == 0
        relation = project.relation("stalled")
        stopped = _stop_before(
            project, "stalled", "{v: 2}", "sql:call iceberg.system.rollback_to_snapshot("
        )
        try:
            time.sleep(STALL_LEASE)
            empty = f"sql:insert into {relation} select * from {relation} where false"
            killed = _stop_before(project, "stalled", "{v: 2}", empty)
            os.kill(killed.pid, signal.SIGKILL)
            killed.wait(timeout=60)
            runs_ = lineage_runs(project, "stalled")
            assert late not in runs_ and back_to in all_snapshots(project, "stalled"), runs_
            assert project.dbt("--select", "stalled", "--vars", "{v: 2, start: 6}") == 0, (
                project.results()
            )
            assert "expired snapshot" in str(project.results()["stalled"]["adapter_response"])
        finally:
            os.kill(stopped.pid, signal.SIGCONT)
        assert stopped.wait(timeout=600) != 0
        resumed = resumed_result(project, "stalled")
        assert resumed["status"] == "error" and "lost its lease" in resumed["message"], resumed
        project.settle("stalled")
        assert project.state("stalled") == project.state("control")
        rows = project.rows(["control", "stalled"])
        assert rows["stalled"] == rows["control"], rows
        assert [r["id"] for r in rows["stalled"]] == list(range(9)), rows
        assert back_to not in all_snapshots(project, "stalled"), "the rollback's target stayed"


def _metadata(project: Project, table: str) -> dict:
    """The table's newest Iceberg metadata file, read."""
    metadata = project.table_dir(table) / "metadata"
    version = max(int(p.name[1:].split(".")[0]) for p in metadata.glob("v*.metadata.json"))
    return json.loads((metadata / f"v{version}.metadata.json").read_text())


def all_snapshots(project: Project, table: str) -> set[int]:
    return {s["snapshot-id"] for s in _metadata(project, table).get("snapshots", [])}


def lineage_snapshots(project: Project, table: str) -> list[int]:
    """The current snapshot and its ancestors, newest first (by parent ids)."""
    meta = _metadata(project, table)
    by_id = {s["snapshot-id"]: s for s in meta.get("snapshots", [])}
    chain, at = [], meta.get("current-snapshot-id")
    while at is not None and at in by_id:
        chain.append(at)
        at = by_id[at].get("parent-snapshot-id")
    return chain


# A creating run whose CTAS writes for a few seconds: enough rows that its files appear well
# before its commit (Delta: data files in the table's folder, then `_delta_log/0…json`;
# Iceberg: `data/` files, then its metadata; Parquet: `_temporary/`, then the files moved up).
SLOW_CREATE = """
{{{{ config(materialized='{materialized}', file_format='{fmt}') }}}}
select id, sha2(cast(id as string), 256) as h from range(0, {{{{ var('rows', 40000000) }}}}, 1, 8)
"""


def _written_but_not_committed(folder: Path, fmt: str) -> tuple[bool, bool]:
    """(the CTAS has written files, it has committed) for the table at `folder`, by its files."""
    if fmt == "delta":
        return any(folder.glob("*.parquet")), any((folder / "_delta_log").glob("[0-9]*.json"))
    if fmt == "iceberg":
        return any((folder / "data").glob("*.parquet")), any((folder / "metadata").glob("v*.json"))
    return (folder / "_temporary").exists(), (folder / "_SUCCESS").exists()


def _ctas_folder(folder: Path, fmt: str) -> Path | None:
    """Where a CTAS of the table at `folder` writes: that folder, or for Parquet the folder of
    its run's own name (`<table>__dbt_new_<run>`, core/materialization/build_plan.py), once
    there."""
    if fmt != "parquet":
        return folder
    return next(iter(sorted(folder.parent.glob(f"{folder.name}__dbt_new_*"))), None)


def _kill_mid_ctas(project: Project, folder: Path, fmt: str) -> Path:
    """A `dbt run` of the project (its default rows: a CTAS of some seconds) killed with its
    process group (dbt and its embedded JVM, as a cancelled CI job) once the CTAS creating the
    table at `folder` has written files and not committed; returns the folder it wrote in."""
    argv = [DBT, "run", "--profiles-dir", str(project.root)]
    with open(project.root / "dbt-killed.log", "wb") as out:
        process = subprocess.Popen(
            argv, cwd=project.root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline, killed, written_in = time.monotonic() + 300, False, None
    while process.poll() is None and time.monotonic() < deadline:
        written_in = _ctas_folder(folder, fmt)
        written, committed = _written_but_not_committed(written_in or folder, fmt)
        if committed:
            break
        if written:
            os.killpg(process.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.05)
    process.wait(timeout=600)
    assert killed and process.returncode == -signal.SIGKILL, "the CTAS ended before the kill"
    assert written_in is not None
    time.sleep(2.0)  # nothing of the dead run goes on writing
    written, committed = _written_but_not_committed(written_in, fmt)
    assert written and not committed, (written, committed)
    return written_in


class TestKillMidCreate:
    """The first build of a model (a table model's, an incremental model's creating run), and a
    Parquet table model's rebuild, killed with SIGKILL while its CTAS writes, before its commit,
    then run again at once: the retry builds the table (on the session, where nothing of the
    dead run goes on). A Parquet CTAS writes under its run's own name
    (`<table>__dbt_new_<run>`): the `_temporary/` a killed one leaves there blocks no later
    build (under the table's own name Spark would refuse every later CTAS,
    LOCATION_ALREADY_EXISTS, until someone deleted it)."""

    @pytest.mark.profile("session")
    @pytest.mark.parametrize("materialized", ["table", "incremental"])
    @pytest.mark.parametrize("fmt", ["delta", "iceberg", "parquet"])
    def test_a_creating_run_killed_mid_write_is_built_by_the_retry(
        self, tmp_path, kill_target, fmt, materialized
    ):
        _, warehouse, reader = kill_target
        project = Project(tmp_path / "project", "delta", kill_target, names=["dead"])
        project.fmt = fmt
        model = SLOW_CREATE.format(materialized=materialized, fmt=fmt)
        (project.root / "models" / "dead.sql").write_text(model)
        if fmt == "iceberg":
            folder = warehouse / "iceberg" / project.schema / "dead"
        else:
            folder = warehouse / f"{project.schema}.db" / "dead"
        written_in = _kill_mid_ctas(project, folder, fmt)
        if fmt == "parquet":  # nothing under the table's own name
            assert written_in != folder and not folder.exists(), sorted(folder.parent.iterdir())

        # the retry, at once, of a small build of the same model
        assert project.dbt("--vars", "{rows: 1000}") == 0, (
            project.root / f"dbt-{project.runs}.log"
        ).read_text()[-3000:]
        read = reader.read.format(fmt).load(str(folder))
        assert read.count() == 1000
        assert sorted(r.id for r in read.select("id").collect()) == list(range(1000))
        if fmt == "parquet":  # the dead run's leftover, under its own name, left for a person
            assert (written_in / "_temporary").exists() and written_in != folder

    @pytest.mark.profile("session")
    def test_a_parquet_rebuild_killed_mid_write_keeps_the_old_table_and_the_retry_rebuilds(
        self, tmp_path, kill_target
    ):
        """A Parquet table model's rebuild (built beside at `<table>__dbt_rewrite`, swapped in by
        two renames) killed while its CTAS writes: the old table stays whole, and the retry at
        once rebuilds it."""
        _, warehouse, reader = kill_target
        project = Project(tmp_path / "project", "delta", kill_target, names=["dead"])
        project.fmt = "parquet"
        model = SLOW_CREATE.format(materialized="table", fmt="parquet")
        (project.root / "models" / "dead.sql").write_text(model)
        folder = warehouse / f"{project.schema}.db" / "dead"
        assert project.dbt("--vars", "{rows: 10}") == 0
        beside = folder.parent / "dead__dbt_rewrite"
        written_in = _kill_mid_ctas(project, beside, "parquet")
        assert not beside.exists(), sorted(folder.parent.iterdir())
        old = reader.read.format("parquet").load(str(folder))
        assert sorted(r.id for r in old.select("id").collect()) == list(range(10))

        assert project.dbt("--vars", "{rows: 1000}") == 0, (
            project.root / f"dbt-{project.runs}.log"
        ).read_text()[-3000:]
        read = reader.read.format("parquet").load(str(folder))
        assert sorted(r.id for r in read.select("id").collect()) == list(range(1000))
        assert (written_in / "_temporary").exists()
