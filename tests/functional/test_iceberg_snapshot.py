"""Snapshots on Iceberg, in a namespace of the Iceberg catalog that does not exist yet."""

import json
from pathlib import Path

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
        # the query's rows were staged once per run (core/materialization/snapshot.SourceStage)
        # and every stage is dropped after its merge
        assert not stages(project)


# the snapshot reads a view whose query fails at run time under `--vars {fail: true}`
SOURCE = """
select id, name from {{ ref('people') }}
{% if var('fail', false) %}where assert_true(id < 0, 'the source fails') is null{% endif %}
"""


class TestIcebergSnapshotFailingSource:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"people.csv": "id,name\n1,a\n2,b\n"}

    @pytest.fixture(scope="class")
    def models(self):
        return {"people_src.sql": "{{ config(materialized='view') }}" + SOURCE}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"people_snap.yml": SNAPSHOT.replace("ref('people')", "ref('people_src')")}

    def test_a_failing_query_leaves_no_stage_and_the_snapshot_as_it_was(self, project):
        run_dbt(["seed"])
        run_dbt(["run"])
        run_dbt(["snapshot"])
        snap = f"iceberg.{project.test_schema}.people_snap"
        before = project.run_sql(f"select * from {snap} order by id", fetch="all")
        run_dbt(["run", "--vars", "{fail: true}"])
        report = Path(project.project_root) / "target/schema_changes.json"
        earlier = json.loads(report.read_text())["invocation_id"] if report.exists() else None
        results = run_dbt(["snapshot"], expect_pass=False)
        assert "the source fails" in (results[0].message or ""), results[0].message
        assert project.run_sql(f"select * from {snap} order by id", fetch="all") == before
        assert not stages(project)
        # the run's entry in the schema-changes report: nothing executed, nothing loaded
        written = json.loads(report.read_text())
        assert written["invocation_id"] != earlier  # the failed run's own report
        entry = written["models"]["snapshot.test.people_snap"]
        assert entry["executed"] == [] and not entry["loaded"], entry


def stages(project) -> list:
    """The snapshot's source stages left in its namespace."""
    rows = project.run_sql(f"show tables in iceberg.{project.test_schema}", fetch="all")
    return [r[1] for r in rows if "__dbt_source_" in r[1]]
