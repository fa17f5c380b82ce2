"""SPEC §3 on real Spark: tables / columns / data_type × evolve / freeze / discard_row /
discard_value, for delta and parquet (every cell) and iceberg (tables and columns rows).

One project holds a model per cell; each has a v1 and a v2 body (`--vars '{v: 2}'`). The
assertions read the real tables, run_results.json and target/schema_changes.json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from dbt.exceptions import ParsingError
from dbt.tests.util import run_dbt

from tests.functional.evolution.test_evolution_matrix import rows_of, schema_of

MODES = ("evolve", "freeze", "discard_row", "discard_value")


@dataclass(frozen=True)
class Cell:
    entity: str
    mode: str
    fmt: str
    v1: str
    v2: str

    @property
    def name(self) -> str:
        return f"{self.entity}_{self.mode}_{self.fmt}"


COLUMNS_V1 = "select 1 as id"
COLUMNS_V2 = "select 2 as id, 'x' as note union all select 3 as id, cast(null as string) as note"
TYPES_V1 = "select 1 as id, cast(10 as int) as score"
TYPES_V2 = "select 2 as id, '20' as score union all select 3 as id, 'abc' as score"

CELLS = [
    *(
        Cell("tables", m, f, "", "select 1 as id")
        for m in MODES
        for f in ("delta", "iceberg", "parquet")
    ),
    *(
        Cell("columns", m, f, COLUMNS_V1, COLUMNS_V2)
        for m in MODES
        for f in ("delta", "iceberg", "parquet")
    ),
    *(Cell("data_type", m, f, TYPES_V1, TYPES_V2) for m in MODES for f in ("delta", "parquet")),
]

EXTRA_MODELS = {
    # nested struct field under columns: discard_value keeps the deployed struct
    "nested_discard_value": (
        "{'columns': 'discard_value'}",
        "select 1 as id, named_struct('a', 1) as s",
        "select 2 as id, named_struct('a', 2, 'b', 'x') as s",
    ),
    "nested_freeze": (
        "{'columns': 'freeze'}",
        "select 1 as id, named_struct('a', 1) as s",
        "select 2 as id, named_struct('a', 2, 'b', 'x') as s",
    ),
    # per value: strings that all cast into the deployed int column are no violation
    "coercible_freeze": ("{'data_type': 'freeze'}", TYPES_V1, "select 2 as id, '20' as score"),
    # a safe widening (int values into a bigint column) is never a violation
    "safe_widening_freeze": (
        "{'columns': 'freeze', 'data_type': 'freeze'}",
        "select 1 as id, cast(1 as bigint) as n",
        "select 2 as id, cast(2 as int) as n",
    ),
    # Spark resolves names case-insensitively: ID and id are one column
    "case_insensitive_freeze": ("{'columns': 'freeze'}", "select 1 as ID", "select 2 as id"),
    # bigint values into an int column: Delta widens the column under evolve
    "widen_evolve_delta": (
        "{'data_type': 'evolve'}",
        "select 1 as id, cast(1 as int) as n",
        "select 2 as id, cast(5000000000 as bigint) as n",
    ),
    # discarded rows are kept in <relation>__quarantine with the reason and the run id
    "quarantined": (
        "{'columns': 'discard_row', 'quarantine': true}",
        COLUMNS_V1,
        COLUMNS_V2,
    ),
    # the new-table rule: a frozen contract still creates the table on its first run
    "new_table_freeze": (
        "{'columns': 'freeze', 'data_type': 'freeze'}",
        "",
        "select 1 as id, 'x' as note",
    ),
}


def incremental(fmt: str, contract: str, v1: str, v2: str) -> str:
    head = (
        "{{ config(materialized='incremental', incremental_strategy='append', file_format='"
        + fmt
        + "', schema_contract="
        + contract
        + ") }}\n"
    )
    if not v1:  # the model exists only from v2 on: its first run is v2's
        return head.replace("config(", "config(enabled=var('v', 1) == 2, ") + v2 + "\n"
    return head + "{% if var('v', 1) == 1 %}\n" + v1 + "\n{% else %}\n" + v2 + "\n{% endif %}\n"


def cell_sql(cell: Cell) -> str:
    if cell.entity == "tables":
        # the table does not exist until v2 (v1 is disabled), so `tables` applies on v2
        return (
            "{{ config(enabled=var('v', 1) == 2, materialized='incremental', file_format='"
            + cell.fmt
            + "', schema_contract={'tables': '"
            + cell.mode
            + "'}) }}\nselect 1 as id\n"
        )
    return incremental(cell.fmt, "{'" + cell.entity + "': '" + cell.mode + "'}", cell.v1, cell.v2)


def rel(project, name: str) -> str:
    return (
        f"iceberg.{project.test_schema}.{name}"
        if name.endswith("_iceberg")
        else f"{project.test_schema}.{name}"
    )


def exists(project, name: str) -> bool:
    catalog = "iceberg." if name.endswith("_iceberg") else ""
    rows = project.run_sql(f"show tables in {catalog}{project.test_schema}", fetch="all")
    return name in {r[1] for r in rows}


class TestContractMatrix:
    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{c.name}.sql": cell_sql(c) for c in CELLS}
        for name, (contract, v1, v2) in EXTRA_MODELS.items():
            files[f"{name}.sql"] = incremental("delta", contract, v1, v2)
        return files

    @pytest.fixture(scope="class")
    def outcome(self, project):
        run_dbt(["run"], expect_pass=None)
        before = {
            n: rows_of(project, rel(project, n))
            for n in ("columns_freeze_delta", "data_type_freeze_delta")
        }
        results = run_dbt(["run", "--vars", "{v: 2}"], expect_pass=None)
        report = json.loads((Path(project.project_root) / "target/schema_changes.json").read_text())
        by_name = {r.node.name: r for r in results}
        return by_name, report, before

    # ---- tables -----------------------------------------------------------------------
    @pytest.mark.parametrize("fmt", ("delta", "iceberg", "parquet"))
    def test_tables(self, project, outcome, fmt):
        results, _, _ = outcome
        assert str(results[f"tables_evolve_{fmt}"].status) == "success"
        assert exists(project, f"tables_evolve_{fmt}")
        frozen = results[f"tables_freeze_{fmt}"]
        assert str(frozen.status) == "error"
        assert (
            "schema_entity: tables" in frozen.message and "contract_mode: freeze" in frozen.message
        )
        assert not exists(project, f"tables_freeze_{fmt}")
        for mode in ("discard_row", "discard_value"):
            result = results[f"tables_{mode}_{fmt}"]
            assert str(result.status) == "success", result.message
            assert "SKIP" in result.adapter_response["_message"]
            assert not exists(project, f"tables_{mode}_{fmt}")

    # ---- columns ----------------------------------------------------------------------
    @pytest.mark.parametrize("fmt", ("delta", "iceberg", "parquet"))
    def test_columns(self, project, outcome, fmt):
        results, report, before = outcome
        r = lambda mode: rel(project, f"columns_{mode}_{fmt}")  # noqa: E731
        assert str(results[f"columns_evolve_{fmt}"].status) == "success"
        assert rows_of(project, r("evolve")) == [(1, None), (2, "x"), (3, None)]

        frozen = results[f"columns_freeze_{fmt}"]
        assert str(frozen.status) == "error"
        for fragment in ("schema_entity: columns", "contract_mode: freeze", "column: note"):
            assert fragment in frozen.message, frozen.message
        assert schema_of(project, r("freeze")) == {"id": "int"}
        assert rows_of(project, r("freeze")) == [(1,)]

        assert str(results[f"columns_discard_value_{fmt}"].status) == "success"
        assert schema_of(project, r("discard_value")) == {"id": "int"}
        assert rows_of(project, r("discard_value")) == [(1,), (2,), (3,)]

        dropped = results[f"columns_discard_row_{fmt}"]
        assert str(dropped.status) == "success"
        assert schema_of(project, r("discard_row")) == {"id": "int"}
        assert rows_of(project, r("discard_row")) == [(1,), (3,)]
        assert dropped.adapter_response["rows_discarded"] == 1
        assert dropped.adapter_response["contract"]["columns"] == "discard_row"

    # ---- data_type --------------------------------------------------------------------
    @pytest.mark.parametrize("fmt", ("delta", "parquet"))
    def test_data_type(self, project, outcome, fmt):
        results, report, before = outcome
        r = lambda mode: rel(project, f"data_type_{mode}_{fmt}")  # noqa: E731
        assert str(results[f"data_type_evolve_{fmt}"].status) == "success"
        assert schema_of(project, r("evolve")) == {
            "id": "int",
            "score": "int",
            "score__v_string": "string",
        }
        assert rows_of(project, r("evolve")) == [(1, 10, None), (2, 20, None), (3, None, "abc")]

        frozen = results[f"data_type_freeze_{fmt}"]
        assert str(frozen.status) == "error"
        for fragment in (
            "schema_entity: data_type",
            "contract_mode: freeze",
            "column: score",
            "'abc'",
        ):
            assert fragment in frozen.message, frozen.message
        assert rows_of(project, r("freeze")) == [(1, 10)]

        assert str(results[f"data_type_discard_row_{fmt}"].status) == "success"
        assert rows_of(project, r("discard_row")) == [(1, 10), (2, 20)]
        assert results[f"data_type_discard_row_{fmt}"].adapter_response["rows_discarded"] == 1

        assert str(results[f"data_type_discard_value_{fmt}"].status) == "success"
        assert rows_of(project, r("discard_value")) == [(1, 10), (2, 20), (3, None)]
        assert results[f"data_type_discard_value_{fmt}"].adapter_response["values_discarded"] == 1

    # ---- nuances ----------------------------------------------------------------------
    def test_nested_fields(self, project, outcome):
        results, _, _ = outcome
        assert str(results["nested_discard_value"].status) == "success"
        assert schema_of(project, rel(project, "nested_discard_value"))["s"] == "struct<a:int>"
        assert rows_of(project, rel(project, "nested_discard_value"), "id, s.a") == [(1, 1), (2, 2)]
        frozen = results["nested_freeze"]
        assert str(frozen.status) == "error" and "s.b" in frozen.message, frozen.message

    def test_per_value_coercion_and_safe_widening(self, project, outcome):
        results, _, _ = outcome
        assert str(results["coercible_freeze"].status) == "success", results[
            "coercible_freeze"
        ].message
        assert rows_of(project, rel(project, "coercible_freeze")) == [(1, 10), (2, 20)]
        assert str(results["safe_widening_freeze"].status) == "success"
        assert schema_of(project, rel(project, "safe_widening_freeze"))["n"] == "bigint"
        assert str(results["case_insensitive_freeze"].status) == "success"

    def test_evolve_widens_on_delta(self, project, outcome):
        results, _, _ = outcome
        assert str(results["widen_evolve_delta"].status) == "success"
        assert schema_of(project, rel(project, "widen_evolve_delta"))["n"] == "bigint"
        assert rows_of(project, rel(project, "widen_evolve_delta")) == [(1, 1), (2, 5000000000)]

    def test_quarantine(self, project, outcome):
        results, _, _ = outcome
        assert str(results["quarantined"].status) == "success"
        rows = project.run_sql(
            f"select id, _contract_reason, _dbt_run_id from {rel(project, 'quarantined')}__quarantine",
            fetch="all",
        )
        assert [r[0] for r in rows] == [2]
        assert "note" in rows[0][1]
        assert rows[0][2] == results["quarantined"].node.config.get("invocation_id", rows[0][2])

    def test_new_table_rule(self, project, outcome):
        results, _, _ = outcome
        assert str(results["new_table_freeze"].status) == "success"
        assert schema_of(project, rel(project, "new_table_freeze")) == {
            "id": "int",
            "note": "string",
        }

    def test_report_records_violation(self, project, outcome):
        _, report, _ = outcome
        entry = report["models"]["model.test.columns_freeze_delta"]
        assert entry["violation"]["schema_entity"] == "columns"
        assert entry["violation"]["contract_mode"] == "freeze"


class TestContractConfigSurface:
    """Shorthand, folder inheritance with a per-model override, the run-level override, and
    invalid values failing before anything runs."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"test": {"frozen": {"+schema_contract": "freeze"}}}}

    @pytest.fixture(scope="class")
    def models(self):
        body = "{% if var('v', 1) == 1 %}select 1 as id{% else %}select 2 as id, 'x' as note{% endif %}"
        inc = "{{ config(materialized='incremental', incremental_strategy='append') }}\n"
        return {
            "frozen": {
                "inherits.sql": inc + body,
                "overrides.sql": "{{ config(materialized='incremental', incremental_strategy='append',"
                " schema_contract={'columns': 'evolve'}) }}\n" + body,
            },
            "bad_mode.sql": "{{ config(materialized='incremental', schema_contract='strict') }}\nselect 1 as id",
        }

    def test_inheritance_override_and_errors(self, project):
        # an invalid mode fails the parse: no model runs, nothing is created
        with pytest.raises(ParsingError) as info:
            run_dbt(["run", "--vars", "{schema_contract: {tables: evolve}}"])
        message = str(info.value)
        assert "model.test.bad_mode (models/bad_mode.sql): `schema_contract` is 'strict'" in message
        assert "allowed: evolve, freeze, discard_row, discard_value" in message
        assert not any(exists(project, name) for name in ("bad_mode", "inherits", "overrides"))
        (Path(project.project_root) / "models" / "bad_mode.sql").unlink()

        # shorthand `freeze` from the folder includes tables: a run-level mapping that names
        # only `tables` lets the first run create them, and keeps columns/data_type frozen
        run_dbt(["run", "--vars", "{schema_contract: {tables: evolve}}"])

        results = {r.node.name: r for r in run_dbt(["run", "--vars", "{v: 2}"], expect_pass=False)}
        assert str(results["inherits"].status) == "error"  # folder: freeze
        assert "schema_entity: columns" in results["inherits"].message
        assert str(results["overrides"].status) == "success"  # model config wins for columns

        # run level: a mapping overrides only the entities it names
        results = {
            r.node.name: r
            for r in run_dbt(
                [
                    "run",
                    "--vars",
                    "{v: 2, schema_contract: {columns: discard_value}}",
                ]
            )
        }
        assert str(results["inherits"].status) == "success"
        assert schema_of(project, rel(project, "inherits")) == {"id": "int"}
