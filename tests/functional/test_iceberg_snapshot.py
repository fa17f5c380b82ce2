"""Snapshots on Iceberg, in a namespace of the Iceberg catalog that does not exist yet."""

import pytest
from dbt.tests.util import run_dbt

SNAPSHOT = """
snapshots:
  - name: people_snap
    relation: ref('people')
    config:
      unique_key: id
      strategy: check
      check_cols: all
      file_format: iceberg
"""


class TestIcebergSnapshot:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"people.csv": "id,name\n1,a\n2,b\n"}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"people_snap.yml": SNAPSHOT}

    def test_snapshot_tracks_changes(self, project):
        run_dbt(["seed"])
        run_dbt(["snapshot"])
        project.run_sql(f"update {project.test_schema}.people set name = 'c' where id = 2")
        run_dbt(["snapshot"])
        rows = project.run_sql(
            f"select id, name, dbt_valid_to is null from iceberg.{project.test_schema}.people_snap"
            " order by id, name",
            fetch="all",
        )
        assert [tuple(r) for r in rows] == [(1, "a", True), (2, "b", False), (2, "c", True)]
        provider = {
            r[0]: r[1]
            for r in project.run_sql(
                f"describe table extended iceberg.{project.test_schema}.people_snap", fetch="all"
            )
        }.get("Provider")
        assert provider == "iceberg"
