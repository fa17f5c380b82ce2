"""dbt-core 1.12's model config `on_error` (`skip_children`, the default, or `continue`: a failed
model's children still run, on what the model built before), through this adapter on real
Spark. dbt-tests-adapter has no suite for it; these are the cases of dbt-core's own
tests/functional/run_on_error/test_model_on_error.py, with a failure Spark raises whatever its
ANSI setting (`raise_error`, where dbt-core's use `1 / 0`). Skipped before dbt-core 1.12."""

from __future__ import annotations

from typing import Dict

import pytest
from dbt.artifacts.schemas.results import RunStatus
from dbt.tests.util import run_dbt, write_file
from dbt.version import __version__ as dbt_version
from packaging.version import Version

pytestmark = pytest.mark.skipif(
    Version(dbt_version).release[:2] < (1, 12),
    reason=f"the model config on_error is dbt-core 1.12+ (this is {dbt_version})",
)

TABLE = "{{ config(materialized='table') }}\n"
FAILS = TABLE + "select raise_error('this model fails') as id"
CHILD = TABLE + "select id from {{ ref('parent') }}"
CHILD_OF_TWO = TABLE + (
    "select id from {{ ref('parent1') }} union all select id from {{ ref('parent2') }}"
)
TWO_PARENTS = (
    "models:\n"
    "  - name: parent1\n    config:\n      on_error: skip_children\n"
    "  - name: parent2\n    config:\n      on_error: continue\n"
)


def succeeds(n: int) -> str:
    return TABLE + f"select {n} as id"


def on_error(value: str) -> str:
    return f"models:\n  - name: parent\n    config:\n      on_error: {value}\n"


def statuses(results) -> Dict[str, RunStatus]:
    return {r.node.name: r.status for r in results.results}


class TestOnErrorDefaultSkipsChildren:
    @pytest.fixture(scope="class")
    def models(self):
        return {"parent.sql": FAILS, "child.sql": CHILD}

    def test_child_skipped(self, project):
        results = run_dbt(["run"], expect_pass=False)
        assert statuses(results) == {"parent": RunStatus.Error, "child": RunStatus.Skipped}


class TestOnErrorSkipChildren:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "parent.sql": FAILS,
            "child.sql": CHILD,
            "schema.yml": on_error("skip_children"),
        }

    def test_child_skipped(self, project):
        results = run_dbt(["run"], expect_pass=False)
        assert statuses(results) == {"parent": RunStatus.Error, "child": RunStatus.Skipped}


class TestOnErrorContinue:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "parent.sql": succeeds(1),
            "child.sql": CHILD,
            "schema.yml": on_error("continue"),
        }

    def test_child_runs_on_the_parents_last_build(self, project):
        run_dbt(["run"])
        write_file(FAILS, project.project_root, "models", "parent.sql")
        results = run_dbt(["run"], expect_pass=False)
        assert statuses(results) == {"parent": RunStatus.Error, "child": RunStatus.Success}
        # the failed build left the parent's table as it was, and the child read it
        rows = project.run_sql(f"select id from {project.test_schema}.child", fetch="all")
        assert [tuple(row) for row in rows] == [(1,)]

    def test_fail_fast_overrides_continue(self, project):
        write_file(succeeds(1), project.project_root, "models", "parent.sql")
        run_dbt(["run"])
        write_file(FAILS, project.project_root, "models", "parent.sql")
        results = run_dbt(["run", "--fail-fast"], expect_pass=False)
        assert statuses(results) == {"parent": RunStatus.Error, "child": RunStatus.Skipped}


class TestOnErrorTwoParents:
    """parent1 skip_children, parent2 continue: the child runs unless parent1 failed."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "parent1.sql": succeeds(1),
            "parent2.sql": succeeds(2),
            "child.sql": CHILD_OF_TWO,
            "schema.yml": TWO_PARENTS,
        }

    def _run(self, project, parent1: str, parent2: str, expect_pass: bool):
        write_file(parent1, project.project_root, "models", "parent1.sql")
        write_file(parent2, project.project_root, "models", "parent2.sql")
        return statuses(run_dbt(["run"], expect_pass=expect_pass))

    def test_each_case(self, project):
        ok1, ok2 = succeeds(1), succeeds(2)
        assert self._run(project, ok1, ok2, True) == dict.fromkeys(
            ("parent1", "parent2", "child"), RunStatus.Success
        )
        assert self._run(project, ok1, FAILS, False) == {
            "parent1": RunStatus.Success,
            "parent2": RunStatus.Error,
            "child": RunStatus.Success,
        }
        assert self._run(project, FAILS, ok2, False) == {
            "parent1": RunStatus.Error,
            "parent2": RunStatus.Success,
            "child": RunStatus.Skipped,
        }
        assert self._run(project, FAILS, FAILS, False) == {
            "parent1": RunStatus.Error,
            "parent2": RunStatus.Error,
            "child": RunStatus.Skipped,
        }
