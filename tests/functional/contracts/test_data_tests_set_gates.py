"""The set tests as gates on incremental runs (`schema_contract: {data_tests: ...}`, issue 42).

`unique(id)` on an append turns away every row of an id the run's rows hold twice and every row
whose id the table holds already; on a merge on `id` only the run's own duplicates (the merge
updates the table's row). `relationships(customer_id)` turns away a row whose customer the
parent `customers` lacks; a NULL customer passes, as in dbt's test. Each model's v1 creates the
table (the gates bind there too); v2 brings:

    (2, 2)     id 2: the table holds it (v1)
    (3, 1)     id 3 twice in the run
    (3, 3)
    (4, 7)     customer 7: not in `customers`
    (5, NULL)  a NULL customer passes relationships
    (NULL, 1)  a NULL id passes unique
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.contracts.test_contract_matrix import rel
from tests.functional.contracts.test_data_tests_gates import per_test, quarantined, reasons
from tests.functional.evolution.test_evolution_matrix import rows_of
from tests.functional.probes import ROWS, evaluation_probes, versioned_model

COLUMNS = "as t(id, customer_id)"
V1 = f"select * from values (1, 1), (2, 9) {COLUMNS}"
V2 = (
    "select * from values (2, 2), (3, 1), (3, 3), (4, 7), (5, cast(null as int)), "
    f"(cast(null as int), 1) {COLUMNS}"
)
# v3: a run whose query fails on its last row (after the gates' rows are known)
V3 = (
    "select id, customer_id from values (6, 1), (1, 1), (100, 1) "
    f"{COLUMNS} where assert_true(id < 100) is null"
)
ROW_Q = "{'data_tests': 'discard_row', 'quarantine': true}"
UNIQUE = "        data_tests:\n          - unique\n"
RELATED = (
    "        data_tests:\n          - relationships:\n"
    "              to: ref('customers')\n              field: id\n"
)


# dbt orders a model after what it refs, not after its tests' parents: the gate reads the
# parent when the model loads, so the model names it (docs/contracts.md)
DEPENDS = "-- depends_on: {{ ref('customers') }}\n"


def model(fmt: str, strategy: str, v3: bool = False) -> str:
    key = ", unique_key='id'" if strategy == "merge" else ""
    config = (
        f"materialized='incremental', file_format='{fmt}', incremental_strategy='{strategy}'"
        f"{key}, schema_contract={ROW_Q}"
    )
    sql = versioned_model(config, V1, V2)
    if v3:
        sql = sql.replace("{% else %}", "{% elif var('v') == 3 %}\n" + V3 + "\n{% else %}")
    return sql


def column_tests(name: str, column: str, tests: str) -> str:
    return f"  - name: {name}\n    columns:\n      - name: {column}\n{tests}"


MODELS = {
    "uniq_append_delta": (model("delta", "append", v3=True), "id", UNIQUE),
    "uniq_append_iceberg": (model("iceberg", "append"), "id", UNIQUE),
    "uniq_append_parquet": (model("parquet", "append"), "id", UNIQUE),
    "uniq_merge_delta": (model("delta", "merge"), "id", UNIQUE),
    "uniq_merge_iceberg": (model("iceberg", "merge"), "id", UNIQUE),
    "rel_delta": (DEPENDS + model("delta", "append"), "customer_id", RELATED),
    "rel_iceberg": (DEPENDS + model("iceberg", "append"), "customer_id", RELATED),
    "rel_parquet": (DEPENDS + model("parquet", "append"), "customer_id", RELATED),
}


def table(project: Any, name: str) -> list[tuple[Any, ...]]:
    """The model's (id, customer_id) rows, NULLs first."""
    rows = rows_of(project, rel(project, name), "id, customer_id")
    return sorted(rows, key=lambda r: tuple((v is not None, v or 0) for v in r))


class TestSetTestsGateIncrementalRuns:
    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{name}.sql": sql for name, (sql, _, _) in MODELS.items()}
        files["customers.sql"] = (
            "{{ config(materialized='table') }}\nselect * from values (1), (2), (3) as t(id)"
        )
        props = "".join(column_tests(n, c, t) for n, (_, c, t) in MODELS.items())
        files["properties.yml"] = "version: 2\nmodels:\n" + props
        return files

    @pytest.fixture(scope="class")
    def outcome(self, project):
        first = run_dbt(["run"])
        second, log = run_dbt_and_capture(["run", "--vars", "{v: 2}"])
        report = Path(project.project_root) / "target" / "schema_changes.json"
        return {
            "first": {r.node.name: r for r in first},
            "second": {r.node.name: r for r in second},
            "log": log,
            "report": json.loads(report.read_text())["models"],
        }

    @pytest.mark.parametrize(
        "name", ["uniq_append_delta", "uniq_append_iceberg", "uniq_append_parquet"]
    )
    def test_unique_on_an_append_turns_away_the_tables_keys_and_the_runs_duplicates(
        self, project, outcome, name
    ):
        second = outcome["second"][name]
        assert str(second.status) == "success", second.message
        # id 2 (the table holds it), both rows of id 3
        assert second.adapter_response["rows_discarded"] == 3
        assert per_test(second.adapter_response) == {"unique(id)": ("discard_row", 3)}
        assert per_test(outcome["report"][f"model.test.{name}"]) == {
            "unique(id)": ("discard_row", 3)
        }
        # the row the table keeps for id 2 is v1's; a NULL id passes, as in dbt's test
        assert table(project, name) == [(None, 1), (1, 1), (2, 9), (4, 7), (5, None)]
        assert reasons(project, name) == {2: {"unique(id)"}, 3: {"unique(id)"}}
        assert quarantined(project, name) == 3

    @pytest.mark.parametrize("name", ["uniq_merge_delta", "uniq_merge_iceberg"])
    def test_unique_under_a_merge_on_the_key_turns_away_only_the_runs_duplicates(
        self, project, outcome, name
    ):
        second = outcome["second"][name]
        assert str(second.status) == "success", second.message
        assert second.adapter_response["rows_discarded"] == 2  # both rows of id 3
        assert per_test(second.adapter_response) == {"unique(id)": ("discard_row", 2)}
        # id 2 updated by the merge; a NULL id never matches: inserted
        assert table(project, name) == [
            (None, 1),
            (1, 1),
            (2, 2),
            (4, 7),
            (5, None),
        ]
        assert reasons(project, name) == {3: {"unique(id)"}}

    @pytest.mark.parametrize("name", ["rel_delta", "rel_iceberg", "rel_parquet"])
    def test_relationships_turns_away_keys_the_parent_lacks(self, project, outcome, name):
        first = outcome["first"][name].adapter_response  # the creating run: customer 9
        assert per_test(first) == {"relationships(customer_id)": ("discard_row", 1)}
        second = outcome["second"][name]
        assert str(second.status) == "success", second.message
        assert second.adapter_response["rows_discarded"] == 1  # customer 7
        assert per_test(second.adapter_response) == {
            "relationships(customer_id)": ("discard_row", 1)
        }
        # a NULL customer passes, as in dbt's test
        assert table(project, name) == [
            (None, 1),
            (1, 1),
            (2, 2),
            (3, 1),
            (3, 3),
            (5, None),
        ]
        assert reasons(project, name) == {
            2: {"relationships(customer_id)"},
            4: {"relationships(customer_id)"},
        }

    def test_the_plan_lists_the_set_gates(self, project, outcome):
        gates = outcome["report"]["model.test.rel_delta"]["contract"]["data_tests"]
        assert [g["reason"] for g in gates["gates"]] == ["relationships(customer_id)"]
        assert gates["checked_after_the_load"] == []
        assert (
            "rel_delta: data_tests discard_row gates the load: relationships(customer_id)"
            in (outcome["log"])
        )

    def test_a_failing_run_leaves_the_table_and_the_quarantine_as_they_were(self, project, outcome):
        name = "uniq_append_delta"
        before, kept = table(project, name), quarantined(project, name)
        (result,) = run_dbt(["run", "--select", name, "--vars", "{v: 3}"], expect_pass=False)
        assert str(result.status) == "error"
        assert table(project, name) == before and quarantined(project, name) == kept

    def test_a_gated_build_passes_its_tests(self, project, outcome):
        """`dbt build`: each model loads v2 again (on an append, ids 4, 5 are the table's now
        too), then its tests run on the table and pass."""
        selected = " ".join(MODELS)
        results = run_dbt(["build", "--select", selected, "--vars", "{v: 2}"])
        by_name = {r.node.name: r for r in results}
        assert by_name["uniq_append_iceberg"].adapter_response["rows_discarded"] == 5
        tests = [r for r in results if r.node.resource_type == "test"]
        assert len(tests) == len(MODELS) and {str(r.status) for r in tests} == {"pass"}


PROBED = (
    "select cast(probe_named(id, 'set_probe') as bigint) % {mod} as id, "
    "cast(id % 7 as int) as customer_id from range({rows})"
)


@pytest.mark.profile("session")  # counts in this process's SparkContext
class TestSetGatesRunTheQueryOnce:
    """`unique` against the table and `relationships` against its parent: joins Spark runs in
    the one evaluation of the model's query."""

    @pytest.fixture(scope="class")
    def models(self):
        config = (
            f"materialized='incremental', incremental_strategy='append', schema_contract={ROW_Q}"
        )
        return {
            "set_probe.sql": DEPENDS
            + versioned_model(
                config, PROBED.format(mod=10, rows=10), PROBED.format(mod=150, rows=ROWS)
            ),
            "customers.sql": "{{ config(materialized='table') }}\n"
            "select * from values (0), (1), (2), (3), (4), (5) as t(id)",
            "properties.yml": "version: 2\nmodels:\n"
            + column_tests("set_probe", "id", UNIQUE)
            + "      - name: customer_id\n"
            + RELATED,
        }

    def test_one_evaluation(self, project):
        with evaluation_probes(["set_probe"]) as count:
            run_dbt(["run"])
            before = count("set_probe")
            results = {r.node.name: r for r in run_dbt(["run", "--vars", "{v: 2}"])}
            evaluations = count("set_probe") - before
        assert evaluations == ROWS
        # v2: ids 0..149, 0..49 twice (ROWS 200); the table holds 0..9 but for customer 6's
        ran = [(i % 150, i % 7) for i in range(ROWS)]
        table = {i for i in range(10) if i % 7 != 6}
        twice = {i for i in range(150) if sum(1 for r in ran if r[0] == i) > 1}
        unique = sum(1 for i, _ in ran if i in twice or i in table)
        related = sum(1 for _, c in ran if c == 6)
        both = sum(1 for i, c in ran if (i in twice or i in table) and c == 6)
        response = results["set_probe"].adapter_response
        assert per_test(response) == {
            "unique(id)": ("discard_row", unique),
            "relationships(customer_id)": ("discard_row", related),
        }
        assert response["rows_discarded"] == unique + related - both
