"""The model's query runs once per run, for every run shape that adds a column or discards
values, on every format (a Python UDF counts its calls: tests/functional/evolution/test_run_path.py
`evaluations`). Complements test_run_path.TestOneEvaluation (Delta merge/append, discard_row)."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.evolution.test_run_path import ROWS, evaluations, probe_model  # noqa: F401

PROBED = "cast(probe_eval(id) as bigint) as id"
BAD_N = "if(id % 10 = 0, 'bad', cast(id as string)) as n"


def evolve(fmt: str, extra: str = "", setting: str = "schema_evolution={}") -> str:
    return probe_model(
        f"file_format='{fmt}', {setting}{extra}",
        "select id from range(1)",
        f"select {PROBED}, 'x' as note from range({ROWS})",
    )


def discard_value(fmt: str, extra: str = "") -> str:
    return probe_model(
        f"file_format='{fmt}', schema_contract={{'data_type': 'discard_value'}}{extra}",
        "select id, cast(id as bigint) as n from range(1)",
        f"select {PROBED}, {BAD_N} from range({ROWS})",
    )


MODELS = {
    "evolve_delta_merge": evolve("delta", ", unique_key='id'"),
    "evolve_delta_append": evolve("delta", ", incremental_strategy='append'"),
    "evolve_delta_default": evolve(
        "delta", ", unique_key='id'", "schema_evolution={'columns': {'note': {'default': \"'n'\"}}}"
    ),
    "evolve_contract_delta": evolve("delta", ", unique_key='id'", "schema_contract='evolve'"),
    "evolve_iceberg_merge": evolve("iceberg", ", unique_key='id'"),
    "evolve_iceberg_append": evolve("iceberg", ", incremental_strategy='append'"),
    "evolve_parquet_append": evolve("parquet", ", incremental_strategy='append'"),
    "discard_value_delta_append": discard_value("delta", ", incremental_strategy='append'"),
    "discard_value_delta_merge": discard_value("delta", ", unique_key='id'"),
    "discard_value_iceberg_merge": discard_value("iceberg", ", unique_key='id'"),
    "discard_value_parquet": discard_value("parquet", ", incremental_strategy='append'"),
    "discard_value_quarantine": discard_value(
        "delta", ", schema_contract={'data_type': 'discard_value', 'quarantine': true}"
    ).replace("schema_contract={'data_type': 'discard_value'}, ", "", 1),
    "plain_iceberg_merge": probe_model(
        "file_format='iceberg', unique_key='id'",
        "select id from range(1)",
        f"select {PROBED} from range({ROWS})",
    ),
    "evolve_delta_table": evolve("delta").replace("'incremental'", "'table'"),
    "evolve_iceberg_table": evolve("iceberg").replace("'incremental'", "'table'"),
    "columns_discard_value": probe_model(
        "file_format='delta', schema_contract={'columns': 'discard_value'}",
        "select id from range(1)",
        f"select {PROBED}, 'x' as note from range({ROWS})",
    ),
}


@pytest.mark.profile("session")  # counts in this process's SparkContext
class TestOneEvaluationEveryShape:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"{name}.sql": sql for name, sql in MODELS.items()}

    @pytest.mark.parametrize("name", list(MODELS))
    def test_model_query_runs_once(self, project, evaluations, name):  # noqa: F811
        run_dbt(["run", "--select", name])
        before = evaluations()
        run_dbt(["run", "--select", name, "--vars", "{v: 2}"])
        assert evaluations() - before == ROWS, (name, evaluations() - before)
