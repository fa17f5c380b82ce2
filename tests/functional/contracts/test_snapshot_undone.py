"""A snapshot's schema change and its merge, together or not at all (the one executor), on
real Delta and Iceberg: v2's source brings a new column and two rows for one key, so dbt's
merge fails after the planner added the column; the snapshot is put back (no new column, its
rows as before) and the error is `RunUndone`. v3 then snapshots the new column."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contracts.test_contract_matrix import rel
from tests.functional.evolution.test_evolution_matrix import schema_of

SOURCE = (
    "{{ config(materialized='table') }}\n"
    "{% if var('v', 1) == 1 %}select 1 as id, 'a' as name"
    "{% elif var('v', 1) == 2 %}select 1 as id, 'b' as name, 'web' as channel union all "
    "select 1 as id, 'c' as name, 'web' as channel"
    "{% else %}select 1 as id, 'd' as name, 'web' as channel{% endif %}\n"
)


def snapshot(name: str, fmt: str) -> str:
    return (
        "{% snapshot " + name + " %}\n"
        "{{ config(strategy='check', unique_key='id', check_cols='all', target_schema=schema, "
        "file_format='" + fmt + "') }}\n"
        "select * from {{ ref('source_rows') }}\n{% endsnapshot %}\n"
    )


class TestASnapshotsChangeIsTakenBackWithItsMerge:
    """Delta here (RESTORE); Iceberg below (the added column dropped, rolled back)."""

    fmt = "delta"

    @pytest.fixture(scope="class")
    def models(self):
        return {"source_rows.sql": SOURCE}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {f"snap_{self.fmt}.sql": snapshot(f"snap_{self.fmt}", self.fmt)}

    def test_the_failed_merge_takes_the_new_column_back(self, project):
        name = f"snap_{self.fmt}"
        snap = rel(project, name)
        run_dbt(["run"])
        run_dbt(["snapshot"])
        before = (
            schema_of(project, snap),
            project.run_sql(f"select id, name from {snap}", fetch="all"),
        )
        run_dbt(["run", "--vars", "{v: 2}"])
        failed = run_dbt(["snapshot", "--vars", "{v: 2}"], expect_pass=False)[0]
        assert str(failed.status) == "error"
        assert "the run was undone" in failed.message, failed.message
        assert "channel" not in schema_of(project, snap)
        rows = project.run_sql(f"select id, name from {snap}", fetch="all")
        assert (schema_of(project, snap), rows) == before

        run_dbt(["run", "--vars", "{v: 3}"])
        run_dbt(["snapshot", "--vars", "{v: 3}"])
        assert schema_of(project, snap)["channel"] == "string"
        rows = project.run_sql(
            f"select name, channel from {snap} order by dbt_valid_from", fetch="all"
        )
        assert [tuple(r) for r in rows] == [("a", None), ("d", "web")]


class TestASnapshotsChangeIsTakenBackWithItsMergeIceberg(
    TestASnapshotsChangeIsTakenBackWithItsMerge
):
    fmt = "iceberg"
