"""The two builds under a `pydantic_contract` that CREATE the table without `--full-refresh` or a
first build's plain CTAS, and which dropped their discarded rows uncounted: both are planned as
the creating run (core/materialization/create_run.py), so they count and quarantine what they
discard, as every other run does, and read the model's query once.

- A full refresh an incremental run's own plan decides (Delta): `schema_evolution.strategy:
  full_refresh` (the model's own permission for what `allow_full_refresh` gates) and a new
  column. Under a contract that discards, the plan's other full refreshes do not arise: a type
  change is checked value by value, and the contract's target keeps a new column nullable.
- An enforced dbt model contract with NOT NULL columns on Iceberg, whose table is built with
  declared columns (constraints.build_not_null): the first build of an incremental and a table
  model, and the incremental model's `--full-refresh`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.tests.util import get_connection, run_dbt

from tests.functional.contracts.test_pydantic_contract import MIXED_V2, PROBE, by_name
from tests.functional.contracts.test_pydantic_create_run import (
    KEPT_BY_ROW,
    ROW_Q,
    VALUE,
    CreateProject,
    leftovers,
    quarantined,
    table,
)
from tests.functional.evolution.test_evolution_matrix import rows_of
from tests.functional.probes import ROWS, versioned_model

PACKAGE = "create_contracts"  # test_pydantic_create_run's package (ORDERS_PY: Order)
EVOLVE = "'columns': 'evolve', "
WITH_COUPON = "select *, 'SAVE10' as coupon from ({})"


def refresh_model(contract: str, evolution: str, v1: str = MIXED_V2) -> str:
    settings = (
        "materialized='incremental', file_format='delta', "
        f"pydantic_contract='{PACKAGE}.orders:Order', schema_contract={{{EVOLVE}{contract}}}"
        + (f", schema_evolution={evolution}" if evolution else "")
    )
    return versioned_model(settings, v1, WITH_COUPON.format(v1))


STRATEGY = "{'strategy': 'full_refresh'}"  # the model's own permission: no var needed


def report_of(project) -> dict:
    path = Path(project.project_root) / "target" / "schema_changes.json"
    return json.loads(path.read_text())["models"]


class TestPlannedFullRefreshCountsAndQuarantines(CreateProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "refresh_row_q.sql": refresh_model(ROW_Q, STRATEGY),
            "refresh_value.sql": refresh_model(VALUE, STRATEGY),
        }

    def test_full_refresh_the_plan_decides(self, project):
        run_dbt(["run"])  # the creating runs: 4 rows (row) or 2 rows, 2 values (value) each
        results = by_name(run_dbt(["run", "--vars", "{v: 2}"]))
        report = report_of(project)
        name = "refresh_row_q"
        response = results[name].adapter_response
        # the plan decided the full refresh (not --full-refresh)
        ops = [c["op"] for c in response["schema_changes"]]
        assert ops == ["FullRefresh"], (name, response)
        assert response["rows_discarded"] == 4, (name, response)
        rel = table(project, name)
        assert rows_of(project, rel, "id, coupon") == [(i, "SAVE10") for i in KEPT_BY_ROW]
        entry = report[f"model.test.{name}"]
        assert (entry["rows_discarded"], entry["quarantined"]) == (4, 4), entry
        # the refresh's discarded rows join the first build's, under its own run id
        rows = quarantined(project, name)
        assert len({r[2] for r in rows}) == 2, rows
        assert [r[0] for r in rows] == [4, 5, 6, 7] * 2, rows
        assert not leftovers(project, name), leftovers(project, name)
        response = results["refresh_value"].adapter_response
        assert (response["rows_discarded"], response["values_discarded"]) == (2, 2), response
        entry = report["model.test.refresh_value"]
        assert (entry["rows_discarded"], entry["values_discarded"]) == (2, 2), entry
        rows = rows_of(project, table(project, "refresh_value"), "id, qty, address.zip, coupon")
        assert rows == [
            (3, 7, "0150", "SAVE10"),
            (4, None, "0150", "SAVE10"),
            (6, 2, None, "SAVE10"),
        ]


class TestPlannedFullRefreshEvaluatesOnce(CreateProject):
    pytestmark = pytest.mark.profile("session")

    @pytest.fixture(scope="class")
    def models(self):
        return {"refresh_eval.sql": refresh_model(ROW_Q, STRATEGY, v1=PROBE)}

    def test_model_query_runs_once(self, project, evaluations):
        name = "refresh_eval"
        run_dbt(["run"])
        before = evaluations()
        results = run_dbt(["run", "--vars", "{v: 2}"])
        assert evaluations() - before == ROWS, evaluations() - before
        response = results[0].adapter_response
        assert [c["op"] for c in response["schema_changes"]] == ["FullRefresh"], response
        # every tenth row's status is not a literal (required): dropped
        assert response["rows_discarded"] == ROWS // 10, response
        assert len(rows_of(project, table(project, name))) == ROWS - ROWS // 10
        assert len(quarantined(project, name)) == 2 * (ROWS // 10)


# the model's output typed as its enforced contract declares it (Order's columns)
TYPED = (
    "select cast(id as bigint) as id, status, cast(qty as bigint) as qty, note, address, tags "
    "from ({})"
)


def not_null_model(materialized: str, contract: str, v1: str = MIXED_V2) -> str:
    # dbt requires an incremental model with an enforced contract to set it (the schema
    # contract decides, the adapter warns that it is ignored)
    fail = ", on_schema_change='fail'" if materialized == "incremental" else ""
    settings = (
        f"materialized='{materialized}', file_format='iceberg'{fail}, "
        f"pydantic_contract='{PACKAGE}.orders:Order', schema_contract={{{contract}}}"
    )
    return versioned_model(settings, TYPED.format(v1), TYPED.format(v1))


ENFORCED = """
  - name: {name}
    config:
      contract: {{enforced: true}}
    columns:
      - name: id
        data_type: bigint
        constraints:
          - type: not_null
      - name: status
        data_type: string
      - name: qty
        data_type: bigint
      - name: note
        data_type: string
      - name: address
        data_type: struct<city:string,zip:string>
      - name: tags
        data_type: array<string>
"""


def enforced_schema(*names: str) -> str:
    return "version: 2\nmodels:\n" + "".join(ENFORCED.format(name=n) for n in names)


def not_null_of(project, rel: str) -> dict:
    with get_connection(project.adapter):  # run_dbt closed (Connect: stopped) the last one
        fields = project.adapter.schema_json(f"select * from {rel}")["fields"]
    return {f["name"]: f["nullable"] for f in fields if not f["nullable"]}


NN_MODELS = ("nn_row_q_iceberg", "nn_value_iceberg", "nn_table_row_q_iceberg")


class TestIcebergNotNullBuildCountsAndQuarantines(CreateProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "nn_row_q_iceberg.sql": not_null_model("incremental", ROW_Q),
            "nn_value_iceberg.sql": not_null_model("incremental", VALUE),
            "nn_table_row_q_iceberg.sql": not_null_model("table", ROW_Q),
            "schema.yml": enforced_schema(*NN_MODELS),
        }

    def check(self, project, results, name: str, runs: int) -> None:
        rel = table(project, name)
        response = results[name].adapter_response
        if "row_q" in name:
            assert response["rows_discarded"] == 4, (name, response)
            assert [r[0] for r in rows_of(project, rel)] == KEPT_BY_ROW
            rows = quarantined(project, name)
            assert len({r[2] for r in rows}) == runs, rows
            assert [r[0] for r in rows] == [4, 5, 6, 7] * runs, rows
        else:
            assert (response["rows_discarded"], response["values_discarded"]) == (2, 2), response
            assert rows_of(project, rel, "id, qty, address.zip") == [
                (3, 7, "0150"),
                (4, None, "0150"),
                (6, 2, None),
            ]
        # the explicit-schema build: NOT NULL is in the Iceberg table's schema
        assert not_null_of(project, rel) == {"id": False}, name
        assert not leftovers(project, name), name

    def test_first_build_and_full_refresh(self, project):
        results = by_name(run_dbt(["run"]))
        for name in NN_MODELS:
            self.check(project, results, name, 1)
        entry = report_of(project)["model.test.nn_row_q_iceberg"]
        assert (entry["rows_discarded"], entry["quarantined"]) == (4, 4), entry
        results = by_name(run_dbt(["run", "--full-refresh", "--select", "nn_row_q_iceberg"]))
        self.check(project, results, "nn_row_q_iceberg", 2)


class TestIcebergNotNullBuildEvaluatesOnce(CreateProject):
    pytestmark = pytest.mark.profile("session")

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "nn_eval_iceberg.sql": not_null_model("incremental", ROW_Q, v1=PROBE),
            "schema.yml": enforced_schema("nn_eval_iceberg"),
        }

    def test_model_query_runs_once(self, project, evaluations):
        name = "nn_eval_iceberg"
        for args in (["run"], ["run", "--full-refresh"]):
            before = evaluations()
            results = run_dbt(args)
            assert evaluations() - before == ROWS, (args, evaluations() - before)
            assert results[0].adapter_response["rows_discarded"] == ROWS // 10
        assert len(rows_of(project, table(project, name))) == ROWS - ROWS // 10
        assert len(quarantined(project, name)) == 2 * (ROWS // 10)
