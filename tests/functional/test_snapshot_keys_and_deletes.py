"""Snapshots with a multi-column `unique_key`, and `hard_deletes: new_record` with
`dbt_valid_to_current`: the exact rows dbt's snapshot semantics give, on Delta (the default)
and Iceberg. Real dbt on real Spark."""

from __future__ import annotations

import datetime

import pytest
from dbt.tests.util import run_dbt

CURRENT = datetime.datetime(9999, 12, 31)


def snapshot_yml(fmt: str, config: str) -> str:
    return (
        "snapshots:\n"
        "  - name: snap\n"
        "    relation: source('src', 'people')\n"
        "    config:\n"
        f"      file_format: {fmt}\n"
        + "".join(f"      {line}\n" for line in config.strip().splitlines())
    )


SOURCES = "sources:\n  - name: src\n    schema: '{{ target.schema }}'\n    tables:\n      - name: people\n"


def snap_name(project, fmt: str) -> str:
    prefix = "iceberg." if fmt == "iceberg" else ""
    return f"{prefix}{project.test_schema}.snap"


MULTI_KEY = """
unique_key: [k1, k2]
strategy: check
check_cols: all
snapshot_meta_column_names: {dbt_valid_to: TEST_VALID_TO, dbt_scd_id: test_scd_id}
"""


class MultiKey:
    fmt = "delta"

    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": SOURCES}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"snap.yml": snapshot_yml(self.fmt, MULTI_KEY)}

    def test_multi_column_key_across_runs(self, project):
        people = f"{project.test_schema}.people"
        project.run_sql(f"create table {people} (k1 int, k2 string, v string) using delta")
        project.run_sql(f"insert into {people} values (1, 'a', 'x'), (1, 'b', 'x'), (2, 'a', 'x')")
        run_dbt(["snapshot"])
        project.run_sql(f"update {people} set v = 'y' where k1 = 1 and k2 = 'b'")
        run_dbt(["snapshot"])
        project.run_sql(f"update {people} set v = 'z' where k1 = 1 and k2 = 'b'")
        project.run_sql(f"insert into {people} values (2, 'b', 'x')")
        run_dbt(["snapshot"])
        rows = project.run_sql(
            f"select k1, k2, v, TEST_VALID_TO is null from {snap_name(project, self.fmt)} "
            "order by k1, k2, v",
            fetch="all",
        )
        assert [tuple(r) for r in rows] == [
            (1, "a", "x", True),
            (1, "b", "x", False),
            (1, "b", "y", False),
            (1, "b", "z", True),
            (2, "a", "x", True),
            (2, "b", "x", True),
        ]
        columns = {
            r[0].lower()
            for r in project.run_sql(f"describe {snap_name(project, self.fmt)}", fetch="all")
        }
        assert not {c for c in columns if c.startswith("dbt_unique_key")}, columns


class TestMultiKeyDelta(MultiKey):
    pass


class TestMultiKeyIceberg(MultiKey):
    fmt = "iceberg"


class TestMultiKeyDeltaAutoMerge(MultiKey):
    """Delta schema auto-merge on for the profile (a common setting): the snapshot merge must
    not write dbt's merge helpers (dbt_unique_key_1, ...) into the snapshot table."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target):
        return {
            **dbt_profile_target,
            "server_side_parameters": {"spark.databricks.delta.schema.autoMerge.enabled": "true"},
        }


NEW_RECORD = """
unique_key: id
strategy: check
check_cols: all
hard_deletes: new_record
dbt_valid_to_current: "to_timestamp('9999-12-31')"
"""


class NewRecordValidToCurrent:
    fmt = "delta"

    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": SOURCES}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"snap.yml": snapshot_yml(self.fmt, NEW_RECORD)}

    def rows(self, project):
        return [
            tuple(r)
            for r in project.run_sql(
                f"select id, name, dbt_valid_to = to_timestamp('9999-12-31'), dbt_is_deleted "
                f"from {snap_name(project, self.fmt)} order by id, dbt_valid_from, dbt_is_deleted",
                fetch="all",
            )
        ]

    def test_deleted_then_revived(self, project):
        people = f"{project.test_schema}.people"
        project.run_sql(f"create table {people} (id int, name string) using delta")
        project.run_sql(f"insert into {people} values (1, 'a'), (2, 'b')")
        run_dbt(["snapshot"])
        assert self.rows(project) == [(1, "a", True, "False"), (2, "b", True, "False")]

        project.run_sql(f"delete from {people} where id = 1")
        run_dbt(["snapshot"])
        deleted = [(1, "a", False, "False"), (1, "a", True, "True"), (2, "b", True, "False")]
        assert self.rows(project) == deleted
        run_dbt(["snapshot"])  # nothing changed: no second deletion record
        assert self.rows(project) == deleted

        project.run_sql(f"insert into {people} values (1, 'a2')")
        run_dbt(["snapshot"])
        assert self.rows(project) == [
            (1, "a", False, "False"),
            (1, "a", False, "True"),
            (1, "a2", True, "False"),
            (2, "b", True, "False"),
        ]
        # exactly one current row per key, and no null dbt_valid_to (current rows carry the date)
        nulls = project.run_sql(
            f"select count(*) from {snap_name(project, self.fmt)} where dbt_valid_to is null",
            fetch="one",
        )
        assert nulls[0] == 0


class TestNewRecordValidToCurrentDelta(NewRecordValidToCurrent):
    pass


class TestNewRecordValidToCurrentIceberg(NewRecordValidToCurrent):
    fmt = "iceberg"
