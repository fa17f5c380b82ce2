"""Views longer than 32,700 characters on the embedded session (issue 30, item 5).

Hive's metastore schema stores a view's SQL in TBLS.VIEW_ORIGINAL_TEXT / VIEW_EXPANDED_TEXT,
LONG VARCHARs (32,700 characters at most) on Derby; the session widens them to CLOBs when it
starts (derby_metastore.py). Covered:

- a view model whose SQL is over 40,000 characters: `dbt run` creates it, the view returns the
  right rows and its whole text is stored; a second `dbt run` replaces it;
- a metastore created before the change (the session as the adapter built it then, with LONG
  VARCHARs, holding a delta table, a parquet table and a view) is widened in place by the next
  `dbt run`: its tables and view are kept, and the long view is created, then replaced.

The session profile only: the local thrift / connect servers and the cluster keep Hive's LONG
VARCHARs (their metastores are opened by spark-submit JVMs, where the adapter runs no code).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml
from dbt.tests.util import run_dbt

from tests.functional.conftest import TEST_JAVA_OPTIONS
from tests.functional.test_embedded_spark import _env

pytestmark = pytest.mark.profile("session")

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
TIMEOUT = 900
ROWS = 1000

# One CASE branch per id: the model's SQL is ~71,000 characters, the view's text as long.
LONG_VIEW = (
    "{{ config(materialized='view') }}\n"
    "select id,\n  case id\n"
    + "".join(
        f"    when {i} then 'label {i:04d} of a view longer than 40,000 characters'\n"
        for i in range(ROWS)
    )
    + "  end as label\nfrom range({{ var('rows', "
    + str(ROWS)
    + ") }})\n"
)


def _label(i: int) -> str:
    return f"label {i:04d} of a view longer than 40,000 characters"


def test_the_model_is_longer_than_40000_characters() -> None:
    assert len(LONG_VIEW) > 40_000


class TestLongView:
    @pytest.fixture(scope="class")
    def models(self) -> Dict[str, str]:
        return {"long_view.sql": LONG_VIEW}

    def _stats(self, project: Any) -> tuple:
        return tuple(
            project.run_sql(
                f"select count(*), sum(id), min(label), max(label) "
                f"from {project.test_schema}.long_view",
                fetch="one",
            )
        )

    def test_run_creates_then_replaces_the_long_view(self, project: Any) -> None:
        results = run_dbt(["run"])
        assert [r.status for r in results] == ["success"]
        assert self._stats(project) == (ROWS, ROWS * (ROWS - 1) // 2, _label(0), _label(ROWS - 1))
        text = project.run_sql(f"show create table {project.test_schema}.long_view", fetch="one")
        assert len(text[0]) > 40_000 and _label(ROWS - 1) in text[0]  # stored whole

        results = run_dbt(["run", "--vars", "{rows: 10}"])  # `create or replace view`
        assert [r.status for r in results] == ["success"]
        assert self._stats(project) == (10, 45, _label(0), _label(9))


# --------------------------------------------------------------------------------------------
# A metastore from before the change: made by the old session, then opened by `dbt run`.
# --------------------------------------------------------------------------------------------

# The session as the adapter built it before it widened the metastore: the same Spark conf
# (EmbeddedSparkConfig.spark_conf), Hive's metastore as DataNucleus creates it.
EARLIER_ADAPTER = """
import json, sys
from pathlib import Path

from pyspark.sql import SparkSession

from dbt.adapters.spark_contracts.connection import derby_metastore
from dbt.adapters.spark_contracts.jars import configured_jars_dir
from dbt.adapters.spark_contracts.connection.session import EmbeddedSparkConfig

warehouse, schema, java_options = Path(sys.argv[1]).resolve(), sys.argv[2], sys.argv[3]
config = EmbeddedSparkConfig(
    warehouse_dir=warehouse,
    jars_dir=configured_jars_dir(None),
    server_side_parameters={"spark.driver.defaultJavaOptions": java_options},
)
config.iceberg_warehouse.mkdir(parents=True, exist_ok=True)
builder = SparkSession.builder
for key, value in config.spark_conf().items():
    builder = builder.config(key, value)
spark = builder.enableHiveSupport().getOrCreate()
spark.sql(f"create schema {schema}")
spark.sql(f"create table {schema}.old_delta using delta as select 1 as id, 'delta' as kind")
spark.sql(f"create table {schema}.old_parquet using parquet as select 2 as id, 'parquet' as kind")
spark.sql(
    f"create view {schema}.old_view as "
    f"select id, kind, 'made before the widening' as note from {schema}.old_delta"
)
print("RESULT " + json.dumps(derby_metastore.column_types(spark._jvm, config.metastore_url)))
spark.stop()
"""

# This version: `dbt run` twice through dbtRunner, then reads in the same process's session.
THIS_ADAPTER = """
import json, sys
from pathlib import Path

from dbt.cli.main import dbtRunner

from dbt.adapters.spark_contracts.connection import derby_metastore
from dbt.adapters.spark_contracts.jars import configured_jars_dir
from dbt.adapters.spark_contracts.connection.session import EmbeddedSparkConfig, get_session

project, warehouse, schema = sys.argv[1], Path(sys.argv[2]).resolve(), sys.argv[3]
dirs = ["--project-dir", project, "--profiles-dir", project]
runner = dbtRunner()


def run(*args):
    result = runner.invoke(["run", *args, *dirs])
    return {
        "success": result.success,
        "exception": repr(result.exception) if result.exception else None,
        "statuses": {r.node.name: str(r.status) for r in result.result.results}
        if result.result else {},
    }


def rows(sql):
    return [list(r) for r in spark.sql(sql).collect()]


first = run()
spark = get_session(EmbeddedSparkConfig(warehouse_dir=warehouse, jars_dir=configured_jars_dir(None)))
stats = f"select count(*), sum(id), min(label), max(label) from {schema}.long_view"
out = {
    "first_run": first,
    "column_types": derby_metastore.column_types(spark._jvm, EmbeddedSparkConfig(
        warehouse_dir=warehouse).metastore_url),
    "tables": sorted(r.tableName for r in spark.sql(f"show tables in {schema}").collect()
                     if not r.isTemporary),
    "old_delta": rows(f"select id, kind from {schema}.old_delta"),
    "old_parquet": rows(f"select id, kind from {schema}.old_parquet"),
    "old_view": rows(f"select id, kind, note from {schema}.old_view"),
    "long_view": rows(stats),
    "long_view_text": len(spark.sql(f"show create table {schema}.long_view").collect()[0][0]),
}
out["second_run"] = run("--vars", "{rows: 10}")
out["long_view_replaced"] = rows(stats)
print("RESULT " + json.dumps(out))
spark.stop()
"""


def _result_of(script: Path, *args: str) -> Dict[str, Any]:
    """Run `script` in a new Python process (its own JVM); the JSON it prints after RESULT."""
    started = time.monotonic()
    proc = subprocess.run(
        [PYTHON, str(script), *args],
        cwd=script.parent,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    output = proc.stdout + proc.stderr
    print(f"$ {script.name}: exit {proc.returncode} in {time.monotonic() - started:.1f}s")
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line is not None, output[-6000:]
    return json.loads(line[len("RESULT ") :])


def test_a_metastore_from_before_is_widened_in_place(tmp_path: Path) -> None:
    schema = "upgraded"
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "long_view.sql").write_text(LONG_VIEW)
    (tmp_path / "dbt_project.yml").write_text(
        yaml.safe_dump(
            {
                "name": "long_view_text",
                "version": "1.0",
                "config-version": 2,
                "profile": "long_view_text",
                "model-paths": ["models"],
            }
        )
    )
    target = {
        "type": "spark_contracts",
        "method": "session",
        "schema": schema,
        "warehouse_dir": str(warehouse),
        "threads": 1,
        "server_side_parameters": {"spark.driver.defaultJavaOptions": TEST_JAVA_OPTIONS},
    }
    (tmp_path / "profiles.yml").write_text(
        yaml.safe_dump({"long_view_text": {"target": "dev", "outputs": {"dev": target}}})
    )
    earlier = tmp_path / "earlier_adapter.py"
    earlier.write_text(EARLIER_ADAPTER)
    this = tmp_path / "this_adapter.py"
    this.write_text(THIS_ADAPTER)

    before = _result_of(earlier, str(warehouse), schema, TEST_JAVA_OPTIONS)
    assert before == {"VIEW_EXPANDED_TEXT": "LONG VARCHAR", "VIEW_ORIGINAL_TEXT": "LONG VARCHAR"}

    after = _result_of(this, str(tmp_path), str(warehouse), schema)
    assert after["first_run"] == {
        "success": True,
        "exception": None,
        "statuses": {"long_view": "success"},
    }
    assert after["column_types"] == {"VIEW_EXPANDED_TEXT": "CLOB", "VIEW_ORIGINAL_TEXT": "CLOB"}
    assert after["tables"] == ["long_view", "old_delta", "old_parquet", "old_view"]
    assert after["old_delta"] == [[1, "delta"]]
    assert after["old_parquet"] == [[2, "parquet"]]
    assert after["old_view"] == [[1, "delta", "made before the widening"]]  # its text kept
    assert after["long_view"] == [[ROWS, ROWS * (ROWS - 1) // 2, _label(0), _label(ROWS - 1)]]
    assert after["long_view_text"] > 40_000
    assert after["second_run"]["success"], after["second_run"]
    assert after["long_view_replaced"] == [[10, 45, _label(0), _label(9)]]
