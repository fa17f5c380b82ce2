"""Schema contracts and evolution gates on TABLE models (issue: contracts at every door).

A table model that exists and sets `schema_contract` (or `schema_evolution`) is rebuilt under the
same decisions as an incremental run: `columns` and `data_type` modes bind against the deployed
table, drops and narrowing are gated, and the rebuild is one `create or replace` (Delta, Iceberg),
so a failed rebuild keeps the previous table and rows. One project, a v1 and a v2 body per model.
"""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contracts.test_contract_matrix import MODES, exists, rel
from tests.functional.evolution.test_evolution_matrix import rows_of, schema_of
from tests.functional.probes import versioned_model

COLUMNS_V1 = "select 1 as id"
COLUMNS_V2 = "select 2 as id, 'x' as note union all select 3 as id, cast(null as string) as note"
TYPES_V1 = "select 1 as id, cast(10 as int) as score"
TYPES_V2 = "select 2 as id, '20' as score union all select 3 as id, 'abc' as score"
FORMATS = ("delta", "iceberg")


def table(fmt: str, config: str, v1: str, v2: str) -> str:
    return versioned_model(f"materialized='table', file_format='{fmt}', {config}", v1, v2)


def contract(entity: str, mode: str) -> str:
    return "schema_contract={'" + entity + "': '" + mode + "'}"


MODELS = {
    **{
        f"columns_{m}_{f}.sql": table(f, contract("columns", m), COLUMNS_V1, COLUMNS_V2)
        for m in MODES
        for f in FORMATS
    },
    **{
        f"data_type_{m}_{f}.sql": table(f, contract("data_type", m), TYPES_V1, TYPES_V2)
        for m in MODES
        for f in FORMATS
    },
    # parquet has no atomic replace: every contract check runs before the old table is dropped
    "columns_freeze_parquet.sql": table(
        "parquet", contract("columns", "freeze"), COLUMNS_V1, COLUMNS_V2
    ),
    "data_type_freeze_parquet.sql": table(
        "parquet", contract("data_type", "freeze"), TYPES_V1, TYPES_V2
    ),
    # gates: dropping a column needs allow_column_removal, narrowing needs allow_full_refresh
    "drops_delta.sql": table(
        "delta",
        "schema_evolution={'strategy': 'alter_and_backfill'}",
        "select 1 as id, 'a' as gone",
        "select 2 as id",
    ),
    "narrows_iceberg.sql": table(
        "iceberg",
        "schema_evolution={}",
        "select 1 as id, cast(1 as bigint) as n",
        "select 2 as id, cast(2 as int) as n",
    ),
    # without schema_contract / schema_evolution a table model rebuilds as dbt's does
    "plain_delta.sql": table("delta", "tags=['plain']", "select 1 as id, 'a' as gone", COLUMNS_V2),
}


class TestTableModelContracts:
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    @pytest.fixture(scope="class")
    def outcome(self, project):
        run_dbt(["run"])
        results = run_dbt(["run", "--vars", "{v: 2}"], expect_pass=False)
        return {r.node.name: r for r in results}

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_columns_modes(self, project, outcome, fmt):
        r = lambda mode: rel(project, f"columns_{mode}_{fmt}")  # noqa: E731
        assert str(outcome[f"columns_evolve_{fmt}"].status) == "success"
        assert rows_of(project, r("evolve")) == [(2, "x"), (3, None)]

        frozen = outcome[f"columns_freeze_{fmt}"]
        assert str(frozen.status) == "error"
        for fragment in (
            f"columns_freeze_{fmt}",
            "schema_entity: columns",
            "contract_mode: freeze",
            "column: note",
            "deployed type: (absent), compiled type: STRING",
        ):
            assert fragment in frozen.message, frozen.message
        assert schema_of(project, r("freeze")) == {"id": "int"}
        assert rows_of(project, r("freeze")) == [(1,)]  # the previous table and rows

        assert str(outcome[f"columns_discard_value_{fmt}"].status) == "success"
        assert schema_of(project, r("discard_value")) == {"id": "int"}
        assert rows_of(project, r("discard_value")) == [(2,), (3,)]

        dropped = outcome[f"columns_discard_row_{fmt}"]
        assert str(dropped.status) == "success", dropped.message
        assert schema_of(project, r("discard_row")) == {"id": "int"}
        assert rows_of(project, r("discard_row")) == [(3,)]
        assert dropped.adapter_response["rows_discarded"] == 1

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_data_type_modes(self, project, outcome, fmt):
        r = lambda mode: rel(project, f"data_type_{mode}_{fmt}")  # noqa: E731
        assert str(outcome[f"data_type_evolve_{fmt}"].status) == "success"
        assert schema_of(project, r("evolve")) == {
            "id": "int",
            "score": "int",
            "score__v_string": "string",
        }
        assert rows_of(project, r("evolve")) == [(2, 20, None), (3, None, "abc")]

        frozen = outcome[f"data_type_freeze_{fmt}"]
        assert str(frozen.status) == "error"
        for fragment in ("schema_entity: data_type", "column: score", "'abc'", "INT"):
            assert fragment in frozen.message, frozen.message
        assert rows_of(project, r("freeze")) == [(1, 10)]

        discarded = outcome[f"data_type_discard_row_{fmt}"]
        assert str(discarded.status) == "success"
        assert rows_of(project, r("discard_row")) == [(2, 20)]
        assert discarded.adapter_response["rows_discarded"] == 1

        nulled = outcome[f"data_type_discard_value_{fmt}"]
        assert str(nulled.status) == "success"
        assert rows_of(project, r("discard_value")) == [(2, 20), (3, None)]
        assert nulled.adapter_response["values_discarded"] == 1

    def test_parquet_checks_before_dropping(self, project, outcome):
        for name, rows in (
            ("columns_freeze_parquet", [(1,)]),
            ("data_type_freeze_parquet", [(1, 10)]),
        ):
            assert str(outcome[name].status) == "error"
            assert rows_of(project, rel(project, name)) == rows

    def test_gates(self, project, outcome):
        drops = outcome["drops_delta"]
        assert str(drops.status) == "error"
        assert "allow_column_removal" in drops.message, drops.message
        assert rows_of(project, rel(project, "drops_delta")) == [(1, "a")]
        narrows = outcome["narrows_iceberg"]
        assert str(narrows.status) == "error"
        assert "allow_full_refresh" in narrows.message, narrows.message
        assert rows_of(project, rel(project, "narrows_iceberg")) == [(1, 1)]
        # a model without either config rebuilds freely
        assert str(outcome["plain_delta"].status) == "success"
        assert schema_of(project, rel(project, "plain_delta")) == {"id": "int", "note": "string"}

        # the run vars open the gates; --full-refresh bypasses them
        run_dbt(
            [
                "run",
                "--select",
                "drops_delta",
                "--vars",
                "{v: 2, allow_column_removal: true}",
            ]
        )
        assert schema_of(project, rel(project, "drops_delta")) == {"id": "int"}
        run_dbt(["run", "--select", "narrows_iceberg", "--vars", "{v: 2}", "--full-refresh"])
        assert schema_of(project, rel(project, "narrows_iceberg"))["n"] == "int"
        assert rows_of(project, rel(project, "narrows_iceberg")) == [(2, 2)]


class TestFirstBuildChecks:
    """What needs the model's output is checked before the first statement of a first build."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "unknown_column.sql": "{{ config(materialized='table', schema_evolution="
            "{'columns': {'nope': {'default': \"'x'\"}}}) }}\nselect 1 as id",
            "bad_default.sql": "{{ config(materialized='incremental', schema_evolution="
            "{'columns': {'status': {'default': 'not valid sql ((('}}}) }}\n"
            "select 1 as id, 'a' as status",
            "bad_backfill_iceberg.sql": "{{ config(materialized='incremental', "
            "file_format='iceberg', schema_evolution="
            "{'columns': {'status': {'backfill': 'no_such_column + 1'}}}) }}\n"
            "select 1 as id, 'a' as status",
            "good.sql": "{{ config(materialized='table', schema_evolution="
            "{'columns': {'status': {'default': \"'pending'\"}}}) }}\n"
            "select 1 as id, 'a' as status",
        }

    def test_first_build_checks(self, project):
        results = {r.node.name: r for r in run_dbt(["run"], expect_pass=False)}
        # an entry ahead of its column warns and builds (test_column_settings_timing.py)
        assert str(results["unknown_column"].status) == "success", results["unknown_column"].message
        bad = results["bad_default"]
        assert str(bad.status) == "error"
        assert "schema_evolution.columns.status.default" in bad.message, bad.message
        assert "not a valid SQL expression" in bad.message
        iceberg = results["bad_backfill_iceberg"]
        assert str(iceberg.status) == "error"
        assert "schema_evolution.columns.status.backfill" in iceberg.message, iceberg.message
        assert str(results["good"].status) == "success"
        assert exists(project, "unknown_column")
        assert not exists(project, "bad_default")
        assert not exists(project, "bad_backfill_iceberg")
