"""dbt's own data tests as gates on the load (`schema_contract: {data_tests: <mode>}`, issue 42).

Each model has `not_null(name)` and `accepted_values(status)` in its properties. v1 builds the
table (the creating run: the gates bind there too); v2 brings one good row and three failing
ones: id 3 (name NULL), id 4 (status 'z'), id 5 (both).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from dbt.exceptions import ParsingError
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt.adapters.spark_contracts.core.contracts.set_tests import NARROWED_MERGE
from tests.functional.contracts.test_contract_matrix import exists, rel
from tests.functional.evolution.test_evolution_matrix import rows_of
from tests.functional.probes import ROWS, evaluation_probes, versioned_model

COLUMNS = "as t(id, name, status)"
V1 = f"select * from values (1, 'x', 'a'), (0, cast(null as string), 'a') {COLUMNS}"
V1_GOOD = f"select * from values (1, 'x', 'a') {COLUMNS}"
V2 = (
    "select * from values (2, 'x', 'a'), (3, cast(null as string), 'a'), (4, 'y', 'z'), "
    f"(5, cast(null as string), 'z') {COLUMNS}"
)


def model(
    contract: str, fmt: str = "delta", v1: str = V1, kind: str = "incremental", how: str = ""
) -> str:
    extra = f", incremental_strategy='{how or 'append'}'" if kind == "incremental" else ""
    if how == "merge":
        extra += ", unique_key='id'"
    setting = f", schema_contract={contract}" if contract else ""
    return versioned_model(f"materialized='{kind}', file_format='{fmt}'{extra}{setting}", v1, V2)


NOT_NULL = "- not_null"
ACCEPTED = "- accepted_values:\n              values: ['a', 'b']"


def properties(name: str, name_tests: str = NOT_NULL, status_tests: str = ACCEPTED) -> str:
    return (
        f"  - name: {name}\n"
        "    columns:\n"
        "      - name: name\n"
        "        data_tests:\n"
        f"          {name_tests}\n"
        "      - name: status\n"
        "        data_tests:\n"
        f"          {status_tests}\n"
    )


ROW_Q = "{'data_tests': 'discard_row', 'quarantine': true}"
# `unique(id)` gates a table model (its load writes the whole table): ids 1 and 3 twice each
UNIQUE_V1 = f"select * from values (1, 'x', 'a'), (1, 'y', 'a'), (2, 'x', 'a') {COLUMNS}"
UNIQUE_V2 = (
    "select * from values (3, 'x', 'a'), (3, 'y', 'a'), (4, 'x', 'a'), "
    f"(cast(null as int), 'n', 'a') {COLUMNS}"
)
UNIQUE_MERGE_V1 = f"select * from values (1, 'x', 'a'), (2, 'y', 'a'), (7, 'v', 'a') {COLUMNS}"
UNIQUE_MERGE_V2 = (
    "select * from values (1, 'x', 'a'), (2, 'z', 'a'), (3, 'v', 'a'), (4, 'w', 'a'), "
    f"(5, 'w', 'a'), (6, cast(null as string), 'a') {COLUMNS}"
)
UNIQUE_PROPERTIES = (
    "  - name: gate_unique_table_delta\n    columns:\n      - name: id\n"
    "        data_tests:\n          - unique\n"
)
MODELS = {
    "gate_row_delta": (model(ROW_Q), properties("gate_row_delta")),
    "gate_row_iceberg": (model(ROW_Q, "iceberg"), properties("gate_row_iceberg")),
    "gate_row_parquet": (model(ROW_Q, "parquet"), properties("gate_row_parquet")),
    **{
        f"gate_table_{fmt}": (model(ROW_Q, fmt, kind="table"), properties(f"gate_table_{fmt}"))
        for fmt in ("delta", "iceberg", "parquet")
    },
    # an incremental model rebuilt by --full-refresh (test_full_refresh_…)
    "gate_refresh_delta": (model(ROW_Q), properties("gate_refresh_delta")),
    # insert_overwrite on an unpartitioned table: each run's kept rows replace the table's
    "gate_overwrite_parquet": (
        model(ROW_Q, "parquet", how="insert_overwrite"),
        properties("gate_overwrite_parquet"),
    ),
    "gate_value_delta": (
        model("{'data_tests': 'discard_value'}"),
        properties("gate_value_delta"),
    ),
    "gate_value_iceberg": (
        model("{'data_tests': 'discard_value'}", "iceberg"),
        properties("gate_value_iceberg"),
    ),
    "gate_value_parquet": (
        model("{'data_tests': 'discard_value'}", "parquet"),
        properties("gate_value_parquet"),
    ),
    # freeze binds on the creating run too: v1's NULL name creates nothing
    "gate_freeze_create_delta": (
        model("{'data_tests': 'freeze'}"),
        properties("gate_freeze_create_delta"),
    ),
    **{
        f"gate_freeze_{fmt}": (
            model("{'data_tests': 'freeze'}", fmt, v1=V1_GOOD),
            properties(f"gate_freeze_{fmt}", name_tests="- unique"),
        )
        for fmt in ("delta", "iceberg", "parquet")
    },
    # a merge on id; `relationships` to the model itself is checked after the load
    "gate_where_delta": (
        model("{'data_tests': 'discard_row'}", how="merge"),
        properties(
            "gate_where_delta",
            '- not_null:\n              config:\n                where: "id > 3"',
            "- relationships:\n              to: ref('gate_where_delta')\n              field: id",
        ),
    ),
    # a merge on id gated by unique(name): the load's own duplicates (w twice) go, and a
    # name the table holds on another id (v, id 7's); one the table holds on the row's own
    # id (x: the merge updates that row) or a NULL one stays
    **{
        f"gate_unique_merge_{fmt}": (
            versioned_model(
                f"materialized='incremental', file_format='{fmt}', incremental_strategy='merge', "
                f"unique_key='id', schema_contract={ROW_Q}",
                UNIQUE_MERGE_V1,
                UNIQUE_MERGE_V2,
            ),
            properties(f"gate_unique_merge_{fmt}", name_tests="- unique"),
        )
        for fmt in ("delta", "iceberg")
    },
    # the same merge narrowed by incremental_predicates: id 1's row is outside the predicate,
    # so v2's id 1 is inserted beside it (x twice), which a gate could not know before the
    # load: unique(name) is checked after the load, not gated
    "gate_unique_narrowed_delta": (
        versioned_model(
            "materialized='incremental', file_format='delta', incremental_strategy='merge', "
            f"unique_key='id', incremental_predicates=['DBT_INTERNAL_DEST.id > 1'], "
            f"schema_contract={ROW_Q}",
            UNIQUE_MERGE_V1,
            UNIQUE_MERGE_V2,
        ),
        properties("gate_unique_narrowed_delta", name_tests="- unique"),
    ),
    "gate_opt_out_delta": (
        model("{'data_tests': 'discard_row'}"),
        properties(
            "gate_opt_out_delta",
            "- not_null:\n              config:\n                meta: {gate: false}",
        ),
    ),
    "gate_unique_table_delta": (
        versioned_model(
            f"materialized='table', file_format='delta', schema_contract={ROW_Q}",
            UNIQUE_V1,
            UNIQUE_V2,
        ),
        UNIQUE_PROPERTIES,
    ),
    # the shorthand sets every entity but data_tests: dbt's tests run after the load
    "shorthand_delta": (model("'freeze'"), properties("shorthand_delta")),
}
GATED_BUILD = (
    "gate_row_delta",
    "gate_value_delta",
    "gate_table_delta",
    "gate_unique_table_delta",
    "gate_unique_merge_delta",
)


def reasons(project: Any, name: str) -> Dict[int, set[str]]:
    rows = project.run_sql(
        f"select id, _contract_reason from {rel(project, name)}__quarantine", fetch="all"
    )
    return {int(r[0]): set(str(r[1]).split("; ")) for r in rows}


def quarantined(project: Any, name: str) -> int:
    """The rows in the model's quarantine."""
    sql = f"select count(*) from {rel(project, name)}__quarantine"
    return int(project.run_sql(sql, fetch="one")[0])


def per_test(counts: Any) -> Dict[str, tuple[str, int]]:
    """A run's counts per data test (`adapter_response` or its plan file entry)."""
    return {c["reason"]: (c["action"], c["rows"]) for c in counts["data_tests"] or ()}


class TestDataTestsGateTheLoad:
    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{name}.sql": sql for name, (sql, _) in MODELS.items()}
        props = "".join(p for _, p in MODELS.values())
        files["properties.yml"] = "version: 2\nmodels:\n" + props
        return files

    @pytest.fixture(scope="class")
    def outcome(self, project):
        # a mapping naming only `tables` lets the shorthand `freeze` model be created
        first, log1 = run_dbt_and_capture(
            ["run", "--vars", "{schema_contract: {tables: evolve}}"],
            expect_pass=None,  # type: ignore[arg-type]
        )
        failed = {r.node.name: r.message for r in first if str(r.status) != "success"}
        assert set(failed) == {"gate_freeze_create_delta"}, failed
        second, log2 = run_dbt_and_capture(["run", "--vars", "{v: 2}"], expect_pass=False)
        target = Path(project.project_root) / "target"
        (Path(project.project_root) / "models" / "gate_freeze_create_delta.sql").unlink()
        written = json.loads((target / "run_results.json").read_text())["results"]
        return {
            "first": {r.node.name: r for r in first},
            "second": {r.node.name: r for r in second},
            "log": log1 + log2,
            "report": json.loads((target / "schema_changes.json").read_text())["models"],
            # the second run's run_results.json as dbt wrote it, by model name
            "run_results": {r["unique_id"].split(".")[-1]: r for r in written},
        }

    @pytest.mark.parametrize(
        "name",
        [
            "gate_row_delta",
            "gate_row_iceberg",
            "gate_row_parquet",
            "gate_table_delta",
            "gate_table_iceberg",
            "gate_table_parquet",
            "gate_overwrite_parquet",
        ],
    )
    def test_discard_row_quarantines_with_the_test_name(self, project, outcome, name):
        first = outcome["first"][name].adapter_response
        assert first["rows_discarded"] == 1  # the creating run
        assert per_test(first) == {
            "not_null(name)": ("discard_row", 1),
            "accepted_values(status)": ("discard_row", 0),
        }
        second = outcome["second"][name]
        assert str(second.status) == "success", second.message
        assert second.adapter_response["rows_discarded"] == 3
        # a row two tests fail (id 5) counts in both
        counts = {
            "not_null(name)": ("discard_row", 2),
            "accepted_values(status)": ("discard_row", 2),
        }
        assert per_test(second.adapter_response) == counts
        assert per_test(outcome["report"][f"model.test.{name}"]) == counts
        assert per_test(outcome["run_results"][name]["adapter_response"]) == counts
        # a table, or an overwrite of an unpartitioned one, keeps only this run's rows
        kept = [2] if "table" in name or "overwrite" in name else [1, 2]
        assert [r[0] for r in rows_of(project, rel(project, name), "id")] == kept
        assert reasons(project, name) == {
            0: {"not_null(name)"},
            3: {"not_null(name)"},
            4: {"accepted_values(status)"},
            5: {"not_null(name)", "accepted_values(status)"},
        }

    @pytest.mark.parametrize(
        "name", ["gate_value_delta", "gate_value_iceberg", "gate_value_parquet"]
    )
    def test_discard_value_nulls_the_value_a_null_passes(self, project, outcome, name):
        second = outcome["second"][name]
        assert str(second.status) == "success", second.message
        assert second.adapter_response["rows_discarded"] == 2  # ids 3, 5: NULL fails not_null
        assert second.adapter_response["values_discarded"] == 1  # id 4's status
        # id 5's status fails too, but its row is dropped: no value of it is loaded
        assert per_test(second.adapter_response) == {
            "not_null(name)": ("discard_row", 2),
            "accepted_values(status)": ("discard_value", 1),
        }
        assert rows_of(project, rel(project, name)) == [
            (1, "x", "a"),
            (2, "x", "a"),
            (4, "y", None),
        ]

    def test_unique_gates_a_table_model_and_its_creating_run(self, project, outcome):
        name = "gate_unique_table_delta"
        first = outcome["first"][name].adapter_response
        assert per_test(first) == {"unique(id)": ("discard_row", 2)}
        second = outcome["second"][name].adapter_response
        assert second["rows_discarded"] == 2
        assert per_test(second) == {"unique(id)": ("discard_row", 2)}
        # a NULL id is no duplicate (dbt's test skips NULLs)
        assert {r[0] for r in rows_of(project, rel(project, name), "id")} == {4, None}
        assert reasons(project, name) == {1: {"unique(id)"}, 3: {"unique(id)"}}
        assert quarantined(project, name) == 4

    @pytest.mark.parametrize("fmt", ["delta", "iceberg", "parquet"])
    def test_freeze_fails_before_any_row_naming_test_column_values(self, project, outcome, fmt):
        name = f"gate_freeze_{fmt}"
        result = outcome["second"][name]
        assert str(result.status) == "error"
        message = result.message
        assert "schema_entity: data_tests" in message and "contract_mode: freeze" in message
        assert "column: status" in message
        assert "accepted_values(status)" in message and "'z'" in message
        # its failing rows, counted in the pass that staged the output (ids 4 and 5)
        assert "2 rows fail the data test accepted_values(status)" in message
        assert rows_of(project, rel(project, name)) == [(1, "x", "a")]
        violation = outcome["report"][f"model.test.{name}"]["violation"]
        assert violation["schema_entity"] == "data_tests"
        assert violation["offending_values"] == ["z"] and violation["failing_rows"] == 2

    def test_freeze_on_the_creating_run_creates_nothing(self, project, outcome):
        result = outcome["first"]["gate_freeze_create_delta"]
        assert str(result.status) == "error"
        assert "schema_entity: data_tests" in result.message
        assert "not_null(name)" in result.message and "column: name" in result.message
        assert not exists(project, "gate_freeze_create_delta")

    def test_where_narrows_the_gate(self, project, outcome):
        # the creating run: v1's id 0 (name NULL, id <= 3) is kept
        first = outcome["first"]["gate_where_delta"].adapter_response
        assert per_test(first) == {"not_null(name)": ("discard_row", 0)}
        # not_null(name) where id > 3: id 3 (name NULL, id <= 3) is kept, id 5 turned away
        ids = [r[0] for r in rows_of(project, rel(project, "gate_where_delta"), "id")]
        assert ids == [0, 1, 2, 3, 4]
        assert outcome["second"]["gate_where_delta"].adapter_response["rows_discarded"] == 1

    @pytest.mark.parametrize("name", ["gate_unique_merge_delta", "gate_unique_merge_iceberg"])
    def test_unique_gates_a_merge_on_another_key(self, project, outcome, name):
        # the creating run writes the whole table: the gate binds there too (no duplicate)
        assert per_test(outcome["first"][name].adapter_response) == {
            "unique(name)": ("discard_row", 0),
            "accepted_values(status)": ("discard_row", 0),
        }
        second = outcome["second"][name]
        assert str(second.status) == "success", second.message
        assert per_test(second.adapter_response) == {
            "unique(name)": ("discard_row", 3),
            "accepted_values(status)": ("discard_row", 0),
        }
        assert rows_of(project, rel(project, name)) == [
            (1, "x", "a"),
            (2, "z", "a"),
            (6, None, "a"),
            (7, "v", "a"),
        ]
        assert reasons(project, name) == {i: {"unique(name)"} for i in (3, 4, 5)}
        results = run_dbt(["test", "--select", name])
        assert {str(r.status) for r in results} == {"pass"}

    def test_unique_is_checked_after_a_narrowed_merge(self, project, outcome):
        name = "gate_unique_narrowed_delta"
        second = outcome["second"][name]
        assert str(second.status) == "success", second.message
        # accepted_values still gates; unique(name) does not: its rows all load
        assert per_test(second.adapter_response) == {"accepted_values(status)": ("discard_row", 0)}
        assert rows_of(project, rel(project, name)) == [
            (1, "x", "a"),
            (1, "x", "a"),
            (2, "z", "a"),
            (3, "v", "a"),
            (4, "w", "a"),
            (5, "w", "a"),
            (6, None, "a"),
            (7, "v", "a"),
        ]
        (after,) = outcome["report"][f"model.test.{name}"]["contract"]["data_tests"][
            "checked_after_the_load"
        ]
        assert after["test"].startswith(f"test.test.unique_{name}_name")
        assert "the merge is narrowed (incremental_predicates" in after["why"]
        said = f"{name}: data test {after['test']} is checked after the load ({NARROWED_MERGE})"
        assert said in outcome["log"]
        # dbt's test, after the load, finds what the gate left to it: x, w and v twice
        results = run_dbt(["test", "--select", name], expect_pass=False)
        failed = {r.node.name for r in results if str(r.status) == "fail"}
        assert failed == {f"unique_{name}_name"}

    def test_opt_out_is_checked_after_the_load(self, project, outcome):
        # accepted_values gates (ids 4, 5); not_null opted out (id 0, 3 loaded)
        ids = [r[0] for r in rows_of(project, rel(project, "gate_opt_out_delta"), "id")]
        assert ids == [0, 1, 2, 3]
        assert "is checked after the load (opted out: meta gate false)" in outcome["log"]
        results = run_dbt(["test", "--select", "gate_opt_out_delta"], expect_pass=False)
        failed = {r.node.name for r in results if str(r.status) == "fail"}
        assert failed == {"not_null_gate_opt_out_delta_name"}

    def test_shorthand_keeps_dbts_tests_after_the_load(self, project, outcome):
        assert [r[0] for r in rows_of(project, rel(project, "shorthand_delta"), "id")] == [
            0,
            1,
            2,
            3,
            4,
            5,
        ]
        assert not outcome["second"]["shorthand_delta"].adapter_response.get("rows_discarded")
        results = run_dbt(["test", "--select", "shorthand_delta"], expect_pass=False)
        assert {str(r.status) for r in results} == {"fail"}

    def test_plan_file_lists_the_gates_and_the_tests_after_the_load(self, project, outcome):
        contract = outcome["report"]["model.test.gate_where_delta"]["contract"]
        gates = contract["data_tests"]
        assert gates["mode"] == "discard_row"
        assert [g["reason"] for g in gates["gates"]] == ["not_null(name)"]
        (after,) = gates["checked_after_the_load"]
        assert after["test"].startswith("test.test.relationships_gate_where_delta_status")
        assert "the model itself" in after["why"]
        assert (
            "gate_where_delta: data_tests discard_row gates the load: not_null(name)"
            in (outcome["log"])
        )

    def test_a_gated_build_passes_its_tests(self, project, outcome):
        """`dbt build`: each gated model loads v2 again, then its tests run on the table."""
        selected = " ".join(GATED_BUILD)
        results = run_dbt(["build", "--select", selected, "--vars", "{v: 2}"])
        tests = [r for r in results if r.node.resource_type == "test"]
        assert len(tests) == 9 and {str(r.status) for r in tests} == {"pass"}

    def test_full_refresh_of_a_table_model_still_gates(self, project, outcome):
        """A table model under `--full-refresh` rebuilds without checking `schema_contract`
        against the table it replaces, but its gates still bind: counted per test, the
        failing rows quarantined, the kept rows alone in the rebuilt table."""
        names = ("gate_table_delta", "gate_unique_table_delta", "gate_refresh_delta")
        before = {name: quarantined(project, name) for name in names}
        results = {
            r.node.name: r
            for r in run_dbt(["run", "--full-refresh", "--select", *names, "--vars", "{v: 2}"])
        }
        table = results["gate_table_delta"].adapter_response
        assert table["rows_discarded"] == 3, table
        assert per_test(table) == {
            "not_null(name)": ("discard_row", 2),
            "accepted_values(status)": ("discard_row", 2),
        }
        assert [r[0] for r in rows_of(project, rel(project, "gate_table_delta"), "id")] == [2]
        unique = results["gate_unique_table_delta"].adapter_response
        assert per_test(unique) == {"unique(id)": ("discard_row", 2)}, unique
        ids = {r[0] for r in rows_of(project, rel(project, "gate_unique_table_delta"), "id")}
        assert ids == {4, None}
        # an incremental model's full refresh: rebuilt from this run's kept rows alone
        refresh = results["gate_refresh_delta"].adapter_response
        assert per_test(refresh) == per_test(table), refresh
        assert [r[0] for r in rows_of(project, rel(project, "gate_refresh_delta"), "id")] == [2]
        assert {name: quarantined(project, name) - before[name] for name in names} == {
            "gate_table_delta": 3,
            "gate_unique_table_delta": 2,
            "gate_refresh_delta": 3,
        }


# a microbatch model gated by not_null(id): the ids 0, 5, 10 and 15 (one a day) are NULL; its
# unique(id) is a set test over a load that replaces part of the table: checked after the load
MICROBATCH_GATED = """
{{ config(materialized='incremental', incremental_strategy='microbatch', file_format='delta',
    event_time='event_time', batch_size='day', begin=modules.datetime.datetime(2020, 1, 1),
    schema_contract={'data_tests': 'discard_row', 'quarantine': true}) }}
select if(id % 5 = 0, cast(null as bigint), id) as id, event_time from {{ ref('events') }}
"""
MICROBATCH_PROPERTIES = """version: 2
models:
  - name: mb_gated
    columns:
      - name: id
        data_tests: [not_null, unique]
"""


class TestMicrobatchGates:
    """The gates bind in each microbatch batch: a batch's failing rows are discarded, counted
    and quarantined with the test's name; `unique` is checked after the load."""

    @pytest.fixture(scope="class")
    def models(self):
        from tests.functional.test_microbatch import EVENTS

        return {
            "events.sql": EVENTS,
            "mb_gated.sql": MICROBATCH_GATED,
            "properties.yml": MICROBATCH_PROPERTIES,
        }

    def test_each_batch_is_gated(self, project):
        from tests.functional.test_microbatch import window

        run_dbt(["run", "--select", "events"])
        args = window("2020-01-01", "2020-01-05", "--select", "mb_gated")
        results, log = run_dbt_and_capture(args, expect_pass=None)  # type: ignore[arg-type]
        (result,) = results
        assert str(result.status) == "success", (result.message, log[-4000:])
        assert len(result.batch_results.successful) == 4, result.batch_results
        ids = sorted(r[0] for r in rows_of(project, rel(project, "mb_gated"), "id"))
        assert ids == [i for i in range(16) if i % 5], ids
        quarantine = f"{rel(project, 'mb_gated')}__quarantine"
        sql = f"select date(event_time), _contract_reason from {quarantine}"
        found = sorted((str(r[0]), str(r[1])) for r in project.run_sql(sql, fetch="all"))
        # one row a day, each turned away by its own batch
        assert found == [(f"2020-01-0{d}", "not_null(id)") for d in (1, 2, 3, 4)], found
        assert "is checked after the load" in log and "unique" in log, log[-3000:]
        # dbt's tests after the load pass: the gate left no NULL id, the ids are unique
        tested = run_dbt(["test", "--select", "mb_gated"])
        assert {str(r.status) for r in tested} == {"pass"}


class TestDataTestsConfigSurface:
    """Folder inheritance, the run-level override, the dry-run plan file, a bad mode at parse."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"test": {"gated": {"+schema_contract": {"data_tests": "discard_row"}}}}}

    @pytest.fixture(scope="class")
    def models(self):
        props = properties("inherits") + properties("plain")
        return {
            "gated": {"inherits.sql": model("")},
            "plain.sql": model(""),
            "properties.yml": "version: 2\nmodels:\n" + props,
        }

    def test_inheritance_override_and_parse_error(self, project):
        run_dbt(["run"])
        # the folder's data_tests gate `inherits`; `plain` sets no contract
        assert [r[0] for r in rows_of(project, rel(project, "inherits"), "id")] == [1]
        assert [r[0] for r in rows_of(project, rel(project, "plain"), "id")] == [0, 1]
        # the run level: a mapping that names data_tests overrides it for every model
        results = {
            r.node.name: r
            for r in run_dbt(
                ["run", "--vars", "{v: 2, schema_contract: {data_tests: discard_value}}"]
            )
        }
        assert results["plain"].adapter_response["values_discarded"] == 1
        assert results["inherits"].adapter_response["rows_discarded"] == 2
        assert rows_of(project, rel(project, "plain"), "id, status") == [
            (0, "a"),
            (1, "a"),
            (2, "a"),
            (4, None),
        ]
        # a dry run lists the gates in the plan file and changes nothing
        run_dbt(["run", "--vars", "{v: 2, schema_evolution_dry_run: true}"])
        report = json.loads(
            (Path(project.project_root) / "target" / "schema_changes.json").read_text()
        )["models"]
        planned = report["model.test.inherits"]["contract"]["data_tests"]
        assert [g["reason"] for g in planned["gates"]] == [
            "accepted_values(status)",
            "not_null(name)",
        ]
        assert report["model.test.inherits"]["dry_run"] is True
        assert [r[0] for r in rows_of(project, rel(project, "inherits"), "id")] == [1, 2, 4]

        # a bad mode fails the parse, naming the key and the allowed values
        bad = Path(project.project_root) / "models" / "bad_mode.sql"
        bad.write_text(
            "{{ config(materialized='incremental', schema_contract={'data_tests': 'drop'}) }}\n"
            "select 1 as id"
        )
        with pytest.raises(ParsingError) as info:
            run_dbt(["parse"])
        message = str(info.value)
        assert "`schema_contract.data_tests` is 'drop'" in message
        assert "allowed: evolve, freeze, discard_row, discard_value" in message
        bad.unlink()
        assert not exists(project, "bad_mode")


PROBED = (
    "select cast(probe_named(id, 'gated_probe') as bigint) as id, "
    "if(id % 10 = 0, cast(null as string), 'x') as name, "
    "if(id % 10 = 1, 'z', 'a') as status from range({rows})"
)


# a score the table holds as INT, a string in the changing run: every tenth does not coerce
# (data_type discard_value nulls it) and not_null(score) turns its row away: the gates read
# the written values from the scope that carries the model's row beside them
COERCED_PROBED = (
    "select cast(probe_named(id, 'coerced_probe') as bigint) as id, "
    "{score} as score from range({rows})"
)


@pytest.mark.profile("session")  # counts in this process's SparkContext
class TestGatedModelRunsItsQueryOnce:
    @pytest.fixture(scope="class")
    def models(self):
        contract = "{'data_tests': 'discard_row', 'quarantine': true}"
        coerced = "{'data_type': 'discard_value', 'data_tests': 'discard_row', 'quarantine': true}"
        sql = versioned_model(
            f"materialized='incremental', file_format='delta', schema_contract={contract}",
            PROBED.format(rows=10),
            PROBED.format(rows=ROWS),
        )
        coerced_sql = versioned_model(
            f"materialized='incremental', file_format='delta', schema_contract={coerced}",
            COERCED_PROBED.format(score="cast(id as int)", rows=10),
            COERCED_PROBED.format(score="if(id % 10 = 0, 'abc', cast(id as string))", rows=ROWS),
        )
        return {
            "gated_probe.sql": sql,
            "coerced_probe.sql": coerced_sql,
            "properties.yml": "version: 2\nmodels:\n"
            + properties("gated_probe")
            + score_properties("coerced_probe", NOT_NULL),
        }

    def test_one_evaluation(self, project):
        with evaluation_probes(["gated_probe", "coerced_probe"]) as count:
            run_dbt(["run"])
            before = {name: count(name) for name in ("gated_probe", "coerced_probe")}
            results = {r.node.name: r for r in run_dbt(["run", "--vars", "{v: 2}"])}
            evaluations = {name: count(name) - before[name] for name in before}
        assert evaluations == {"gated_probe": ROWS, "coerced_probe": ROWS}
        result = results["gated_probe"]
        assert result.adapter_response["rows_discarded"] == 2 * ROWS // 10
        assert per_test(result.adapter_response) == {
            "not_null(name)": ("discard_row", ROWS // 10),
            "accepted_values(status)": ("discard_row", ROWS // 10),
        }
        quarantined = project.run_sql(
            f"select count(*) from {rel(project, 'gated_probe')}__quarantine", fetch="one"
        )[0]
        assert quarantined == 2 * ROWS // 10 + 2  # and the creating run's two
        coerced = results["coerced_probe"].adapter_response
        assert per_test(coerced) == {"not_null(score)": ("discard_row", ROWS // 10)}
        counts = project.run_sql(
            f"select count(*), count(score) from {rel(project, 'coerced_probe')}", fetch="one"
        )
        assert tuple(counts) == (10 + ROWS - ROWS // 10,) * 2


def docs_example() -> str:
    """The properties snippet of docs/contracts.md's data tests section, as written there."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "contracts.md").read_text()
    section = page[page.index("### dbt's data tests as gates") :]
    return section[section.index("```yaml\n") + len("```yaml\n") : section.index("```\n", 10)]


class TestDocsExampleRuns:
    """docs/contracts.md's example, run as written."""

    @pytest.fixture(scope="class")
    def models(self):
        rows = (
            "(1, 'a', 'placed', 'eu', cast(null as string)), (2, cast(null as string), 'placed', "
            "'eu', 'n'), (3, 'b', 'lost', 'eu', 'n'), (4, 'c', 'lost', 'us', 'n')"
        )
        return {
            "orders.sql": "{{ config(materialized='incremental', incremental_strategy='append') }}"
            "\n-- depends_on: {{ ref('customers') }}"
            f"\nselect * from values {rows} as t(id, customer, status, region, note)",
            "customers.sql": "{{ config(materialized='table') }}\n"
            "select * from values ('a'), ('b') as t(name)",
            "properties.yml": "version: 2\n" + docs_example(),
        }

    def test_the_example(self, project):
        results = {r.node.name: r for r in run_dbt(["run"])}
        assert results["orders"].adapter_response["rows_discarded"] == 3
        # id 1's NULL note: opted out; id 4's status: outside the gate's `where`, its
        # customer 'c' not one of `customers`
        assert [r[0] for r in rows_of(project, rel(project, "orders"), "id")] == [1]
        expected = {
            2: {"not_null(customer)"},
            3: {"accepted_values(status)"},
            4: {"relationships(customer)"},
        }
        assert reasons(project, "orders") == expected
        # the same rows again: id 1 is the table's already
        (again,) = run_dbt(["run", "--select", "orders"])
        assert again.adapter_response["rows_discarded"] == 4
        assert reasons(project, "orders") == {**expected, 1: {"unique(id)"}}
        tests = run_dbt(["test", "--select", "orders"], expect_pass=False)
        failed = {r.node.name for r in tests if str(r.status) == "fail"}
        assert failed == {"not_null_orders_note"}  # opted out: checked after the load


SCORE_V1 = "select 1 as id, cast(10 as int) as score"
# v2's score is a string: '20' and '30' coerce into the table's INT, 'abc' does not
SCORE_V2 = "select * from values (2, '20'), (3, 'abc'), (4, '30') as t(id, score)"


def score_model(contract: str) -> str:
    config = (
        "materialized='incremental', file_format='delta', incremental_strategy='append', "
        f"schema_contract={contract}"
    )
    return versioned_model(config, SCORE_V1, SCORE_V2)


def score_properties(name: str, tests: str) -> str:
    return (
        f"  - name: {name}\n    columns:\n      - name: score\n        data_tests:\n"
        f"          {tests}\n"
    )


class TestGatesReadTheCoercedOutput:
    """A gate reads the values the load writes: the model's output coerced into the table's
    types, a value `data_type: discard_value` nulls already NULL."""

    @pytest.fixture(scope="class")
    def models(self):
        nulls = "{'data_type': 'discard_value', 'data_tests': 'discard_row', 'quarantine': true}"
        rows = "{'data_type': 'discard_row', 'data_tests': 'discard_value'}"
        accepted = "- accepted_values:\n              values: [10, 20]\n              quote: false"
        return {
            "coerced_not_null.sql": score_model(nulls),
            "coerced_accepted.sql": score_model(rows),
            "properties.yml": "version: 2\nmodels:\n"
            + score_properties("coerced_not_null", NOT_NULL)
            + score_properties("coerced_accepted", accepted),
        }

    def test_gates_read_the_coerced_values(self, project):
        run_dbt(["run"])
        results = {r.node.name: r for r in run_dbt(["run", "--vars", "{v: 2}"])}
        # 'abc' is NULL once coerced (data_type discard_value): not_null(score) turns it away
        nulled = results["coerced_not_null"].adapter_response
        assert nulled["rows_discarded"] == 1
        assert per_test(nulled) == {"not_null(score)": ("discard_row", 1)}
        assert rows_of(project, rel(project, "coerced_not_null")) == [(1, 10), (2, 20), (4, 30)]
        assert reasons(project, "coerced_not_null") == {3: {"not_null(score)"}}
        # 'abc' does not coerce (data_type discard_row drops its row); 30 fails the accepted
        # values of the INT column and is loaded as NULL
        accepted = results["coerced_accepted"].adapter_response
        assert (accepted["rows_discarded"], accepted["values_discarded"]) == (1, 1)
        assert per_test(accepted) == {"accepted_values(score)": ("discard_value", 1)}
        assert rows_of(project, rel(project, "coerced_accepted")) == [(1, 10), (2, 20), (4, None)]
        tests = run_dbt(["test"])
        assert len(tests) == 2 and {str(r.status) for r in tests} == {"pass"}


UTILS_V1 = "select * from values (1, 'x', 5) as t(id, name, amount)"
# id 3's name is blank, id 4's amount is out of range, id 100 fails the model's expression
UTILS_V2 = (
    "select * from values (2, 'x', 5), (3, '  ', 5), (4, 'y', 50), (100, 'z', 5) "
    "as t(id, name, amount)"
)
UTILS_PROPERTIES = """version: 2
models:
  - name: gate_utils_delta
    data_tests:
      - dbt_utils.expression_is_true:
          expression: "id < 100"
    columns:
      - name: name
        data_tests:
          - dbt_utils.not_empty_string
      - name: amount
        data_tests:
          - dbt_utils.accepted_range:
              min_value: 0
              max_value: 10
"""


class TestDbtUtilsGates:
    """dbt_utils' row tests gate the load as dbt's own do: the project installs dbt_utils
    (three of its generic tests, copied unchanged into tests/functional/fixtures/dbt_utils, a
    local package: no network), the failing rows are quarantined naming the test, and the
    tests, run by `dbt build` after the load with dbt_utils' own SQL, pass."""

    @pytest.fixture(scope="class")
    def packages(self):
        fixture = Path(__file__).resolve().parent.parent / "fixtures" / "dbt_utils"
        return {"packages": [{"local": str(fixture)}]}

    @pytest.fixture(scope="class")
    def models(self):
        config = (
            "materialized='incremental', file_format='delta', incremental_strategy='append', "
            f"schema_contract={ROW_Q}"
        )
        return {
            "gate_utils_delta.sql": versioned_model(config, UTILS_V1, UTILS_V2),
            "properties.yml": UTILS_PROPERTIES,
        }

    def test_dbt_utils_tests_gate_and_pass_after_the_load(self, project):
        run_dbt(["deps"])
        run_dbt(["build"])
        results = {r.node.name: r for r in run_dbt(["build", "--vars", "{v: 2}"])}
        (model,) = [r for r in results.values() if r.node.resource_type == "model"]
        assert model.adapter_response["rows_discarded"] == 3
        assert [r[0] for r in rows_of(project, rel(project, "gate_utils_delta"), "id")] == [1, 2]
        assert reasons(project, "gate_utils_delta") == {
            3: {"dbt_utils.not_empty_string(name)"},
            4: {"dbt_utils.accepted_range(amount)"},
            100: {"dbt_utils.expression_is_true(id < 100)"},
        }
        tests = [r for r in results.values() if r.node.resource_type == "test"]
        assert len(tests) == 3 and all(str(r.status) == "pass" for r in tests), [
            (r.node.name, str(r.status)) for r in tests
        ]
