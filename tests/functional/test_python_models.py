"""Python models on real Spark, through the same write path as SQL models.

The model's code runs in the dbt process with the thread's SparkSession (method `session`, and
`connect`: run with `--profile connect -n 0`); its DataFrame becomes a temporary view that the
table and incremental materializations read like a SQL model's query, so schema contracts,
schema evolution and dbt model contracts bind alike, and the DataFrame is evaluated once.
Methods that only carry SQL (thrift, http, odbc) refuse Python models when dbt parses.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from dbt.tests.util import run_dbt, write_file
from dbt.cli.main import dbtRunner

from tests.functional.evolution.test_evolution_matrix import rows_of, schema_of
from tests.functional.evolution.test_run_path import ROWS, evaluations  # noqa: F401

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
