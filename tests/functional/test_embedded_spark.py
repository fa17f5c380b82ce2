"""The embedded Spark (`method: session`) end to end, with dbt run as a user runs it: in its own
process, so each invocation starts its own JVM against the same warehouse folder.

Every dbt command runs in a subprocess: the Derby metastore admits one JVM per warehouse, and
this pytest process may hold an embedded session of its own on another warehouse. The project,
its profiles.yml and its warehouse live in temporary folders shared by the module. Two JVMs in
all (each costs ~20-60 s to start on 2 cores): the CLI `dbt run`, then one process that runs
`dbt run` again and `dbt docs generate` through dbtRunner and reads the tables with Spark.

    export DBT_SPARK_CONTRACTS_JARS=$PWD/.jars
    .venv/bin/pytest tests/functional/test_embedded_spark.py

Covered (issue 2, "Done when"):
- one `dbt run` builds a delta, an iceberg and a parquet model; DESCRIBE TABLE EXTENDED on the
  real tables shows each provider;
- a second `dbt run` in a new process sees them (persistent Derby metastore and Iceberg catalog):
  incremental models take the is_incremental() branch and append;
- missing Java, missing jars, a wrong profile key and a wrong `method` each end dbt with one
  clear message (what is wrong, what to do) and no Python traceback;
- `dbt docs generate` writes the full nested types (struct, array<struct>, map) of a delta and
  an iceberg model into catalog.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the virtualenv's bin: dbt lives beside its python
DBT = str(BIN / "dbt") if (BIN / "dbt").is_file() else str(REPO / ".venv" / "bin" / "dbt")
PYTHON = sys.executable
SCHEMA = "embedded"
TIMEOUT = 900

NESTED_SELECT = (
    "select 1 as id,\n"
    "  named_struct('a', 1, 'b', array('x', 'y')) as s,\n"
    "  array(named_struct('k', 'first', 'v', cast(1.5 as double))) as arr,\n"
    "  map('m', 1) as m"
)
# The full types Spark prints for the columns above.
NESTED_TYPES = {
    "id": "int",
    "s": "struct<a:int,b:array<string>>",
    "arr": "array<struct<k:string,v:double>>",
    "m": "map<string,int>",
}


def _incremental(file_format: str) -> str:
    """First run: one row (1, 'full'); every later run appends (row count + 1, 'incremental')."""
    return (
        "{{ config(materialized='incremental', incremental_strategy='append', "
        f"file_format='{file_format}') }}}}\n"
        "{% if is_incremental() %}\n"
        "select cast((select count(*) from {{ this }}) + 1 as int) as id, 'incremental' as run_kind\n"
        "{% else %}\n"
        "select 1 as id, 'full' as run_kind\n"
        "{% endif %}\n"
    )


MODELS = {
    "fmt_delta.sql": "{{ config(materialized='table', file_format='delta') }}\n" + NESTED_SELECT,
    "fmt_iceberg.sql": "{{ config(materialized='table', file_format='iceberg') }}\n"
    + NESTED_SELECT,
    "fmt_parquet.sql": "{{ config(materialized='table', file_format='parquet') }}\n"
    "select 1 as id, 'a' as name",
    "incr_delta.sql": _incremental("delta"),
    "incr_iceberg.sql": _incremental("iceberg"),
}

# The second process: dbt again (through dbtRunner, so that the second run, docs generate and
# the checks share one JVM), then DESCRIBE and SELECT on the real tables in the same session.
SECOND_PROCESS = """
import json, sys
from pathlib import Path

from dbt.cli.main import dbtRunner

from dbt.adapters.spark_contracts.jars import configured_jars_dir
from dbt.adapters.spark_contracts.connection.session import EmbeddedSparkConfig, get_session

project, warehouse, schema = sys.argv[1], Path(sys.argv[2]).resolve(), sys.argv[3]
dirs = ["--project-dir", project, "--profiles-dir", project]
runner = dbtRunner()
run = runner.invoke(["run", "--select", "incr_delta", "incr_iceberg", *dirs])
docs = runner.invoke(["docs", "generate", *dirs])
# dbt's session: one per process, and the same configuration as the profile's.
spark = get_session(EmbeddedSparkConfig(warehouse_dir=warehouse, jars_dir=configured_jars_dir(None)))


def provider(relation):
    for row in spark.sql(f"describe table extended {relation}").collect():
        if row[0].strip().lower() == "provider":
            return row[1].strip().lower()
    return None


out = {
    "second_run": {
        "success": run.success,
        "exception": repr(run.exception) if run.exception else None,
        "statuses": {r.node.name: str(r.status) for r in run.result.results} if run.result else {},
    },
    "docs_generate": {
        "success": docs.success,
        "exception": repr(docs.exception) if docs.exception else None,
    },
    "providers": {
        "fmt_delta": provider(f"{schema}.fmt_delta"),
        "fmt_iceberg": provider(f"iceberg.{schema}.fmt_iceberg"),
        "fmt_parquet": provider(f"{schema}.fmt_parquet"),
        "incr_delta": provider(f"{schema}.incr_delta"),
        "incr_iceberg": provider(f"iceberg.{schema}.incr_iceberg"),
    },
    "incr_delta": [list(r) for r in spark.sql(
        f"select id, run_kind from {schema}.incr_delta order by id").collect()],
    "incr_iceberg": [list(r) for r in spark.sql(
        f"select id, run_kind from iceberg.{schema}.incr_iceberg order by id").collect()],
    # dbt's temporary views (`<model>__dbt_tmp`) live in this session only: leave them out.
    "session_tables": sorted(
        r.tableName for r in spark.sql(f"show tables in {schema}").collect() if not r.isTemporary
    ),
    "iceberg_tables": sorted(
        r.tableName for r in spark.sql(f"show tables in iceberg.{schema}").collect()
    ),
}
print("RESULT " + json.dumps(out))
spark.stop()
"""


def _env(**overrides: Optional[str]) -> Dict[str, str]:
    env = dict(os.environ)
    for key in ("DBT_PROFILES_DIR", "DBT_PROJECT_DIR", "DBT_TARGET", "DBT_PROFILE"):
        env.pop(key, None)
    env["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    env["DBT_USE_COLORS"] = "false"
    env["PYTHONUNBUFFERED"] = "1"
    if "DBT_SPARK_CONTRACTS_JARS" not in env and (REPO / ".jars").is_dir():
        env["DBT_SPARK_CONTRACTS_JARS"] = str(REPO / ".jars")
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


class Result:
    def __init__(self, proc: subprocess.CompletedProcess, seconds: float):
        self.returncode = proc.returncode
        self.output = proc.stdout + proc.stderr
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"exit {self.returncode} after {self.seconds:.0f}s:\n{self.output[-6000:]}"


def _run(args: List[str], cwd: Path, env: Optional[Dict[str, str]] = None) -> Result:
    started = time.monotonic()
    proc = subprocess.run(
        args,
        cwd=cwd,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    result = Result(proc, time.monotonic() - started)
    print(f"$ {' '.join(args[1:3])}: exit {result.returncode} in {result.seconds:.1f}s")
    return result


def _dbt(project: Path, *args: str, env: Optional[Dict[str, str]] = None) -> Result:
    return _run([DBT, *args, "--profiles-dir", str(project)], project, env)


def _write_project(root: Path, models: Dict[str, str], targets: Dict[str, Dict[str, Any]]) -> None:
    (root / "models").mkdir(parents=True)
    for name, sql in models.items():
        (root / "models" / name).write_text(sql)
    (root / "dbt_project.yml").write_text(
        yaml.safe_dump(
            {
                "name": "embedded_spark_test",
                "version": "1.0",
                "config-version": 2,
                "profile": "embedded_spark_test",
                "model-paths": ["models"],
            }
        )
    )
    first = next(iter(targets))
    (root / "profiles.yml").write_text(
        yaml.safe_dump({"embedded_spark_test": {"target": first, "outputs": targets}})
    )


def _run_results(project: Path) -> Dict[str, str]:
    data = json.loads((project / "target" / "run_results.json").read_text())
    return {r["unique_id"].split(".")[-1]: r["status"] for r in data["results"]}


def _assert_no_traceback(result: Result) -> None:
    assert "Traceback (most recent call last)" not in result.output, result
    assert "Py4JJavaError" not in result.output, result


# --------------------------------------------------------------------------------------------
# One project, one warehouse: run; then, in a new process, run again, docs generate, DESCRIBE.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    root = tmp_path_factory.mktemp("embedded_project")
    warehouse = tmp_path_factory.mktemp("embedded_warehouse")
    _write_project(
        root,
        MODELS,
        {
            "session": {
                "type": "spark_contracts",
                "schema": SCHEMA,
                "warehouse_dir": str(warehouse),
                "threads": 1,
            }
        },
    )
    return {"root": root, "warehouse": warehouse}


@pytest.fixture(scope="module")
def first_run(project: Dict[str, Path]) -> Dict[str, str]:
    result = _dbt(project["root"], "run")
    assert result.returncode == 0, result
    return _run_results(project["root"])


@pytest.fixture(scope="module")
def second_process(project: Dict[str, Path], first_run: Dict[str, str]) -> Dict[str, Any]:
    """A new process: `dbt run` of the incremental models only (the table models stay as the
    first process built them), `dbt docs generate`, then queries on the real tables."""
    script = project["root"] / "second_process.py"
    script.write_text(SECOND_PROCESS)
    args = [PYTHON, str(script), str(project["root"]), str(project["warehouse"]), SCHEMA]
    result = _run(args, project["root"])
    assert result.returncode == 0, result
    line = next((x for x in result.output.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, result
    return json.loads(line[len("RESULT ") :])


@pytest.fixture(scope="module")
def catalog(project: Dict[str, Path], second_process: Dict[str, Any]) -> Dict[str, Any]:
    assert second_process["docs_generate"] == {"success": True, "exception": None}
    return json.loads((project["root"] / "target" / "catalog.json").read_text())


def test_one_run_builds_delta_iceberg_and_parquet(first_run: Dict[str, str]) -> None:
    assert first_run == {
        "fmt_delta": "success",
        "fmt_iceberg": "success",
        "fmt_parquet": "success",
        "incr_delta": "success",
        "incr_iceberg": "success",
    }


def test_second_run_in_new_process(second_process: Dict[str, Any]) -> None:
    assert second_process["second_run"] == {
        "success": True,
        "exception": None,
        "statuses": {"incr_delta": "success", "incr_iceberg": "success"},
    }


def test_providers_on_the_real_tables(second_process: Dict[str, Any]) -> None:
    assert second_process["providers"] == {
        "fmt_delta": "delta",
        "fmt_iceberg": "iceberg",
        "fmt_parquet": "parquet",
        "incr_delta": "delta",
        "incr_iceberg": "iceberg",
    }


def test_incremental_appended_after_restart(second_process: Dict[str, Any]) -> None:
    # The second process found the tables of the first (is_incremental() true) and appended.
    assert second_process["incr_delta"] == [[1, "full"], [2, "incremental"]]
    assert second_process["incr_iceberg"] == [[1, "full"], [2, "incremental"]]


def test_catalogs_list_the_tables(second_process: Dict[str, Any]) -> None:
    # Delta and parquet in the session catalog (Derby metastore), Iceberg in its own catalog.
    assert second_process["session_tables"] == ["fmt_delta", "fmt_parquet", "incr_delta"]
    assert second_process["iceberg_tables"] == ["fmt_iceberg", "incr_iceberg"]


@pytest.mark.parametrize("model", ["fmt_delta", "fmt_iceberg"])
def test_docs_catalog_has_full_nested_types(catalog: Dict[str, Any], model: str) -> None:
    node = catalog["nodes"][f"model.embedded_spark_test.{model}"]
    types = {name.lower(): col["type"] for name, col in node["columns"].items()}
    assert types == NESTED_TYPES
    expected_database = "iceberg" if model == "fmt_iceberg" else None
    assert node["metadata"]["schema"] == SCHEMA
    if expected_database:
        assert node["metadata"]["database"] == expected_database


def test_docs_catalog_lists_every_model(catalog: Dict[str, Any]) -> None:
    assert sorted(k.split(".")[-1] for k in catalog["nodes"]) == sorted(
        name[: -len(".sql")] for name in MODELS
    )
    assert catalog["errors"] in (None, [])


# --------------------------------------------------------------------------------------------
# One clear message for each set-up mistake; nothing here starts a JVM.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broken_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("broken_project")
    warehouse = str(tmp_path_factory.mktemp("broken_warehouse"))
    base = {"type": "spark_contracts", "schema": SCHEMA, "threads": 1}
    _write_project(
        root,
        {"one.sql": "select 1 as id"},
        {
            "good": {**base, "warehouse_dir": warehouse},
            "bad_key": {**base, "warehouse_directory": warehouse},
            "bad_method": {**base, "method": "foo", "warehouse_dir": warehouse},
            "odbc": {**base, "method": "odbc", "host": "h", "driver": "/opt/simba.so", "port": 443},
        },
    )
    return root


def _path_without_java() -> str:
    keep = [str(BIN)]
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and entry not in keep and not (Path(entry) / "java").exists():
            keep.append(entry)
    return os.pathsep.join(keep)


def test_missing_java(broken_project: Path, tmp_path: Path) -> None:
    env = _env(JAVA_HOME=str(tmp_path / "no-such-jdk"), PATH=_path_without_java())
    result = _dbt(broken_project, "run", "--target", "good", env=env)
    assert result.returncode != 0, result
    assert "needs Java 17" in result.output, result
    assert f"JAVA_HOME={tmp_path / 'no-such-jdk'} has no bin/java" in result.output, result
    assert "Install a JDK 17" in result.output, result
    assert "set JAVA_HOME" in result.output, result
    _assert_no_traceback(result)


def test_missing_jars(broken_project: Path, tmp_path: Path) -> None:
    empty = tmp_path / "jars"
    empty.mkdir()
    env = _env(DBT_SPARK_CONTRACTS_JARS=str(empty))
    result = _dbt(broken_project, "run", "--target", "good", env=env)
    assert result.returncode != 0, result
    flat = " ".join(result.output.split())  # dbt may wrap long lines
    for jar in (
        "delta-spark_2.13-4.3.1.jar",
        "delta-storage-4.3.1.jar",
        "iceberg-spark-runtime-4.1_2.13-1.12.0.jar",
    ):
        assert jar in flat, result
    assert f"python -m dbt.adapters.spark_contracts.jars fetch {empty}" in flat, result
    assert "DBT_SPARK_CONTRACTS_JARS" in flat, result
    _assert_no_traceback(result)


def test_unknown_profile_key(broken_project: Path) -> None:
    result = _dbt(broken_project, "run", "--target", "bad_key")
    assert result.returncode != 0, result
    assert "Unknown profile key(s) for type spark_contracts" in result.output, result
    assert "`warehouse_directory` (did you mean `warehouse_dir`?)" in result.output, result
    _assert_no_traceback(result)


@pytest.mark.parametrize("command", ["debug", "run"])
def test_odbc_is_refused_when_the_profile_loads(broken_project: Path, command: str) -> None:
    """No half-working method: dbt debug and dbt run stop at the profile, with one clear
    error naming the method, why, and what to use instead."""
    result = _dbt(broken_project, command, "--target", "odbc")
    assert result.returncode != 0, result
    flat = " ".join(result.output.split())
    assert "`method: odbc` is not supported by spark_contracts" in flat, result
    assert "Use `method: thrift` (or `http`)" in flat, result
    assert "`method: connect` for Spark Connect" in flat, result
    _assert_no_traceback(result)


def test_unknown_method(broken_project: Path) -> None:
    result = _dbt(broken_project, "run", "--target", "bad_method")
    assert result.returncode != 0, result
    assert "Unknown `method: foo`; allowed: thrift, http, session, connect" in (result.output), (
        result
    )
    _assert_no_traceback(result)
