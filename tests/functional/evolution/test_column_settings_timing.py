"""`schema_evolution.columns` entries work whether they are written before the column exists
(the config is in place from v1 on, so the run that adds the column picks it up) or in the same
change that adds the column (v2 only). Both forms give the same tables: a default fills the
existing rows (delta, iceberg, parquet), a backfill is applied to them (delta, iceberg), a parquet
backfill asks for `allow_full_refresh`, and a dry run on every format reports the planned DDL.

Regression tests: on e0a1d66 an entry naming a column the model did not output yet failed the
model (first build and incremental runs alike), so the "before" form lost every one of these."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from tests.functional.evolution.test_evolution_matrix import rows_of, run_dbt_any, schema_of

FORMATS = ("delta", "iceberg", "parquet")
WHEN = ("before", "with")  # the entry is written before the column exists / with it


def body(fmt: str, when: str, columns: str, v2: str) -> str:
    setting = columns if when == "before" else f"({columns} if var('v', 1) != 1 else {{}})"
    return (
        f"{{{{ config(materialized='incremental', file_format='{fmt}', "
        f"schema_evolution={setting}) }}}}\n"
        "{% if var('v', 1) == 1 %}select 1 as id{% else %}" + v2 + "{% endif %}\n"
    )


DEFAULT = "{'columns': {'status': {'default': \"'pending'\"}}}"
BACKFILL = "{'columns': {'twice': {'backfill': 'id * 2'}}}"


def rel(project, name: str) -> str:
    prefix = "iceberg." if name.split("_")[-1] == "iceberg" else ""
    return f"{prefix}{project.test_schema}.{name}"


class TestColumnSettingsBeforeAndWithTheColumn:
    @pytest.fixture(scope="class")
    def models(self):
        files = {}
        for when in WHEN:
            for fmt in FORMATS:
                files[f"default_{when}_{fmt}.sql"] = body(
                    fmt, when, DEFAULT, "select 2 as id, 'done' as status"
                )
                files[f"backfill_{when}_{fmt}.sql"] = body(
                    fmt, when, BACKFILL, "select 2 as id, 20 as twice"
                )
                files[f"dry_{when}_{fmt}.sql"] = body(
                    fmt, when, DEFAULT, "select 2 as id, 'done' as status"
                )
        return files

    @pytest.fixture(scope="class")
    def runs(self, project):
        first = {r.node.name: str(r.status) for r in run_dbt_any(["run"])}
        before = {n: rows_of(project, rel(project, n)) for n in first if n.startswith("dry_")}
        dry = run_dbt(
            ["run", "--select", "dry_*", "--vars", "{v: 2, schema_evolution_dry_run: true}"]
        )
        report = json.loads((Path(project.project_root) / "target/schema_changes.json").read_text())
        second = {
            r.node.name: r for r in run_dbt_any(["run", "--exclude", "dry_*", "--vars", "{v: 2}"])
        }
        permitted = {
            r.node.name: r
            for r in run_dbt_any(
                [
                    "run",
                    "--select",
                    "backfill_before_parquet backfill_with_parquet",
                    "--vars",
                    "{v: 2, allow_full_refresh: true}",
                ]
            )
        }
        return first, before, dry, report, second, permitted

    def test_first_build_succeeds_with_an_entry_ahead_of_its_column(self, runs):
        first = runs[0]
        assert first and set(first.values()) == {"success"}, first

    @pytest.mark.parametrize("when", WHEN)
    @pytest.mark.parametrize("fmt", FORMATS)
    def test_default_fills_existing_rows(self, project, runs, fmt, when):
        name = f"default_{when}_{fmt}"
        result = runs[4][name]
        assert str(result.status) == "success", result.message
        assert rows_of(project, rel(project, name)) == [(1, "pending"), (2, "done")]

    @pytest.mark.parametrize("when", WHEN)
    @pytest.mark.parametrize("fmt", ("delta", "iceberg"))
    def test_backfill_applies_to_existing_rows(self, project, runs, fmt, when):
        name = f"backfill_{when}_{fmt}"
        result = runs[4][name]
        assert str(result.status) == "success", result.message
        assert rows_of(project, rel(project, name)) == [(1, 2), (2, 20)]

    @pytest.mark.parametrize("when", WHEN)
    def test_parquet_backfill_needs_allow_full_refresh(self, project, runs, when):
        name = f"backfill_{when}_parquet"
        blocked = runs[4][name]
        assert str(blocked.status) == "error"
        assert "allow_full_refresh" in blocked.message, blocked.message
        permitted = runs[5][name]
        assert str(permitted.status) == "success", permitted.message
        assert rows_of(project, rel(project, name)) == [(1, 2), (2, 20)]

    @pytest.mark.parametrize("when", WHEN)
    @pytest.mark.parametrize("fmt", FORMATS)
    def test_dry_run_reports_the_planned_ddl(self, project, runs, fmt, when):
        _, before, dry, report, _, _ = runs
        name = f"dry_{when}_{fmt}"
        result = next(r for r in dry if r.node.name == name)
        assert result.adapter_response.get("dry_run") is True
        entry = report["models"][f"model.test.{name}"]
        ddl = " ".join(entry["statements"]).upper()
        assert "ADD COLUMN" in ddl, entry
        if fmt == "delta":
            assert "SET DEFAULT" in ddl and "UPDATE" in ddl, entry
        assert entry["executed"] == []
        assert rows_of(project, rel(project, name)) == before[name]
        assert schema_of(project, rel(project, name)) == {"id": "int"}
