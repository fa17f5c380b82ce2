"""The run that CREATES the table under a `pydantic_contract` counts and quarantines what it
discards, as every later run does (it is planned as a run: core/materialization/create_run.py): the incremental
model's first build, the table materialization's build and `--full-refresh`, under
`discard_row` and `discard_value`, with and without `quarantine: true`, on Delta and Iceberg.
The model's query is evaluated once; a failed creating run leaves no table (or the old one), no
quarantine rows of its own and no pending table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.tests.fixtures.project import write_project_files
from dbt.tests.util import run_dbt

from tests.functional.contracts.test_pydantic_contract import MIXED_V2, ORDERS_PY, PROBE, by_name
from tests.functional.evolution.test_evolution_matrix import rows_of
from tests.functional.probes import ROWS, versioned_model

PACKAGE = "create_contracts"  # its own name: Python imports a module once per process
FORMATS = ("delta", "iceberg")

ITEMS_PY = """
from typing import Optional

from pydantic import BaseModel, Field


class Item(BaseModel):
    id: int = Field(ge=1)
    qty: Optional[int] = Field(default=None, le=100)
"""


def model(fmt: str, contract: str, materialized: str = "incremental", v1: str = MIXED_V2) -> str:
    settings = (
        f"materialized='{materialized}', file_format='{fmt}', "
        f"pydantic_contract='{PACKAGE}.orders:Order', schema_contract={{{contract}}}"
    )
    return versioned_model(settings, v1, v1)


ROW_Q = "'data_type': 'discard_row', 'quarantine': true"
ROW = "'data_type': 'discard_row'"
VALUE_Q = "'data_type': 'discard_value', 'quarantine': true"
VALUE = "'data_type': 'discard_value'"

MODELS = {
    **{
        f"{kind}_{fmt}.sql": model(fmt, contract)
        for fmt in FORMATS
        for kind, contract in (
            ("row_q", ROW_Q),
            ("row", ROW),
            ("value_q", VALUE_Q),
            ("value", VALUE),
        )
    },
    **{f"table_row_q_{fmt}.sql": model(fmt, ROW_Q, "table") for fmt in FORMATS},
    **{f"table_value_{fmt}.sql": model(fmt, VALUE, "table") for fmt in FORMATS},
}

# MIXED_V2: 3 valid; 4 qty above le=100 (Optional); 5 status not a literal (required); 6
# address.zip breaks its pattern (address Optional); 7 a tag longer than 8 (tags required)
KEPT_BY_ROW = [3]
KEPT_BY_VALUE = [3, 4, 6]  # 4's qty and 6's address nulled; 5 and 7 dropped


def table(project, name: str) -> str:
    prefix = "iceberg." if name.endswith("iceberg") else ""
    return f"{prefix}{project.test_schema}.{name}"


def quarantined(project, name: str) -> list[tuple]:
    return [
        tuple(r)
        for r in project.run_sql(
            f"select id, _contract_reason, _dbt_run_id from {table(project, name)}__quarantine "
            "order by _dbt_run_id, id",
            fetch="all",
        )
    ]


def leftovers(project, name: str) -> list[str]:
    """Tables a run of `name` left beside it: its pending tables and stages."""
    schema = table(project, name).rsplit(".", 1)[0]
    rows = project.run_sql(f"show tables in {schema} like '{name}__*'", fetch="all")
    return [r[1] for r in rows if "__pending_" in r[1] or "__dbt_stage_" in r[1]]


class CreateProject:
    @pytest.fixture(scope="class")
    def project_files(self, project_root, models):
        write_project_files(project_root, "models", models)
        write_project_files(
            project_root, PACKAGE, {"__init__.py": "", "orders.py": ORDERS_PY, "items.py": ITEMS_PY}
        )


class TestCreatingRunCountsAndQuarantines(CreateProject):
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    @pytest.fixture(scope="class")
    def first(self, project):
        results = by_name(run_dbt(["run"]))
        report = Path(project.project_root) / "target" / "schema_changes.json"
        return results, json.loads(report.read_text())["models"]

    def check_run(self, project, results, name: str) -> None:
        response = results[name].adapter_response
        kind = name.removeprefix("table_").rsplit("_", 1)[0]
        if kind.startswith("row"):
            assert response["rows_discarded"] == 4, (name, response)
            assert [r[0] for r in rows_of(project, table(project, name))] == KEPT_BY_ROW
        else:
            assert (response["rows_discarded"], response["values_discarded"]) == (2, 2), response
            rows = rows_of(project, table(project, name), "id, qty, address.zip")
            assert rows == [(3, 7, "0150"), (4, None, "0150"), (6, 2, None)], (name, rows)
        assert not leftovers(project, name), leftovers(project, name)

    def check_quarantine(self, project, name: str, runs: int) -> None:
        rows = quarantined(project, name)
        kind = name.removeprefix("table_").rsplit("_", 1)[0]
        ids = [4, 5, 6, 7] if kind == "row_q" else [5, 7]
        assert len({r[2] for r in rows}) == runs, rows
        assert [r[0] for r in rows] == ids * runs, rows
        reasons = {r[0]: r[1] for r in rows}
        assert "`status`" in reasons[5] and "one of" in reasons[5], reasons
        assert "tags" in reasons[7] and "element: max_length=8" in reasons[7], reasons
        if kind == "row_q":
            assert "`qty`" in reasons[4] and "le=100" in reasons[4], reasons
            assert "address" in reasons[6] and "zip: pattern" in reasons[6], reasons

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_first_build(self, project, first, fmt):
        results, report = first
        for kind in ("row_q", "row", "value_q", "value"):
            self.check_run(project, results, f"{kind}_{fmt}")
        # target/schema_changes.json records the creating run's discards too
        entry = report[f"model.test.row_q_{fmt}"]
        assert (entry["rows_discarded"], entry["quarantined"], entry["loaded"]) == (4, 4, True)
        entry = report[f"model.test.value_{fmt}"]
        assert (entry["rows_discarded"], entry["values_discarded"]) == (2, 2), entry
        for kind in ("row", "value"):
            assert (
                project.adapter.get_relation(
                    "iceberg" if fmt == "iceberg" else None,
                    project.test_schema,
                    f"{kind}_{fmt}__quarantine",
                )
                is None
            )
        self.check_quarantine(project, f"row_q_{fmt}", 1)
        self.check_quarantine(project, f"value_q_{fmt}", 1)

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_table_materialization(self, project, first, fmt):
        results, _ = first
        self.check_run(project, results, f"table_row_q_{fmt}")
        self.check_run(project, results, f"table_value_{fmt}")
        self.check_quarantine(project, f"table_row_q_{fmt}", 1)

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_full_refresh(self, project, first, fmt):
        names = [f"row_q_{fmt}", f"value_{fmt}", f"table_row_q_{fmt}"]
        results = by_name(run_dbt(["run", "--full-refresh", "--select", *names]))
        for name in names:
            self.check_run(project, results, name)
        # the rebuild's discarded rows join the first build's, under the rebuild's run id
        self.check_quarantine(project, f"row_q_{fmt}", 2)
        self.check_quarantine(project, f"table_row_q_{fmt}", 2)


# a kept row (3: qty 7) breaks the table's CHECK constraint: the CREATE itself fails
FAILING = versioned_model(
    f"materialized='incremental', on_schema_change='fail', file_format='delta', "
    f"pydantic_contract='{PACKAGE}.items:Item', "
    "schema_contract={'data_type': 'discard_row', 'quarantine': true}",
    "select cast(id as bigint) as id, cast(qty as bigint) as qty "
    "from values (1, 1), (2, 200) as t(id, qty)",
    "select cast(id as bigint) as id, cast(qty as bigint) as qty "
    "from values (3, 7), (4, 200) as t(id, qty)",
)
FAILING_SCHEMA = """
version: 2
models:
  - name: failing
    config:
      contract: {enforced: true}
    columns:
      - name: id
        data_type: bigint
      - name: qty
        data_type: bigint
        constraints:
          - type: check
            name: small_qty
            expression: qty < 5
"""


class TestFailedCreatingRunLeavesNothing(CreateProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"failing.sql": FAILING, "schema.yml": FAILING_SCHEMA}

    def test_all_or_nothing(self, project):
        name = "failing"
        results = run_dbt(["run", "--vars", "{v: 2}"], expect_pass=False)
        assert str(results[0].status) == "error", results[0].message
        assert project.adapter.get_relation(None, project.test_schema, name) is None
        if project.adapter.get_relation(None, project.test_schema, f"{name}__quarantine"):
            assert quarantined(project, name) == []
        assert not leftovers(project, name), leftovers(project, name)

        results = run_dbt(["run"])
        assert results[0].adapter_response["rows_discarded"] == 1
        assert [r[0] for r in quarantined(project, name)] == [2]

        # a failed --full-refresh keeps the old table and adds no quarantine rows
        results = run_dbt(["run", "--full-refresh", "--vars", "{v: 2}"], expect_pass=False)
        assert str(results[0].status) == "error", results[0].message
        assert rows_of(project, table(project, name)) == [(1, 1)]
        assert [r[0] for r in quarantined(project, name)] == [2]
        assert not leftovers(project, name), leftovers(project, name)


class TestCreatingRunEvaluatesOnce(CreateProject):
    pytestmark = pytest.mark.profile("session")

    @pytest.fixture(scope="class")
    def models(self):
        return {
            f"eval_{kind}_{fmt}.sql": model(fmt, contract, v1=PROBE)
            for fmt in FORMATS
            for kind, contract in (("row_q", ROW_Q), ("value", VALUE))
        }

    @pytest.mark.parametrize("fmt", FORMATS)
    @pytest.mark.parametrize("kind", ["row_q", "value"])
    def test_model_query_runs_once(self, project, evaluations, kind, fmt):
        name = f"eval_{kind}_{fmt}"
        for args in (["run"], ["run", "--full-refresh"]):
            before = evaluations()
            results = run_dbt([*args, "--select", name])
            assert evaluations() - before == ROWS, (name, args, evaluations() - before)
            # every tenth row's status is not a literal (required): dropped in both modes
            assert results[0].adapter_response["rows_discarded"] == ROWS // 10
            assert len(rows_of(project, table(project, name))) == ROWS - ROWS // 10
        if kind == "row_q":
            assert len(quarantined(project, name)) == 2 * (ROWS // 10)
