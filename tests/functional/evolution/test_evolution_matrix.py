"""SPEC §4 on real Spark: every change row × delta, iceberg, parquet.

One dbt project holds a model per (change, format). Each model has a v1 and a v2 body selected
by `--vars '{v: 2}'`, so a handful of dbt invocations cover the whole matrix; the assertions then
read the real tables (schema, rows, Delta history). `TestEvolutionMatrix` holds the Delta and
Iceberg models (CI), `TestEvolutionMatrixParquet` the Parquet ones (`make functional-extra`:
Parquet's permitted changes rebuild or rewrite the table)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

FORMATS = ("delta", "iceberg", "parquet")


@dataclass(frozen=True)
class Case:
    name: str
    v1: str
    v2: str
    formats: tuple[str, ...] = FORMATS
    evolution: str = "{'strategy': 'alter_and_backfill'}"


CASES = (
    Case("add_col", "select 1 as id", "select 2 as id, 'x' as note"),
    Case(
        "add_default",
        "select 1 as id",
        "select 2 as id, 'done' as status",
        evolution="{'columns': {'status': {'default': \"'pending'\"}}}",
    ),
    Case(
        "add_backfill",
        "select 1 as id",
        "select 2 as id, 20 as twice",
        formats=("delta", "iceberg"),
        evolution="{'columns': {'twice': {'backfill': 'id * 2'}}}",
    ),
    Case(
        "add_field",
        "select 1 as id, named_struct('a', 1) as s",
        "select 2 as id, named_struct('a', 2, 'b', 'x') as s",
    ),
    Case(
        "add_elem_field",
        "select 1 as id, array(named_struct('a', 1)) as items",
        "select 2 as id, array(named_struct('a', 2, 'b', 'x')) as items",
        formats=("delta", "iceberg"),
    ),
    Case("widen", "select 1 as id, cast(1 as int) as n", "select 2 as id, cast(2 as bigint) as n"),
    Case(
        "widen_nested",
        "select 1 as id, named_struct('n', cast(1 as int)) as s, array(cast(1 as int)) as arr,"
        " map('k', cast(1 as int)) as m",
        "select 2 as id, named_struct('n', cast(2 as bigint)) as s, array(cast(2 as bigint)) as arr,"
        " map('k', cast(2 as bigint)) as m",
    ),
    Case("remove_col", "select 1 as id, 'x' as note", "select 2 as id"),
    Case("narrow", "select 1 as id, cast(1 as bigint) as n", "select 2 as id, cast(2 as int) as n"),
    Case(
        # the dbt-spark failure this adapter fixes: struct field + widening + new column
        "combo",
        "select 1 as id, cast(1 as int) as n, named_struct('a', 1) as s",
        "select 2 as id, cast(2 as bigint) as n, named_struct('a', 2, 'b', 'x') as s, 'y' as extra",
    ),
)


def model_name(case: Case, fmt: str) -> str:
    return f"{case.name}_{fmt}"


def model_sql(case: Case, fmt: str) -> str:
    return (
        "{{ config(materialized='incremental', file_format='" + fmt + "', "
        # the entries name v2's columns: a build checks them against its output (first ones too)
        f"schema_evolution=({case.evolution} if var('v', 1) != 1 else {{}})) }}}}\n"
        "{% if var('v', 1) == 1 %}\n" + case.v1 + "\n{% else %}\n" + case.v2 + "\n{% endif %}\n"
    )


ALL_MODELS = [(case, fmt) for case in CASES for fmt in case.formats]


def relation(project, case: Case, fmt: str) -> str:
    schema = project.test_schema
    name = model_name(case, fmt)
    return f"iceberg.{schema}.{name}" if fmt == "iceberg" else f"{schema}.{name}"


def schema_of(project, rel: str) -> dict[str, str]:
    rows = project.run_sql(f"describe table {rel}", fetch="all")
    out = {}
    for row in rows:
        if not row[0] or row[0].startswith("#"):
            break
        out[row[0]] = row[1]
    return out


def rows_of(project, rel: str, cols: str = "*") -> list[tuple]:
    return [tuple(r) for r in project.run_sql(f"select {cols} from {rel} order by id", fetch="all")]


def run_dbt_any(args: list[str]):
    """run_dbt without asserting the overall exit state: per-node statuses are checked instead."""
    return run_dbt(args, expect_pass=None)  # type: ignore[arg-type]


def statuses(results) -> dict[str, str]:
    return {r.node.name: str(r.status) for r in results}


@dataclass
class Outcome:
    v2: dict[str, str] = field(default_factory=dict)
    permitted: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    report: dict = field(default_factory=dict)


BLOCKED = (
    (3, "parquet", "allow_full_refresh"),
    (5, "parquet", "allow_full_refresh"),
    (6, "parquet", "allow_full_refresh"),
    (7, "delta", "allow_column_removal"),
    (7, "iceberg", "allow_column_removal"),
    (7, "parquet", "allow_column_removal"),
    (8, "delta", "allow_full_refresh"),
    (8, "iceberg", "allow_full_refresh"),
    (8, "parquet", "allow_full_refresh"),
    (9, "parquet", "allow_full_refresh"),
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test's `fmt` over the formats its class holds (`FORMATS`): `TestEvolutionMatrix`
    holds Delta and Iceberg (CI), `TestEvolutionMatrixParquet` Parquet (functional-extra)."""
    held = getattr(metafunc.cls, "FORMATS", ())
    if "case_index" in metafunc.fixturenames:
        metafunc.parametrize("case_index,fmt,var", [b for b in BLOCKED if b[1] in held])
    elif "fmt" in metafunc.fixturenames:
        metafunc.parametrize("fmt", held)


class EvolutionMatrix:
    """The matrix's models of the formats in `FORMATS`: one project, a v1 run, a v2 run and a
    permitted run of what v2 blocked."""

    FORMATS: tuple[str, ...] = ()

    @pytest.fixture(scope="class")
    def models(self):
        return {
            f"{model_name(c, f)}.sql": model_sql(c, f) for c, f in ALL_MODELS if f in self.FORMATS
        }

    @pytest.fixture(scope="class")
    def outcome(self, project) -> Outcome:
        out = Outcome()
        run_dbt(["run"])
        results = run_dbt_any(["run", "--vars", "{v: 2}"])
        out.v2 = statuses(results)
        out.messages = {r.node.name: r.message or "" for r in results}
        out.report = json.loads(
            (Path(project.project_root) / "target/schema_changes.json").read_text()
        )
        blocked = [name for name, status in out.v2.items() if status == "error"]
        if blocked:
            results = run_dbt_any(
                [
                    "run",
                    "--select",
                    *blocked,
                    "--vars",
                    "{v: 2, allow_full_refresh: true, allow_column_removal: true}",
                ]
            )
            out.permitted = statuses(results)
            out.messages.update({f"permitted:{r.node.name}": r.message or "" for r in results})
        return out

    # ---- safe changes every format makes in place -----------------------------------------
    def test_add_nullable_column(self, project, outcome, fmt):
        case = CASES[0]
        assert outcome.v2[model_name(case, fmt)] == "success"
        rel = relation(project, case, fmt)
        assert schema_of(project, rel) == {"id": "int", "note": "string"}
        assert rows_of(project, rel) == [(1, None), (2, "x")]

    def test_add_column_with_default(self, project, outcome, fmt):
        case = CASES[1]
        assert outcome.v2[model_name(case, fmt)] == "success", outcome.messages
        assert rows_of(project, relation(project, case, fmt)) == [(1, "pending"), (2, "done")]

    # ---- unsafe or unsupported without permission: blocked, table untouched ----------------
    def test_blocked_until_permitted(self, project, outcome, case_index, fmt, var):
        case = CASES[case_index]
        name = model_name(case, fmt)
        assert outcome.v2[name] == "error"
        message = outcome.messages[name]
        assert var in message and "nothing was changed" in message, message
        # the permitted run succeeds
        assert outcome.permitted[name] == "success", outcome.messages.get(f"permitted:{name}")

    def test_permitted_removal_keeps_rows(self, project, outcome, fmt):
        rel = relation(project, CASES[7], fmt)
        assert schema_of(project, rel) == {"id": "int"}
        assert rows_of(project, rel) == [(1,), (2,)]

    def test_permitted_narrowing_is_a_full_refresh(self, project, outcome, fmt):
        rel = relation(project, CASES[8], fmt)
        assert schema_of(project, rel)["n"] == "int"
        assert rows_of(project, rel) == [(2, 2)]  # rebuilt from the model's SQL

    def test_every_success_reports_its_schema_changes(self, project, outcome):
        """The last run's (the permitted run's) successes carry their schema changes in their
        adapter response."""
        results = json.loads((Path(project.project_root) / "target/run_results.json").read_text())
        successes = [r for r in results["results"] if r["status"] == "success"]
        assert successes
        assert all("schema_changes" in r["adapter_response"] for r in successes), successes


class TestEvolutionMatrix(EvolutionMatrix):
    FORMATS = ("delta", "iceberg")

    # ---- safe changes Parquet cannot make in place ----------------------------------------
    def test_add_column_with_backfill(self, project, outcome, fmt):
        case = CASES[2]
        assert outcome.v2[model_name(case, fmt)] == "success", outcome.messages
        assert rows_of(project, relation(project, case, fmt)) == [(1, 2), (2, 20)]

    def test_add_struct_field_in_place(self, project, outcome, fmt):
        case = CASES[3]
        assert outcome.v2[model_name(case, fmt)] == "success", outcome.messages
        rel = relation(project, case, fmt)
        assert schema_of(project, rel)["s"] == "struct<a:int,b:string>"
        assert rows_of(project, rel, "id, s.a, s.b") == [(1, 1, None), (2, 2, "x")]

    def test_add_field_to_array_of_struct(self, project, outcome, fmt):
        case = CASES[4]
        assert outcome.v2[model_name(case, fmt)] == "success", outcome.messages
        rel = relation(project, case, fmt)
        assert schema_of(project, rel)["items"] == "array<struct<a:int,b:string>>"
        assert rows_of(project, rel, "id, items[0].b") == [(1, None), (2, "x")]

    def test_widen_scalar_in_place(self, project, outcome, fmt):
        case = CASES[5]
        assert outcome.v2[model_name(case, fmt)] == "success", outcome.messages
        rel = relation(project, case, fmt)
        assert schema_of(project, rel)["n"] == "bigint"
        assert rows_of(project, rel) == [(1, 1), (2, 2)]

    def test_widen_nested(self, project, outcome, fmt):
        case = CASES[6]
        assert outcome.v2[model_name(case, fmt)] == "success", outcome.messages
        rel = relation(project, case, fmt)
        schema = schema_of(project, rel)
        assert (schema["s"], schema["arr"], schema["m"]) == (
            "struct<n:bigint>",
            "array<bigint>",
            "map<string,bigint>",
        )
        assert rows_of(project, rel, "id, s.n, arr[0], m['k']") == [(1, 1, 1, 1), (2, 2, 2, 2)]

    def test_delta_safe_changes_ride_in_the_load_commit(self, project, outcome):
        """DESCRIBE HISTORY: v2 made one commit, the load, which changed the schema too (no
        ALTER commit before it), tagged with the run's invocation and model."""
        for case in (CASES[0], CASES[3], CASES[4], CASES[5], CASES[9]):
            history = project.run_sql(
                f"describe history {relation(project, case, 'delta')}", fetch="all"
            )
            v2 = [h for h in history if h[0] >= 1]  # 0: CREATE TABLE AS SELECT of v1
            operations = [h[4] for h in history]
            assert not any(op in ("ADD COLUMNS", "CHANGE COLUMN") for op in operations), operations
            last = history[0]
            assert last[4] in ("WRITE", "MERGE"), (case.name, operations)
            tag = last[13] or ""
            assert tag.startswith("dbt-spark-contracts:") and tag.endswith(
                f"model.test.{model_name(case, 'delta')}"
            ), (case.name, tag)
            assert len(v2) == 1, (case.name, operations)
            entry = outcome.report["models"][f"model.test.{model_name(case, 'delta')}"]
            assert entry["write_path"] == "in_write" and entry["executed"] == [], entry

    def test_report_and_adapter_response(self, project, outcome):
        assert outcome.report["invocation_id"]
        entry = outcome.report["models"]["model.test.add_col_delta"]
        assert [d["change"] for d in entry["diff"]] == ["ColumnAdded"]
        assert entry["write_path"] == "in_write" and entry["executed"] == []
        entry = outcome.report["models"]["model.test.add_col_iceberg"]
        assert entry["write_path"] == "multi_step"
        assert any("ADD COLUMNS" in s for s in entry["executed"])


class TestEvolutionMatrixParquet(EvolutionMatrix):
    """Parquet's share (`make functional-extra`): its permitted changes rebuild or rewrite the
    table."""

    FORMATS = ("parquet",)

    def test_blocked_parquet_combo_was_not_half_applied(self, project, outcome):
        """dbt-spark leaves the new column behind when the struct change fails; here the
        blocked v2 changed nothing (checked in the report: no statement executed)."""
        entry = outcome.report["models"]["model.test.combo_parquet"]
        assert entry["plan"]["blocked"]
        assert entry["executed"] == [] or entry["dry_run"]

    def test_permitted_parquet_rewrite_keeps_rows(self, project, outcome):
        rel = relation(project, CASES[9], "parquet")
        schema = schema_of(project, rel)
        assert (schema["n"], schema["s"], schema["extra"]) == (
            "bigint",
            "struct<a:int,b:string>",
            "string",
        )
        assert rows_of(project, rel, "id, n, s.b, extra") == [(1, 1, None, None), (2, 2, "x", "y")]
