"""The model's query runs once per run, for every run shape that adds a column or discards
values, on every format: a Python UDF counts its calls per model, all the models built in one
`dbt run` and changed in a second (threads: 4 from conftest). Complements
test_run_path.TestOneEvaluation (Delta merge/append, discard_row, one model per run)."""

from __future__ import annotations

from typing import Any, Dict, Iterator

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.spark_contracts import session as embedded
from tests.functional.evolution.test_run_path import ROWS, probe_model

PROBED = "cast(probe_named(id, '{name}') as bigint) as id"
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
        return {f"{name}.sql": sql.replace("{name}", name) for name, sql in MODELS.items()}

    @pytest.fixture(scope="class")
    def runs(self, project: Any) -> Iterator[Dict[str, Any]]:
        """Every dbt thread's session gets `probe_named(x, model)`, which counts its calls per
        model and returns x; yields each model's status and evaluations in the changing run."""
        counters: Dict[str, Any] = {}  # an accumulator per model, of the shared SparkContext
        original = embedded.thread_session

        def with_probe(config: Any) -> Any:
            session = original(config)
            if not counters:
                counters.update({n: session.sparkContext.accumulator(0) for n in MODELS})
            accumulators = dict(counters)

            def probe(x: int, name: str) -> int:
                accumulators[name].add(1)
                return x

            session.udf.register("probe_named", probe, "bigint")
            return session

        def counted() -> Dict[str, int]:
            return {n: counters[n].value if counters else 0 for n in MODELS}

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(embedded, "thread_session", with_probe)
            first = run_dbt(["run"], expect_pass=None)  # type: ignore[arg-type]
            before = counted()
            changed = run_dbt(["run", "--vars", "{v: 2}"], expect_pass=None)  # type: ignore[arg-type]
            after = counted()
        yield {
            "first": {r.node.name: str(r.status) for r in first},
            "changed": {r.node.name: str(r.status) for r in changed},
            "evaluations": {n: after[n] - before[n] for n in MODELS},
        }

    @pytest.mark.parametrize("name", list(MODELS))
    def test_model_query_runs_once(self, runs: Dict[str, Any], name: str) -> None:
        assert (runs["first"][name], runs["changed"][name]) == ("success", "success"), name
        assert runs["evaluations"][name] == ROWS, (name, runs["evaluations"])
