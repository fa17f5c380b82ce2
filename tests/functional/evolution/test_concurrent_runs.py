"""Two runs of one model at once: two real `dbt run -s <model>` processes (each its own
invocation, its own target folder) start at the same moment on one project, on Delta and on
Iceberg, for a model that adds a column (`schema_contract` columns: evolve) and for a model
that discards rows into its quarantine (data_type: discard_row, quarantine: true). Each load is
2 M rows, so the two runs overlap.

Whatever the interleaving, the end must be one of:
- both runs succeeded: the table holds both loads (exact counts and checksums per load) and
  the quarantine each run's discarded rows exactly once (grouped by `_dbt_run_id`);
- one succeeded, the other failed with an error naming the other invocation or a
  concurrent-modification conflict: the table holds exactly the one load (and its quarantine
  its discarded rows only).
Never a run reported successful whose rows are missing (nor the column it added, with its
values). The two runs' timings (run_results.json) must overlap, else the test says so.

On the session profile each `dbt` process is an embedded Spark of its own. The adapter's
metastore is an embedded Derby database in the warehouse folder, which one process at a time
can open (README: "two concurrent `dbt` processes need two warehouses"), so two processes
cannot share it as configured by default. Here they share one warehouse and one metastore the
way the local cluster's servers do: a Derby network server started by this module, which both
processes reach through `server_side_parameters` (the metastore's JDBC URL and driver, and
Derby's client jar on the driver's class path). The tables are then read by path by the test
process's own Spark. Over thrift and connect both processes go through the server the suite
started (or the cluster's), and the tables are read through `dbt show`.

`DbtProject` (real `dbt` processes on a project folder, tables read back by path or through
`dbt show`) also serves contracts/test_quarantine_bad_day.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from dbt.adapters.spark_contracts import jars as jar_resolution
from spark_contracts_dev.cluster import _java, _port_open
from spark_contracts_dev.cluster_commands import (
    DERBY_CLIENT_DRIVER,
    DERBY_ENGINE_JARS,
    HOST,
    derby_command,
)
from spark_contracts_dev.servers import free_port, spark_home
from tests.functional.conftest import JVM_PARAMETERS

DBT = str(Path(sys.executable).with_name("dbt"))
FORMATS = ("delta", "iceberg", "parquet")


# ---- a dbt project run by real `dbt` processes ---------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where the `dbt` processes run: the profile's output (without schema), the warehouse
    folder that holds the tables' files, and the Spark that reads them by path (the session
    profile: the test process's own), or None (read through `dbt show`)."""

    output: dict
    warehouse: Path
    reader: Any = None
    # Iceberg in a REST catalog (`--iceberg-catalog rest`): its tables are read by name (the
    # Hadoop catalogue's folder layout, which a read by path needs, is not there)
    iceberg_by_name: bool = False


class Invocation:
    """One `dbt` process, with a target folder (run_results.json, logs) of its own."""

    def __init__(self, argv: list[str], cwd: Path, target_path: Path) -> None:
        self.target_path = target_path
        target_path.mkdir(parents=True)
        self.log = target_path / "output.txt"
        env = dict(os.environ, DBT_TARGET_PATH=str(target_path))
        env["DBT_LOG_PATH"] = str(target_path / "logs")
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def wait(self, timeout: float = 1800) -> Invocation:
        self.process.wait(timeout=timeout)
        return self

    @property
    def returncode(self) -> Optional[int]:
        return self.process.returncode

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def report(self) -> dict:
        path = self.target_path / "run_results.json"
        return json.loads(path.read_text()) if path.exists() else {}

    @property
    def invocation_id(self) -> Optional[str]:
        return self.report().get("metadata", {}).get("invocation_id")

    def result(self, name: str) -> dict:
        """The model's entry in run_results.json ({} when the process wrote none)."""
        for entry in self.report().get("results", []):
            if entry["unique_id"].split(".")[-1] == name:
                return entry
        return {}

    def message(self, name: str) -> str:
        """The model's error message (else the output's end) and the output's first distinct
        lines naming an exception (what a JVM that died said)."""
        output = self.output()
        message = str(self.result(name).get("message") or "") or output[-4000:]
        causes = dict.fromkeys(
            line.strip()
            for line in output.splitlines()
            if re.search(r"(Exception|Error)\b.*:", line) and not line.lstrip().startswith("at ")
        )
        return "\n".join([message, *list(causes)[:8]])


class DbtProject:
    """A dbt project folder with `models`, a profile on `target` in a schema of its own, run by
    real `dbt` processes (`start`), its tables read back with `query`."""

    def __init__(self, root: Path, target: Target, models: dict[str, str], prefix: str) -> None:
        self.root, self.target = root, target
        self.schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
        (root / "models").mkdir(parents=True)
        for name, sql in models.items():
            (root / "models" / f"{name}.sql").write_text(sql)
        (root / "dbt_project.yml").write_text(
            "name: proj\nversion: '1.0'\nprofile: proj\nconfig-version: 2\n"
        )
        output = dict(target.output, schema=self.schema, threads=4)
        profiles = {"proj": {"target": "dev", "outputs": {"dev": output}}}
        (root / "profiles.yml").write_text(yaml.safe_dump(profiles))
        self.invocations = 0

    def start(self, *args: str) -> Invocation:
        self.invocations += 1
        argv = [DBT, *args, "--profiles-dir", str(self.root)]
        return Invocation(argv, self.root, self.root / f"target_{self.invocations}")

    def run(self, *args: str) -> Invocation:
        return self.start(*args).wait()

    @staticmethod
    def fmt(table: str) -> str:
        """The format of a model named `<stem>_<format>` (and of its `__quarantine`)."""
        return table.split("__")[0].rsplit("_", 1)[1]

    def relation(self, table: str) -> str:
        catalog = "iceberg." if self.fmt(table) == "iceberg" else ""
        return f"{catalog}{self.schema}.{table}"

    def table_dir(self, table: str) -> Path:
        if self.fmt(table) == "iceberg":
            return self.target.warehouse / "iceberg" / self.schema / table
        return self.target.warehouse / f"{self.schema}.db" / table

    def columns(self, table: str) -> list[str]:
        """The table's column names (read like `query`; through `dbt show`, of a row)."""
        reader = self.target.reader
        if reader is not None:
            return list(self._read(table).columns)
        shown = self.run(
            "show",
            "--quiet",
            "--output",
            "json",
            "--limit",
            "1",
            "--inline",
            f"select * from {self.relation(table)}",
        )
        assert shown.returncode == 0, shown.output()
        return list(self._shown(shown.output())[0])

    def _read(self, table: str) -> Any:
        """The table as the test process's Spark reads it now: by path, or (an Iceberg table in
        a REST catalog) by name, refreshed past its catalog's cache."""
        reader = self.target.reader
        if self.target.iceberg_by_name and self.fmt(table) == "iceberg":
            reader.sql(f"refresh table {self.relation(table)}")
            return reader.table(self.relation(table))
        return reader.read.format(self.fmt(table)).load(str(self.table_dir(table)))

    @staticmethod
    def _shown(text: str) -> list[dict]:
        start = re.search(r"^\{", text, re.MULTILINE)
        assert start is not None, text
        return json.JSONDecoder().raw_decode(text[start.start() :])[0]["show"]

    def query(self, sql: str, **tables: str) -> list[tuple]:
        """The rows of `sql`, whose `{alias}` placeholders name the tables `tables` maps them
        to: read by path by the test process's Spark, or through the profile by `dbt show`."""
        reader = self.target.reader
        if reader is not None:
            views = {}
            for alias, table in tables.items():
                view = f"v_{uuid.uuid4().hex[:12]}"
                self._read(table).createOrReplaceTempView(view)
                views[alias] = view
            return [tuple(r) for r in reader.sql(sql.format(**views)).collect()]
        inline = sql.format(**{alias: self.relation(t) for alias, t in tables.items()})
        shown = self.run(
            "show", "--quiet", "--output", "json", "--limit", "100000", "--inline", inline
        )
        assert shown.returncode == 0, shown.output()
        return [tuple(row.values()) for row in self._shown(shown.output())]


# ---- where two processes share one warehouse and metastore -----------------------------------


def shared_metastore(request: pytest.FixtureRequest, home: Path) -> dict[str, str]:
    """A Derby network server (as the local cluster starts one) running until the module ends,
    and the session profile's `server_side_parameters` that make an embedded Spark use it as
    its metastore."""
    jars = jar_resolution.configured_jars_dir(None)
    if jars is None:
        raise pytest.UsageError(
            f"${jar_resolution.JARS_ENV_VAR}: a jar folder holding derbynet and derbyclient"
            " (`make jars`) is needed to share a metastore between two embedded dbt processes"
        )
    extra = jar_resolution.cluster_jar_paths(jars)
    engine = [spark_home() / "jars" / name for name in DERBY_ENGINE_JARS]
    port = free_port()
    with open(home / "derby.log", "wb") as log:
        derby = subprocess.Popen(
            derby_command(_java(), engine + [extra["derbynet"]], port, home),
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def stop() -> None:
        derby.terminate()
        try:
            derby.wait(timeout=30)
        except subprocess.TimeoutExpired:
            derby.kill()
            derby.wait()

    request.addfinalizer(stop)
    deadline = time.monotonic() + 120
    while not _port_open(port):
        assert derby.poll() is None, (home / "derby.log").read_text()
        assert time.monotonic() < deadline, "Derby's network server did not open its port"
        time.sleep(0.5)
    return {
        **JVM_PARAMETERS,
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby://{HOST}:{port}/metastore;create=true"
        ),
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": DERBY_CLIENT_DRIVER,
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.driver.extraClassPath": str(extra["derbyclient"]),
    }


@pytest.fixture(scope="module")
def concurrent_target(request: pytest.FixtureRequest, tmp_path_factory) -> Target:
    """Session: a warehouse of this module's own with the shared metastore (see the module);
    thrift / connect: the suite's server (or the cluster's) and its warehouse."""
    if request.config.getoption("--profile") != "session":
        warehouse = Path(request.getfixturevalue("warehouse_dir")).resolve()
        return Target(request.getfixturevalue("dbt_profile_target"), warehouse)
    warehouse = tmp_path_factory.mktemp("concurrent_warehouse")
    params = shared_metastore(request, tmp_path_factory.mktemp("concurrent_derby"))
    iceberg = request.getfixturevalue("iceberg_parameters")
    output = {
        "type": "spark_contracts",
        "method": "session",
        "warehouse_dir": str(warehouse),
        "server_side_parameters": {**params, **iceberg},
    }
    return Target(output, warehouse, request.getfixturevalue("worker_spark"), bool(iceberg))


# ---- the models and what each load holds ------------------------------------------------------

LOAD = 2_000_000  # rows per concurrent load: a few seconds of work, so the two runs overlap
OFFSET = 100_000_000  # load b's ids are b * OFFSET + k, k in range(LOAD); v1's are 0, 1, 2
FIRST = 3
HEAD = (
    "{{ config(materialized='incremental', incremental_strategy='append', "
    "file_format='FMT', schema_contract=CONTRACT) }}\n"
)
# columns: evolve; the concurrent runs (v2) both add `note`
EVOLVES = (
    HEAD.replace("CONTRACT", "{'columns': 'evolve'}")
    + f"""{{% if var('v', 1) == 1 %}}
select id, 0 as batch from range({FIRST})
{{% else %}}
select k + {{{{ var('batch') }}}} * {OFFSET} as id, {{{{ var('batch') }}}} as batch,
       concat('note_', cast(k as string)) as note
from (select id as k from range({LOAD}))
{{% endif %}}
"""
)
# data_type: discard_row with quarantine: every tenth row's `n` does not cast into bigint
QUARANTINES = (
    HEAD.replace(
        "CONTRACT", "{'columns': 'evolve', 'data_type': 'discard_row', 'quarantine': true}"
    )
    + f"""{{% if var('v', 1) == 1 %}}
select id, cast(id as bigint) as n, 0 as batch from range({FIRST})
{{% else %}}
select k + {{{{ var('batch') }}}} * {OFFSET} as id,
       if(k % 10 = 0, concat('bad_', cast(k as string)), cast(k as string)) as n,
       {{{{ var('batch') }}}} as batch
from (select id as k from range({LOAD}))
{{% endif %}}
"""
)
MODELS = {
    **{f"ev_{fmt}": EVOLVES.replace("FMT", fmt) for fmt in ("delta", "iceberg")},
    **{f"q_{fmt}": QUARANTINES.replace("FMT", fmt) for fmt in ("delta", "iceberg")},
}
# what a failed run's error must name when the other run succeeded: the other invocation (added
# per case), or a conflict between concurrent writers (Delta's Concurrent*Exception, Iceberg's
# CommitFailedException, the adapter's "another writer committed")
CONFLICT = re.compile(
    r"Concurrent\w*Exception|concurrent (update|modification|write|transaction|commit)"
    r"|conflict|CommitFailedException|Cannot commit|another writer|another (dbt )?run",
    re.IGNORECASE,
)


def load(batch: int, kept) -> tuple[int, int, int]:
    """(count, distinct ids, sum of ids) of load `batch`'s rows whose k `kept` keeps."""
    ids = [batch * OFFSET + k for k in range(LOAD) if kept(k)]
    return len(ids), len(ids), sum(ids)


def first_rows() -> tuple[int, int, int]:
    return FIRST, FIRST, sum(range(FIRST))


@pytest.fixture(scope="module")
def concurrent_project(concurrent_target, tmp_path_factory) -> DbtProject:
    root = tmp_path_factory.mktemp("concurrent") / "project"
    project = DbtProject(root, concurrent_target, MODELS, "twice")
    first = project.run("run", "--vars", "{v: 1}")  # every model's table, one process
    assert first.returncode == 0, first.output()
    return project


def overlapped(a: Invocation, b: Invocation, name: str) -> bool:
    """Whether the two runs of `name` were running at one moment (run_results' timings)."""
    spans = []
    for run in (a, b):
        timing = run.result(name).get("timing") or []
        if not timing:
            return True  # no timings (the process died): nothing tells they did not
        spans.append((min(t["started_at"] for t in timing), max(t["completed_at"] for t in timing)))
    (a0, a1), (b0, b1) = spans
    return a0 < b1 and b0 < a1


@pytest.mark.parametrize("name", sorted(MODELS))
def test_two_runs_at_once_both_load_or_one_fails_naming_the_other(concurrent_project, name):
    project = concurrent_project
    vars_ = {batch: f"{{v: 2, batch: {batch}}}" for batch in (1, 2)}
    started = {batch: project.start("run", "-s", name, "--vars", vars_[batch]) for batch in (1, 2)}
    runs = {batch: run.wait() for batch, run in started.items()}
    outputs = {b: (r.returncode, r.message(name)[-2000:]) for b, r in runs.items()}
    assert overlapped(runs[1], runs[2], name), f"the two runs did not overlap: {outputs}"

    succeeded = [b for b, r in runs.items() if r.returncode == 0]
    for batch in succeeded:
        assert runs[batch].result(name).get("status") == "success", outputs
    assert succeeded, f"both runs failed: {outputs}"

    # the table holds v1's rows and exactly the loads of the runs that succeeded
    quarantines = name.startswith("q_")
    kept = (lambda k: k % 10 != 0) if quarantines else (lambda k: True)
    expected = {0: first_rows(), **{b: load(b, kept) for b in succeeded}}
    table = project.query(
        "select batch, count(*), count(distinct id), sum(id) from {t} group by batch", t=name
    )
    assert {row[0]: tuple(row[1:]) for row in table} == expected, outputs
    if quarantines:
        quarantined = project.query(
            "select _dbt_run_id, count(*), count(distinct id), sum(id), min(batch), max(batch)"
            " from {q} group by _dbt_run_id",
            q=f"{name}__quarantine",
        )
        discarded = {
            runs[b].invocation_id: (*load(b, lambda k: k % 10 == 0), b, b) for b in succeeded
        }
        assert {row[0]: tuple(row[1:]) for row in quarantined} == discarded, outputs
    else:  # the column the runs added, with the loaded values
        columns = project.columns(name)
        assert "note" in columns, f"{name} lost the column `note` a run loaded: {columns} {outputs}"
        notes = project.query(
            "select batch, count_if(note = concat('note_', cast(id - batch * {offset} as string)))"
            " from {t} group by batch".replace("{offset}", str(OFFSET)),
            t=name,
        )
        assert dict(notes) == {0: 0, **{b: LOAD for b in succeeded}}, outputs

    # a run that failed while the other succeeded says why: the other run, or the conflict
    if len(succeeded) == 1:
        [winner] = succeeded
        message = runs[3 - winner].message(name)
        named = runs[winner].invocation_id or "(no invocation id)"
        assert named in message or CONFLICT.search(message), (
            f"the failed run's error names neither the other invocation ({named}) nor a"
            f" concurrent modification:\n{message}"
        )
