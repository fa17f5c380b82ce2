"""A change policy per model (`schema_evolution.on_additive_change` / `on_destructive_change`)
on real Spark, delta, iceberg and parquet, top level and nested, in one project: neighbours in
one run decided each by its own setting, `warn` naming the model, path and class, `ignore`
keeping the table's schema while loading what fits, a run var winning over the model, and the
dry run's plan file showing each change's class, cost and the setting that decided it.

The unit tests (tests/unit/test_change_policy.py) cover each class per format; here every
setting acts on real tables through `dbt run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.evolution.test_evolution_matrix import rows_of, schema_of, statuses

FORMATS = ("delta", "iceberg", "parquet")

V1 = "select 1 as id, cast(5 as int) as n, named_struct('x', 1, 'y', 1) as s, 'g' as gone"
V2 = (
    "select 2 as id, cast('7' as string) as n, named_struct('x', 2, 'z', 'new') as s, "
    "'a note' as note"
)
# one change per model, where the class is the point
ADD_V2 = "select 2 as id, cast(6 as int) as n, named_struct('x', 2, 'y', 2) as s, 'g' as gone, 'a note' as note"
DROP_V2 = "select 2 as id, cast(6 as int) as n, named_struct('x', 2, 'y', 2) as s"
NESTED_V2 = "select 2 as id, cast(6 as int) as n, named_struct('x', 2, 'y', 2, 'z', 'new') as s, 'g' as gone"


def model(fmt: str, policy: str, v2: str) -> str:
    return (
        "{{ config(materialized='incremental', incremental_strategy='append', file_format='"
        + fmt
        + "', schema_evolution="
        + policy
        + ") }}\n{% if var('v', 1) == 1 %}"
        + V1
        + "{% else %}"
        + v2
        + "{% endif %}\n"
    )


# name -> (policy, v2 body)
CASES = {
    "add_error": ("{'on_additive_change': 'error'}", ADD_V2),
    "add_warn": ("{'on_additive_change': 'warn'}", ADD_V2),
    "drop_allow": ("{'on_destructive_change': 'allow'}", DROP_V2),
    "drop_error": ("{'on_destructive_change': 'error'}", DROP_V2),
    "drop_vetoed": ("{'on_destructive_change': 'allow'}", DROP_V2),
    "nested_default": ("{}", NESTED_V2),
    "ignore_all": (
        "{'on_additive_change': 'ignore', 'on_destructive_change': 'ignore'}",
        V2,
    ),
}


# a table model (every run a rebuild) ignoring both classes: the rebuild keeps the table's
# schema, a removed column the table keeps reads NULL on every row (each row is new)
REBUILD_IGNORE = (
    "{{ config(materialized='table', file_format='FMT', schema_evolution="
    "{'on_additive_change': 'ignore', 'on_destructive_change': 'ignore'}) }}\n"
    "{% if var('v', 1) == 1 %}select 1 as id, cast(5 as int) as n, 'g' as gone"
    "{% else %}select 2 as id, cast(6 as int) as n, 'a note' as note{% endif %}\n"
)


def name(case: str, fmt: str) -> str:
    return f"{case}_{fmt}"


def rel(project, case: str, fmt: str) -> str:
    table = f"{project.test_schema}.{name(case, fmt)}"
    return f"iceberg.{table}" if fmt == "iceberg" else table


def parquet_files(project, table: str) -> int:
    """The data files in a Parquet table's folder."""
    rows = project.run_sql(f"describe formatted {table}", fetch="all")
    location = next(str(r[1]) for r in rows if str(r[0]).strip() == "Location")
    folder = Path(location.replace("file:", "", 1))
    return len([f for f in folder.rglob("*.parquet") if not f.name.startswith((".", "_"))])


class TestChangePolicy:
    @pytest.fixture(scope="class")
    def models(self):
        incremental = {
            f"{name(case, fmt)}.sql": model(fmt, policy, v2)
            for case, (policy, v2) in CASES.items()
            for fmt in FORMATS
        }
        rebuilds = {
            f"{name('rebuild_ignore', fmt)}.sql": REBUILD_IGNORE.replace("FMT", fmt)
            for fmt in FORMATS
        }
        return {**incremental, **rebuilds}

    @pytest.fixture(scope="class")
    def outcome(self, project):
        run_dbt(["run"])
        before = {
            name(case, fmt): schema_of(project, rel(project, case, fmt))
            for case in (*CASES, "rebuild_ignore")
            for fmt in FORMATS
        }
        files = parquet_files(project, rel(project, "drop_allow", "parquet"))
        # the dry run: the plan file, nothing changed
        run_dbt(
            [
                "run",
                "--vars",
                "{v: 2, schema_evolution_dry_run: true}",
                "--exclude",
                "drop_vetoed_*",
            ],
            expect_pass=None,
        )  # type: ignore[arg-type]
        plan_file = json.loads(
            (Path(project.project_root) / "target" / "schema_changes.json").read_text()
        )
        dry = {
            name(case, fmt): schema_of(project, rel(project, case, fmt))
            for case in (*CASES, "rebuild_ignore")
            for fmt in FORMATS
        }
        results, log = run_dbt_and_capture(
            ["run", "--vars", "{v: 2}", "--exclude", "drop_vetoed_*"], expect_pass=False
        )
        vetoed = run_dbt(
            ["run", "--vars", "{v: 2, allow_column_removal: false}", "--select", "drop_vetoed_*"],
            expect_pass=False,
        )
        return {
            "before": before,
            "files": files,
            "dry": dry,
            "plan_file": plan_file,
            "status": statuses(results),
            "messages": {r.node.name: str(r.message) for r in results},
            "log": log,
            "vetoed": {r.node.name: (str(r.status), str(r.message)) for r in vetoed},
        }

    def test_the_dry_run_changes_nothing_and_its_plan_file_shows_class_cost_and_setting(
        self, project, outcome
    ):
        assert outcome["dry"] == outcome["before"]
        entries = outcome["plan_file"]
        entries = entries.get("models", entries) if isinstance(entries, dict) else entries
        text = json.dumps(entries)
        for fmt in FORMATS:
            assert name("drop_allow", fmt) in text
        assert '"decided_by": "on_destructive_change: allow"' in text
        assert '"decided_by": "on_additive_change: error"' in text
        assert '"class": "destructive"' in text and '"class": "additive"' in text
        assert '"cost": "metadata only"' in text

    def test_a_parquet_rewrite_names_the_files_it_rewrites(self, project, outcome):
        """Dropping a column of a Parquet table rewrites its files: the dry run's plan file says
        how many, as many as the table's folder held."""
        on_disk = outcome["files"]
        assert on_disk >= 1
        text = json.dumps(outcome["plan_file"])
        files = "file" if on_disk == 1 else "files"
        assert f'"cost": "rewrite of {on_disk} data {files}"' in text, text

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_additive_error_blocks_naming_model_path_class_and_setting(self, project, outcome, fmt):
        model = name("add_error", fmt)
        assert outcome["status"][model] == "error"
        message = outcome["messages"][model]
        for part in (
            model,
            "`note`",
            "additive",
            "on_additive_change: error",
            "on_additive_change: allow",
        ):
            assert part in message, message
        assert schema_of(project, rel(project, "add_error", fmt)) == outcome["before"][model]
        assert [r[0] for r in rows_of(project, rel(project, "add_error", fmt), "id")] == [1]

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_warn_applies_and_warns(self, project, outcome, fmt):
        model = name("add_warn", fmt)
        assert outcome["status"][model] == "success"
        assert "note" in schema_of(project, rel(project, "add_warn", fmt))
        warned = [
            line
            for line in outcome["log"].splitlines()
            if model in line and "on_additive_change: warn" in line
        ]
        assert warned and "`note`" in warned[0] and "additive" in warned[0], outcome["log"][-3000:]

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_neighbours_allow_and_error_in_one_run(self, project, outcome, fmt):
        allowed, refused = name("drop_allow", fmt), name("drop_error", fmt)
        assert outcome["status"][allowed] == "success"
        assert "gone" not in schema_of(project, rel(project, "drop_allow", fmt))
        assert [r[0] for r in rows_of(project, rel(project, "drop_allow", fmt), "id")] == [1, 2]
        assert outcome["status"][refused] == "error"
        assert "destructive" in outcome["messages"][refused]
        assert "allow_column_removal: true" in outcome["messages"][refused]
        assert "gone" in schema_of(project, rel(project, "drop_error", fmt))

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_a_run_var_wins_over_the_model(self, project, outcome, fmt):
        status, message = outcome["vetoed"][name("drop_vetoed", fmt)]
        assert status == "error" and "--vars allow_column_removal: false" in message
        assert "gone" in schema_of(project, rel(project, "drop_vetoed", fmt))

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_a_new_nested_field_by_default(self, project, outcome, fmt):
        """Additive where the format adds a field in place (delta, iceberg); parquet can only
        rewrite, which is destructive: blocked by default, naming its class."""
        model = name("nested_default", fmt)
        if fmt == "parquet":
            assert outcome["status"][model] == "error"
            assert "a destructive change" in outcome["messages"][model]
        else:
            assert outcome["status"][model] == "success"
            assert "z:" in schema_of(project, rel(project, "nested_default", fmt))["s"].replace(
                " ", ""
            )

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_ignore_keeps_the_schema_and_loads_what_fits(self, project, outcome, fmt):
        model = name("ignore_all", fmt)
        assert outcome["status"][model] == "success", outcome["messages"][model]
        table = rel(project, "ignore_all", fmt)
        assert schema_of(project, table) == outcome["before"][model]
        rows = rows_of(project, table, "id, n, s.x, s.y, gone")
        # n: '7' fits the int column; s.z and note are not written; s.y and gone read NULL
        assert rows == [(1, 5, 1, 1, "g"), (2, 7, 2, None, None)]

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_ignore_on_a_rebuild_keeps_the_schema_and_reads_null_for_the_removed_column(
        self, project, outcome, fmt
    ):
        """A table model's rebuild under `ignore`: `note` is not added, `gone` stays, and as the
        rebuild writes every row anew, `gone` is NULL on the one row the model outputs."""
        model = name("rebuild_ignore", fmt)
        assert outcome["status"][model] == "success", outcome["messages"][model]
        table = rel(project, "rebuild_ignore", fmt)
        assert schema_of(project, table) == outcome["before"][model]
        assert rows_of(project, table, "id, n, gone") == [(2, 6, None)]
