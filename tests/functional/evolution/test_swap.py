"""Rebuilds that no single statement can replace (core/recovery/swap.py), on real Spark: a Parquet table
model, a `--full-refresh` of a Parquet incremental model, a view becoming a table and a Parquet
table becoming Delta are built beside the old relation and swapped in by two renames. A query
that fails at run time leaves the old relation as it was (dbt-spark drops it first and leaves
nothing); a swap stopped between its renames is put back by the next run."""

from __future__ import annotations

import socket

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.spark_contracts.core.recovery.pending import (
    APP_PROPERTY,
    BEAT_PROPERTY,
    RUN_PROPERTY,
)
from dbt.adapters.spark_contracts.core.recovery.record import CLIENT_PROPERTY, SWAP_PROPERTY
from tests.functional.evolution.test_evolution_matrix import rows_of, schema_of

# `fail`: a row fails at run time (range() rows: Spark executes them, nothing folds at planning)
BODY = (
    "select {% if var('narrow', false) %}cast(id as int) as id{% else %}id{% endif %}"
    "{% if var('extra', false) %}, 'x' as extra{% endif %}"
    "{% if var('fail', false) %}, if(id < 2, id, cast(raise_error('boom') as bigint)) as checked"
    "{% endif %}"
    " from range(0, 3)\n"
)
PARQUET_TABLE = "{{ config(materialized='table', file_format='parquet') }}\n" + BODY
PARQUET_INCREMENTAL = (
    "{{ config(materialized='incremental', file_format='parquet', schema_evolution={}) }}\n" + BODY
)
# a view first (`as_view`), then a table; a Parquet table first, then Delta (`delta`)
SWITCHING = (
    "{{ config(materialized=('view' if var('as_view', false) else 'table'), "
    "file_format=('delta' if var('delta', false) else 'parquet')) }}\n" + BODY
)
# at a location_root the new table's path would be the old one's: dropped first, as dbt-spark does
AT_A_PATH = (
    "{{ config(materialized=('view' if var('as_view', false) else 'table'), "
    "file_format='parquet', location_root=var('root')) }}\n" + BODY
)
AT_A_PATH_CONTRACT = (
    "{{ config(materialized='table', file_format='parquet', location_root=var('root'), "
    "schema_contract={'columns': 'evolve'}) }}\n" + BODY
)
PARQUET_CONTRACT_TABLE = (
    "{{ config(materialized='table', file_format='parquet', "
    "schema_contract={'columns': 'evolve'}) }}\n" + BODY
)


def tables_in(project) -> set[str]:
    rows = project.run_sql(f"show tables in {project.test_schema}", fetch="all")
    return {r[1] for r in rows}


def properties(project, rel: str) -> dict[str, str]:
    return {r[0]: r[1] for r in project.run_sql(f"show tblproperties {rel}", fetch="all")}


ENDED_PID = 4_194_999  # above Linux's highest pid: no process has it


class TestSwappedRebuilds:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "pq_table.sql": PARQUET_TABLE,
            "pq_incremental.sql": PARQUET_INCREMENTAL,
            "switching.sql": SWITCHING,
            "pq_contract_table.sql": PARQUET_CONTRACT_TABLE,
            "at_a_path.sql": AT_A_PATH,
            "at_a_path_contract.sql": AT_A_PATH_CONTRACT,
        }

    @pytest.mark.parametrize("name", ["pq_table", "pq_contract_table"])
    def test_a_failing_rebuild_keeps_the_old_table(self, project, name):
        rel = f"{project.test_schema}.{name}"
        run_dbt(["run", "--select", name])
        failed = run_dbt(["run", "--select", name, "--vars", "{fail: true}"], expect_pass=False)
        assert str(failed[0].status) == "error"
        assert rows_of(project, rel) == [(0,), (1,), (2,)]
        run_dbt(["run", "--select", name, "--vars", "{extra: true}"])
        assert rows_of(project, rel) == [(0, "x"), (1, "x"), (2, "x")]
        assert SWAP_PROPERTY not in properties(project, rel)
        assert not {t for t in tables_in(project) if t.startswith(name + "__")}

    def test_a_failing_full_refresh_keeps_the_old_table(self, project):
        rel = f"{project.test_schema}.pq_incremental"
        run_dbt(["run", "--select", "pq_incremental"])
        args = ["run", "--select", "pq_incremental", "--full-refresh"]
        failed = run_dbt([*args, "--vars", "{fail: true}"], expect_pass=False)
        assert str(failed[0].status) == "error"
        assert rows_of(project, rel) == [(0,), (1,), (2,)]
        run_dbt([*args, "--vars", "{extra: true}"])
        assert rows_of(project, rel) == [(0, "x"), (1, "x"), (2, "x")]
        assert not {t for t in tables_in(project) if t.startswith("pq_incremental__")}

    def test_a_view_becomes_a_table_and_a_parquet_table_delta(self, project):
        rel = f"{project.test_schema}.switching"
        run_dbt(["run", "--select", "switching", "--vars", "{as_view: true}"])
        failed = run_dbt(
            ["run", "--select", "switching", "--vars", "{fail: true}"], expect_pass=False
        )
        assert str(failed[0].status) == "error"
        kind = project.run_sql(f"describe table extended {rel}", fetch="all")
        assert [r[1] for r in kind if r[0] == "Type"] == ["VIEW"]  # still the view
        run_dbt(["run", "--select", "switching"])
        assert rows_of(project, rel) == [(0,), (1,), (2,)]
        assert properties(project, rel).get("delta.minReaderVersion") is None  # Parquet
        to_delta = ["run", "--select", "switching", "--vars"]
        failed = run_dbt([*to_delta, "{delta: true, fail: true}"], expect_pass=False)
        assert str(failed[0].status) == "error"
        assert rows_of(project, rel) == [(0,), (1,), (2,)]  # still the Parquet table
        assert properties(project, rel).get("delta.minReaderVersion") is None
        run_dbt([*to_delta, "{delta: true, extra: true}"])
        assert rows_of(project, rel) == [(0, "x"), (1, "x"), (2, "x")]
        assert "delta.minReaderVersion" in properties(project, rel)
        assert schema_of(project, rel) == {"id": "bigint", "extra": "string"}
        assert not {t for t in tables_in(project) if t.startswith("switching__")}

    def test_a_swap_stopped_between_its_renames_is_put_back(self, project):
        rel = f"{project.test_schema}.pq_table"
        run_dbt(["run", "--select", "pq_table"])
        # the state `kill -9` leaves between the swap's two renames: the dead run's record
        # (its lease, let go of by nobody: its process is gone) saying the swap is under way,
        # the old table under its backup name, the new one complete beside it
        record = f"{rel}__dbt_lease_dead"
        project.run_sql(
            f"create table {record} (lease int) using parquet tblproperties ("
            f"'{RUN_PROPERTY}' = 'dead', '{BEAT_PROPERTY}' = '12.5', "
            f"'{CLIENT_PROPERTY}' = '{socket.gethostname()}/{ENDED_PID}', "
            f"'{APP_PROPERTY}' = 'session://{socket.gethostname()}/{ENDED_PID} local-1', "
            f"'{SWAP_PROPERTY}' = '{rel}')"
        )
        project.run_sql(f"alter table {rel} rename to {rel}__dbt_backup")
        project.run_sql(f"create table {rel}__dbt_rewrite using parquet as select 9 as id")
        # the next run takes the dead run's lease over, puts the old table back first; its own
        # rebuild then fails, so what the name holds afterwards is the old table
        run_dbt(["run", "--select", "pq_table", "--vars", "{fail: true}"], expect_pass=False)
        assert rows_of(project, rel) == [(0,), (1,), (2,)]
        assert not {t for t in tables_in(project) if t.startswith("pq_table__")}  # record too

    def test_a_swap_an_earlier_build_stopped_between_its_renames_is_put_back(self, project):
        rel = f"{project.test_schema}.pq_table"
        run_dbt(["run", "--select", "pq_table"])
        # the state `kill -9` left between the swap's two renames in earlier builds: the old
        # table, marked, under its backup name, the new one complete beside it
        project.run_sql(f"alter table {rel} set tblproperties ('{SWAP_PROPERTY}' = 'dead')")
        project.run_sql(f"alter table {rel} rename to {rel}__dbt_backup")
        project.run_sql(f"create table {rel}__dbt_rewrite using parquet as select 9 as id")
        # the next run puts the old table back first; its own rebuild then fails, so what the
        # name holds afterwards is the old table
        run_dbt(["run", "--select", "pq_table", "--vars", "{fail: true}"], expect_pass=False)
        assert rows_of(project, rel) == [(0,), (1,), (2,)]
        assert SWAP_PROPERTY not in properties(project, rel)
        assert not {t for t in tables_in(project) if t.startswith("pq_table__")}

    def test_a_view_becomes_a_table_at_its_location_root(self, project, tmp_path):
        """Not swapped (the new table's path is the one the model names): dropped first."""
        rel = f"{project.test_schema}.at_a_path"
        root = f"{{root: '{tmp_path.as_posix()}'"
        run_dbt(["run", "--select", "at_a_path", "--vars", root + ", as_view: true}"])
        run_dbt(["run", "--select", "at_a_path", "--vars", root + ", extra: true}"])
        assert rows_of(project, rel) == [(0, "x"), (1, "x"), (2, "x")]
        location = project.run_sql(f"describe table extended {rel}", fetch="all")
        paths = [r[1] for r in location if r[0] == "Location"]
        assert len(paths) == 1 and paths[0].endswith(f"{tmp_path.as_posix()}/at_a_path"), paths
        assert not {t for t in tables_in(project) if t.startswith("at_a_path__")}

    def test_a_planned_full_refresh_that_fails_keeps_the_old_table(self, project):
        """The run's plan decides the full refresh (a narrowing, permitted by
        `allow_full_refresh`): the evolving path's rebuild, swapped in the same way."""
        rel = f"{project.test_schema}.pq_incremental"
        run_dbt(["run", "--select", "pq_incremental", "--full-refresh"])
        narrow = "{narrow: true, allow_full_refresh: true"
        args = ["run", "--select", "pq_incremental", "--vars"]
        failed = run_dbt([*args, narrow + ", fail: true}"], expect_pass=False)
        assert str(failed[0].status) == "error"
        assert schema_of(project, rel) == {"id": "bigint"}
        assert rows_of(project, rel) == [(0,), (1,), (2,)]
        run_dbt([*args, narrow + "}"])
        assert schema_of(project, rel) == {"id": "int"}
        assert rows_of(project, rel) == [(0,), (1,), (2,)]
        assert not {t for t in tables_in(project) if t.startswith("pq_incremental__")}

    @pytest.mark.parametrize("name", ["at_a_path", "at_a_path_contract"])
    def test_a_parquet_table_at_its_location_root_is_refused_not_dropped(
        self, project, tmp_path, name
    ):
        """Its table is external: a DROP would leave its files and Spark refuses a CTAS over
        them, so the rebuild (the build path; with a contract, the run's rebuild) is refused
        before anything changes (dbt-spark drops the table, then fails)."""
        rel = f"{project.test_schema}.{name}"
        project.run_sql(f"drop table if exists {rel}")  # a case above may have left one
        root = f"{{root: '{tmp_path.as_posix()}'}}"
        run_dbt(["run", "--select", name, "--vars", root])
        failed = run_dbt(["run", "--select", name, "--vars", root], expect_pass=False)
        message = " ".join(failed[0].message.split())
        assert f"model.test.{name}" in message and "cannot be rebuilt" in message, message
        assert rows_of(project, rel) == [(0,), (1,), (2,)]
