"""Python models on real Spark, through the same write path as SQL models.

The model's code runs in the dbt process with the thread's SparkSession (method `session`, and
`connect`: run with `--profile connect -n 0`); its DataFrame becomes a temporary view that the
table and incremental materializations read like a SQL model's query, so schema contracts
and schema evolution bind alike, and the DataFrame is evaluated once.
Methods that only carry SQL (thrift, http, odbc) refuse Python models when dbt parses.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml
from dbt.adapters.factory import reset_adapters
from dbt.cli.main import dbtRunner
from dbt.tests.util import run_dbt, run_dbt_and_capture, write_file

from tests.functional.evolution.test_evolution_matrix import rows_of, schema_of
from tests.functional.probes import ROWS

SOURCE_SQL = "{{ config(materialized='table') }}\nselect id, id * 10 as amount from range(5)\n"

TABLE_PY = """
from pyspark.sql import functions as F


def model(dbt, session):
    dbt.config(materialized="table")
    orders = dbt.ref("source_rows")
    return orders.withColumn("doubled", F.col("amount") * 2)
"""

INCREMENTAL_PY = """
from pyspark.sql import functions as F


def model(dbt, session):
    dbt.config(materialized="incremental", unique_key="id")
    rows = dbt.ref("source_rows")
    if dbt.is_incremental:
        newest = session.table(str(dbt.this)).agg(F.max("id")).first()[0]
        rows = rows.filter(F.col("id") > newest)
    return rows.withColumn("run", F.lit(2 if dbt.is_incremental else 1))
"""

PANDAS_PY = """
import pandas as pd


def model(dbt, session):
    dbt.config(materialized="table", file_format="parquet")
    return pd.DataFrame({"id": [1, 2, 3], "name": ["a", "b", "c"]})
"""


def provider(project, relation: str) -> str:
    rows = project.run_sql(f"describe extended {relation}", fetch="all")
    return next(str(r[1]).strip().lower() for r in rows if str(r[0]).strip() == "Provider")


# Python models run on session and connect; thrift refuses them at parse (tested below).
@pytest.mark.profile("session", "connect")
class TestPythonTableAndIncremental:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "source_rows.sql": SOURCE_SQL,
            "py_table.py": TABLE_PY,
            "py_incremental.py": INCREMENTAL_PY,
            "py_pandas.py": PANDAS_PY,
        }

    def test_build_and_rerun(self, project):
        schema = project.test_schema
        results = run_dbt(["run"])
        assert {r.node.name: str(r.status) for r in results} == {
            "source_rows": "success",
            "py_table": "success",
            "py_incremental": "success",
            "py_pandas": "success",
        }
        assert rows_of(project, f"{schema}.py_table") == [(i, i * 10, i * 20) for i in range(5)]
        assert provider(project, f"{schema}.py_table") == "delta"
        assert rows_of(project, f"{schema}.py_incremental") == [(i, i * 10, 1) for i in range(5)]
        assert rows_of(project, f"{schema}.py_pandas") == [(1, "a"), (2, "b"), (3, "c")]
        assert provider(project, f"{schema}.py_pandas") == "parquet"

        # the source grows; the incremental model loads only the new rows, merged by id
        project.run_sql(f"insert into {schema}.source_rows values (5, 50), (6, 60)")
        results = run_dbt(["run", "--select", "py_incremental", "py_table"])
        assert all(str(r.status) == "success" for r in results)
        assert rows_of(project, f"{schema}.py_incremental") == [
            (i, i * 10, 1 if i < 5 else 2) for i in range(7)
        ]
        assert rows_of(project, f"{schema}.py_table") == [(i, i * 10, i * 20) for i in range(7)]


LOGGED_PY = """
def model(dbt, session):
    dbt.config(materialized="table")
    data = [[1, 2]] * 10
    return session.createDataFrame(data, schema=["test1", "test3"])
"""


@pytest.mark.profile("session", "connect")
class TestPythonModelCodeLogged:
    """As dbt-spark (dbt's `log_code_execution`): the model's code on its connection, then
    `Execution status: OK in <s> seconds`, both at debug level (dbt.log, `--debug`)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"py_logged.py": LOGGED_PY}

    def test_code_and_execution_status_logged(self, project, logs_dir):
        _, out = run_dbt_and_capture(["--debug", "run"])
        with open(Path(logs_dir) / "dbt.log") as f:
            log = f.read()
        for text in (out, log):
            # the code as one message on the model's connection (its SQL is logged `On` it too)
            assert re.search(r"On model\.test\.py_logged: \s*def model\(dbt, session\):", text)
            assert 'session.createDataFrame(data, schema=["test1", "test3"])' in text
            assert "Execution status: OK in" in text


def py_model(config: str, body: str) -> str:
    """A Python model: `config` are dbt.config keywords, `body` returns its DataFrame."""
    return (
        "from pyspark.sql import functions as F\n\n\n"
        "def model(dbt, session):\n"
        f"    dbt.config({config})\n"
        + textwrap.indent(textwrap.dedent(body).strip(), "    ")
        + "\n"
    )


ID_N = "return session.range(1, 3).select('id', F.col('id').alias('n'))"
ID_N_NOTE = (
    "return session.range(3, 5).select('id', F.col('id').alias('n'), F.lit('x').alias('note'))"
)
# n becomes a string; 'bad' (ids 3 and 5) cannot be cast into the deployed bigint column
ID_N_STRING = (
    "return session.range(3, 7).select('id', "
    "F.when(F.col('id') % 2 == 1, F.lit('bad')).otherwise(F.col('id').cast('string')).alias('n'))"
)
CONTRACT_MODELS = {
    "py_freeze": (
        "materialized='incremental', incremental_strategy='append', "
        "schema_contract={'columns': 'freeze'}",
        ID_N,
        ID_N_NOTE,
    ),
    "py_table_freeze": (
        "materialized='table', schema_contract={'columns': 'freeze'}",
        ID_N,
        ID_N_NOTE,
    ),
    "py_discard_row": (
        "materialized='incremental', incremental_strategy='append', "
        "schema_contract={'data_type': 'discard_row'}",
        ID_N,
        ID_N_STRING,
    ),
    "py_evolve_iceberg": (
        "materialized='incremental', unique_key='id', file_format='iceberg', schema_evolution={}",
        ID_N,
        ID_N_NOTE,
    ),
    "py_evolve": (
        "materialized='incremental', unique_key='id', schema_evolution={}",
        ID_N,
        ID_N_NOTE,
    ),
    # a rebuild planned by evolution reads the Python model's view, not its source as SQL
    "py_full_refresh": (
        "materialized='incremental', incremental_strategy='append', file_format='parquet', "
        "schema_evolution={'strategy': 'full_refresh'}",
        ID_N,
        ID_N_NOTE,
    ),
}


# Python models run on session and connect; thrift refuses them at parse (tested below).
@pytest.mark.profile("session", "connect")
class TestPythonContracts:
    @pytest.fixture(scope="class")
    def models(self):
        files = {
            f"{name}.py": py_model(config, v1) for name, (config, v1, _) in CONTRACT_MODELS.items()
        }
        return files

    @pytest.fixture(scope="class")
    def outcome(self, project):
        first = run_dbt(["run"])
        assert all(str(r.status) == "success" for r in first), [r.message for r in first]
        for name, (config, _, v2) in CONTRACT_MODELS.items():
            write_file(py_model(config, v2), project.project_root, "models", f"{name}.py")
        results = run_dbt(["run", "--select", *CONTRACT_MODELS], expect_pass=False)
        report = json.loads((Path(project.project_root) / "target/schema_changes.json").read_text())
        return {r.node.name: r for r in results}, report

    def test_columns_freeze_fails_and_leaves_the_table(self, project, outcome):
        results, report = outcome
        frozen = results["py_freeze"]
        assert str(frozen.status) == "error"
        for fragment in ("schema_entity: columns", "contract_mode: freeze", "column: note"):
            assert fragment in frozen.message, frozen.message
        relation = f"{project.test_schema}.py_freeze"
        assert schema_of(project, relation) == {"id": "bigint", "n": "bigint"}
        assert rows_of(project, relation) == [(1, 1), (2, 2)]
        violation = report["models"]["model.test.py_freeze"]["violation"]
        assert (violation["schema_entity"], violation["contract_mode"]) == ("columns", "freeze")

    def test_table_rebuild_binds_the_contract_too(self, project, outcome):
        results, _ = outcome
        frozen = results["py_table_freeze"]
        assert str(frozen.status) == "error"
        assert "column: note" in frozen.message, frozen.message
        relation = f"{project.test_schema}.py_table_freeze"
        assert schema_of(project, relation) == {"id": "bigint", "n": "bigint"}
        assert rows_of(project, relation) == [(1, 1), (2, 2)]

    def test_data_type_discard_row_drops_and_counts(self, project, outcome):
        results, report = outcome
        dropped = results["py_discard_row"]
        assert str(dropped.status) == "success", dropped.message
        assert dropped.adapter_response["rows_discarded"] == 2
        relation = f"{project.test_schema}.py_discard_row"
        assert schema_of(project, relation) == {"id": "bigint", "n": "bigint"}
        assert rows_of(project, relation) == [(1, 1), (2, 2), (4, 4), (6, 6)]

    def test_schema_evolution_adds_the_new_column(self, project, outcome):
        results, _ = outcome
        assert str(results["py_evolve"].status) == "success", results["py_evolve"].message
        relation = f"{project.test_schema}.py_evolve"
        assert schema_of(project, relation) == {"id": "bigint", "n": "bigint", "note": "string"}
        assert rows_of(project, relation) == [(1, 1, None), (2, 2, None), (3, 3, "x"), (4, 4, "x")]

    def test_evolution_full_refresh_rebuilds_from_the_dataframe(self, project, outcome):
        results, _ = outcome
        result = results["py_full_refresh"]
        assert str(result.status) == "success", result.message
        relation = f"{project.test_schema}.py_full_refresh"
        assert schema_of(project, relation) == {"id": "bigint", "n": "bigint", "note": "string"}
        assert rows_of(project, relation) == [(3, 3, "x"), (4, 4, "x")]

    def test_schema_evolution_on_iceberg(self, project, outcome):
        results, _ = outcome
        result = results["py_evolve_iceberg"]
        assert str(result.status) == "success", result.message
        relation = f"iceberg.{project.test_schema}.py_evolve_iceberg"
        assert schema_of(project, relation) == {"id": "bigint", "n": "bigint", "note": "string"}
        assert rows_of(project, relation) == [(1, 1, None), (2, 2, None), (3, 3, "x"), (4, 4, "x")]


# The DataFrame calls probe_eval (a UDF counting its calls, tests/functional/probes.py) once
# per row it produces: a run that evaluates it once adds exactly its row count.
PROBED = (
    "return session.range({rows}).select(F.expr('cast(probe_eval(id) as bigint)').alias('id'), {n})"
)
PROBED_N = "F.col('id').alias('n')"
PROBED_N_NOTE = "F.col('id').alias('n'), F.lit('x').alias('note')"
PROBED_BAD_N = (
    "F.when(F.col('id') % 10 == 0, F.lit('bad')).otherwise(F.col('id').cast('string')).alias('n')"
)
EVAL_MODELS = {
    "py_eval_table": ("materialized='table'", PROBED_N, PROBED_N_NOTE),
    "py_eval_merge_evolve": (
        "materialized='incremental', unique_key='id', schema_evolution={}",
        PROBED_N,
        PROBED_N_NOTE,
    ),
    "py_eval_discard_row": (
        "materialized='incremental', incremental_strategy='append', "
        "schema_contract={'data_type': 'discard_row'}",
        PROBED_N,
        PROBED_BAD_N,
    ),
}


@pytest.fixture
def model_evaluations(request, monkeypatch, tmp_path):
    """`probe_eval(x)` in every dbt thread's session, counting its calls. `session`: an
    accumulator of the process's SparkContext (conftest's `evaluations`). `connect`: a Python
    UDF the Connect client sends with the plan; it runs in the server's Python workers (on this
    machine) and appends one byte per call to a file the test reads."""
    profile = request.config.getoption("--profile")
    if profile == "session":
        return request.getfixturevalue("evaluations")
    from dbt.adapters.spark_contracts.connection import connections

    calls = tmp_path / "probe_eval_calls"
    calls.write_bytes(b"")
    original = connections.new_connect_session

    def with_probe(creds):
        session = original(creds)
        path = str(calls)

        def probe(x):
            with open(path, "ab") as out:
                out.write(b"1")
            return x

        session.udf.register("probe_eval", probe, "bigint")
        return session

    monkeypatch.setattr(connections, "new_connect_session", with_probe)
    return lambda: calls.stat().st_size


# thrift cannot run Python models at all (test_sql_only_methods_refuse_python_models_at_parse)
@pytest.mark.profile("session", "connect")
class TestPythonModelEvaluatedOnce:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            f"{name}.py": py_model(config, PROBED.format(rows=1, n=v1))
            for name, (config, v1, _) in EVAL_MODELS.items()
        }

    @pytest.mark.parametrize("name", list(EVAL_MODELS))
    def test_dataframe_evaluated_once_per_run(self, project, model_evaluations, name):
        before = model_evaluations()
        run_dbt(["run", "--select", name])
        assert model_evaluations() - before == 1, "the first build evaluates the DataFrame once"
        config, _, v2 = EVAL_MODELS[name]
        write_file(
            py_model(config, PROBED.format(rows=ROWS, n=v2)),
            project.project_root,
            "models",
            f"{name}.py",
        )
        before = model_evaluations()
        results = run_dbt(["run", "--select", name])
        assert model_evaluations() - before == ROWS, (name, model_evaluations() - before)
        relation = f"{project.test_schema}.{name}"
        if name == "py_eval_discard_row":
            assert results[0].adapter_response["rows_discarded"] == ROWS // 10
            assert len(rows_of(project, relation)) == 1 + ROWS - ROWS // 10
        else:
            assert schema_of(project, relation)["note"] == "string"
            assert len(rows_of(project, relation)) == ROWS


SQL_ONLY_PROFILES = {
    "thrift": {"method": "thrift", "host": "localhost", "port": 1, "user": "dbt"},
    "http": {"method": "http", "host": "localhost", "port": 1, "token": "t", "cluster": "c"},
}


@pytest.fixture
def own_adapter():
    """dbtRunner leaves its adapter registered; the next test's project must build its own."""
    yield
    reset_adapters()


@pytest.mark.parametrize("method", list(SQL_ONLY_PROFILES))
def test_sql_only_methods_refuse_python_models_at_parse(tmp_path, method, own_adapter):
    """dbt parse (no connection is opened) fails on the Python model, naming it and the method;
    Python models disabled in their code or in a schema file, and the SQL models, parse."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "sql_model.sql").write_text("select 1 as id\n")
    (tmp_path / "models" / "py_model.py").write_text(TABLE_PY.replace("source_rows", "sql_model"))
    (tmp_path / "models" / "py_off.py").write_text(
        "def model(dbt, session):\n    dbt.config(enabled=False)\n    return None\n"
    )
    (tmp_path / "models" / "py_yml_off.py").write_text(
        "def model(dbt, session):\n    return None\n"
    )
    (tmp_path / "models" / "schema.yml").write_text(
        "version: 2\nmodels:\n  - name: py_yml_off\n    config: {enabled: false}\n"
    )
    (tmp_path / "dbt_project.yml").write_text(
        yaml.safe_dump({"name": "py_refusal", "version": "1.0", "profile": "p"})
    )
    target = {"type": "spark_contracts", "schema": "s", **SQL_ONLY_PROFILES[method]}
    (tmp_path / "profiles.yml").write_text(
        yaml.safe_dump({"p": {"target": "t", "outputs": {"t": target}}})
    )
    args = ["parse", "--project-dir", str(tmp_path), "--profiles-dir", str(tmp_path)]
    result = dbtRunner().invoke(args)
    assert not result.success
    message = str(result.exception)
    assert "model.py_refusal.py_model" in message, message
    assert f"Python models cannot run with `method: {method}`" in message, message
    assert "py_off" not in message and "py_yml_off" not in message

    (tmp_path / "models" / "py_model.py").unlink()
    assert dbtRunner().invoke(args).success  # nothing else in the project is refused
