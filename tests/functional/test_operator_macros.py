"""The operator macros in macros/, installed as a dbt package from this repository."""

from pathlib import Path

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

REPO = Path(__file__).resolve().parents[2]


class TestOperatorMacros:
    @pytest.fixture(scope="class")
    def packages(self):
        return {"packages": [{"local": str(REPO)}]}

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "nested.sql": "{{ config(materialized='table') }}\n"
            "select 1 as id, named_struct('a', 1, 'b', array('x')) as s"
        }

    def test_describe_and_restore(self, project):
        run_dbt(["deps"])
        run_dbt(["run"])
        relation = f"{project.test_schema}.nested"
        project.run_sql(f"insert into {relation} select 2, named_struct('a', 2, 'b', array('y'))")
        _, out = run_dbt_and_capture(
            ["run-operation", "describe_schema", "--args", f"{{relation: {relation}}}"]
        )
        assert f"{relation} (delta)" in out
        assert "s: STRUCT<`a`: INT, `b`: ARRAY<STRING>>" in out
        assert "delta.enableTypeWidening = true" in out

        run_dbt(
            ["run-operation", "restore_table", "--args", f"{{relation: {relation}, version: 0}}"]
        )
        assert project.run_sql(f"select count(*) from {relation}", fetch="one")[0] == 1

        _, out = run_dbt_and_capture(
            ["run-operation", "restore_table", "--args", f"{{relation: {relation}, version: x}}"],
            expect_pass=False,
        )
        assert "`version` must be a Delta table version number" in out
