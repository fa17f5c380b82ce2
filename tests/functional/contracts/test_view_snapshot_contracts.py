"""Views and snapshots behind the schema contract (issue: contracts at every door).

A view under `columns: freeze` keeps its column set; a snapshot gains the source's new column
and widened type through the planner, and a frozen snapshot refuses a new column before its
merge. Real dbt on real Spark (Delta and Iceberg snapshots)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contracts.test_contract_matrix import rel
from tests.functional.evolution.test_evolution_matrix import schema_of

VIEW = (
    "{{ config(materialized='view', schema_contract={'columns': 'freeze'}) }}\n"
    "{% if var('v', 1) == 1 %}select 1 as id, 'a' as name"
    "{% elif var('v', 1) == 2 %}select 2 as id, 'b' as name, 'x' as extra"
    "{% else %}select 3 as id{% endif %}\n"
)
EVOLVING_VIEW = VIEW.replace("'freeze'", "'evolve'")

SOURCE = (
    "{{ config(materialized='table') }}\n"
    "{% if var('v', 1) == 1 %}select 1 as id, cast(10 as int) as amount, 'a' as name"
    "{% else %}select 1 as id, cast(5000000000 as bigint) as amount, 'b' as name, "
    "'new' as channel{% endif %}\n"
)


def snapshot(name: str, fmt: str, contract: str | None) -> str:
    extra = f", schema_contract={contract}" if contract else ""
    return (
        "{% snapshot " + name + " %}\n"
        "{{ config(strategy='check', unique_key='id', check_cols='all', target_schema=schema, "
        "file_format='" + fmt + "'" + extra + ") }}\n"
        "select * from {{ ref('source_rows') }}\n{% endsnapshot %}\n"
    )


def written(project, name: str) -> str:
    """What dbt wrote to target/run for the snapshot `name` (its last run's SQL). dbt-core 1.12
    writes it one folder deeper (`snapshots/<name>.sql/<name>.sql`): files only."""
    run = Path(project.project_root) / "target" / "run"
    found = [path for path in run.rglob(f"{name}.sql") if path.is_file()]
    assert len(found) == 1, found
    return found[0].read_text().lower()


class TestFrozenView:
    @pytest.fixture(scope="class")
    def models(self):
        return {"frozen_view.sql": VIEW, "evolving_view.sql": EVOLVING_VIEW}

    def test_frozen_view_keeps_its_columns(self, project):
        run_dbt(["run"])
        results = {r.node.name: r for r in run_dbt(["run", "--vars", "{v: 2}"], expect_pass=False)}
        added = results["frozen_view"]
        assert str(added.status) == "error"
        for fragment in ("frozen_view", "schema_entity: columns", "column: extra"):
            assert fragment in added.message, added.message
        assert schema_of(project, rel(project, "frozen_view")) == {"id": "int", "name": "string"}
        assert str(results["evolving_view"].status) == "success"
        assert "extra" in schema_of(project, rel(project, "evolving_view"))

        removed = run_dbt(["run", "--vars", "{v: 3}", "--select", "frozen_view"], expect_pass=False)
        assert "column: name" in removed[0].message, removed[0].message
        assert "deployed type: STRING, compiled type: (absent)" in removed[0].message
        rows = project.run_sql(f"select * from {rel(project, 'frozen_view')}", fetch="all")
        assert [tuple(r) for r in rows] == [(1, "a")]


class TestSnapshotEvolution:
    @pytest.fixture(scope="class")
    def models(self):
        return {"source_rows.sql": SOURCE}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {
            "snap_delta.sql": snapshot("snap_delta", "delta", None),
            "snap_iceberg.sql": snapshot("snap_iceberg", "iceberg", None),
            "snap_frozen.sql": snapshot("snap_frozen", "delta", "{'columns': 'freeze'}"),
            "snap_no_create.sql": snapshot("snap_no_create", "delta", "'freeze'"),
        }

    def test_snapshot_gains_a_column_and_widens(self, project):
        run_dbt(["run"])
        first = {r.node.name: r for r in run_dbt(["snapshot"], expect_pass=False)}
        # tables: freeze (the shorthand) refuses to create the snapshot, as for models
        assert str(first["snap_no_create"].status) == "error"
        assert "schema_entity: tables" in first["snap_no_create"].message
        assert str(first["snap_delta"].status) == "success"
        run_dbt(["run", "--vars", "{v: 2}"])
        # a dry run plans the snapshot's change and changes nothing: no column, no merge
        dry = run_dbt(
            ["snapshot", "--select", "snap_delta", "--vars", "{schema_evolution_dry_run: true}"]
        )[0]
        assert dry.adapter_response.get("dry_run") is True, dry.adapter_response
        assert "DRY RUN" in dry.adapter_response["_message"], dry.adapter_response
        report = json.loads((Path(project.project_root) / "target/schema_changes.json").read_text())
        planned = report["models"][dry.node.unique_id]
        assert planned["dry_run"] and any("channel" in sql for sql in planned["statements"])
        assert planned["executed"] == [] and not planned["loaded"], planned
        assert "channel" not in schema_of(project, f"{project.test_schema}.snap_delta")
        # ... and no merge written to target/run (there is none to run)
        assert "merge into" not in written(project, "snap_delta"), written(project, "snap_delta")
        count = f"select count(*) from {project.test_schema}.snap_delta"
        assert project.run_sql(count, fetch="one")[0] == 1
        results = {
            r.node.name: r
            for r in run_dbt(["snapshot", "--exclude", "snap_no_create"], expect_pass=False)
        }

        for name in ("snap_delta", "snap_iceberg"):
            assert str(results[name].status) == "success", results[name].message
            # the run's changes, as any run reports them
            applied = " ".join(
                c["description"] for c in results[name].adapter_response["schema_changes"]
            )
            assert "channel" in applied and "amount" in applied, applied
            relation = (
                f"iceberg.{project.test_schema}.{name}"
                if name.endswith("iceberg")
                else f"{project.test_schema}.{name}"
            )
            schema = schema_of(project, relation)
            assert schema["amount"] == "bigint" and schema["channel"] == "string", schema
            rows = project.run_sql(
                f"select amount, channel, dbt_valid_to is null from {relation} order by amount",
                fetch="all",
            )
            assert [tuple(r) for r in rows] == [(10, None, False), (5000000000, "new", True)]

        # no persistent staging view was made (dbt-spark's are; this adapter's is temporary)
        for schema in ("default", project.test_schema):
            views = project.run_sql(f"show views in {schema}", fetch="all")
            left = {"snap_delta__dbt_tmp", "snap_iceberg__dbt_tmp"} & {str(v[1]) for v in views}
            assert not left, views

        frozen = results["snap_frozen"]
        assert str(frozen.status) == "error"
        for fragment in ("snap_frozen", "schema_entity: columns", "column: channel"):
            assert fragment in frozen.message, frozen.message
        assert "merge into" not in written(project, "snap_frozen")  # blocked: none written
        assert "merge into" in written(project, "snap_delta")  # (as a loading run writes it)
        frozen_rel = f"{project.test_schema}.snap_frozen"
        assert "channel" not in schema_of(project, frozen_rel)
        assert project.run_sql(f"select count(*) from {frozen_rel}", fetch="one")[0] == 1

        # a third run with nothing new records nothing: evolution leaves no false changes
        again = {r.node.name: r for r in run_dbt(["snapshot", "--select", "snap_delta"])}
        assert str(again["snap_delta"].status) == "success"
        delta_rel = f"{project.test_schema}.snap_delta"
        assert project.run_sql(f"select count(*) from {delta_rel}", fetch="one")[0] == 2
