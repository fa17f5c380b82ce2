"""The model's query runs once per run, for every run shape that adds a column or discards rows
or values, on every format: a Python UDF counts its calls per model (tests/functional/probes.py),
all the models built in one `dbt run` and changed in a second (threads: 4 from conftest). The
changing run's discards are also checked where they land: the response, the table,
discard_row's quarantine, the report (a stage only for Iceberg's merge with a key, see the README)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
from dbt.tests.util import run_dbt

from tests.functional.evolution.test_evolution_matrix import rows_of
from tests.functional.probes import ROWS, evaluation_probes, probe_model

PROBED = "cast(probe_named(id, '{name}') as bigint) as id"
BAD_N = "if(id % 10 = 0, 'bad', cast(id as string)) as n"
DISCARDED = ROWS // 10  # the rows whose `n` is 'bad'


def evolve(fmt: str, extra: str = "", setting: str = "schema_evolution={}") -> str:
    return probe_model(
        f"file_format='{fmt}', {setting}{extra}",
        "select id from range(1)",
        f"select {PROBED}, 'x' as note from range({ROWS})",
    )


def discard(fmt: str, mode: str, extra: str = "", quarantine: bool = False) -> str:
    """`n` retyped bigint -> string under data_type `mode`; every tenth row's `n` is 'bad'."""
    contract = f"'data_type': '{mode}'" + (", 'quarantine': true" if quarantine else "")
    return probe_model(
        f"file_format='{fmt}', schema_contract={{{contract}}}{extra}",
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
    # discard_row: the load filters and counts in one pass; with quarantine it also collects
    # the discarded rows, inserted into the quarantine after it under the run's intent
    "discard_row_delta_append": discard("delta", "discard_row"),
    "discard_row_delta_merge": discard("delta", "discard_row", ", unique_key='id'"),
    "discard_row_quarantine": discard("delta", "discard_row", quarantine=True),
    # a model column named like the load's first coerced column: the alias skips it
    **{
        f"discard_row_coerced_name_{fmt}": probe_model(
            f"file_format='{fmt}', schema_contract={{'data_type': 'discard_row'}}",
            "select id, cast(id as bigint) as n, id * 2 as __dbt_coerced_0 from range(1)",
            f"select {PROBED}, {BAD_N}, id * 2 as __dbt_coerced_0 from range({ROWS})",
        )
        for fmt in ("delta", "iceberg", "parquet")
    },
    "discard_value_delta_append": discard(
        "delta", "discard_value", ", incremental_strategy='append'"
    ),
    "discard_value_delta_merge": discard("delta", "discard_value", ", unique_key='id'"),
    "discard_value_iceberg_append": discard("iceberg", "discard_value"),
    "discard_value_iceberg_merge": discard("iceberg", "discard_value", ", unique_key='id'"),
    "discard_value_parquet": discard("parquet", "discard_value", ", incremental_strategy='append'"),
    "discard_value_quarantine": discard("delta", "discard_value", quarantine=True),
    "plain_iceberg_merge": probe_model(
        "file_format='iceberg', unique_key='id'",
        "select id from range(1)",
        f"select {PROBED} from range({ROWS})",
    ),
    "evolve_delta_table": evolve("delta").replace("'incremental'", "'table'"),
    "evolve_iceberg_table": evolve("iceberg").replace("'incremental'", "'table'"),
    # a table model's rebuild of its existing table that discards (not its creating run)
    "table_discard_row_quarantine_delta": discard("delta", "discard_row", quarantine=True).replace(
        "'incremental'", "'table'"
    ),
    "table_discard_value_iceberg": discard("iceberg", "discard_value").replace(
        "'incremental'", "'table'"
    ),
    "columns_discard_value": probe_model(
        "file_format='delta', schema_contract={'columns': 'discard_value'}",
        "select id from range(1)",
        f"select {PROBED}, 'x' as note from range({ROWS})",
    ),
}
DISCARDING = [name for name in MODELS if name.startswith("discard_")]
# CI's share (`make functional-ci`): each run shape once per format, each discard mode with and
# without the quarantine; TestOneEvaluationMoreShapes (`make functional-extra`) has the rest.
CORE = (
    "evolve_delta_merge",
    "evolve_iceberg_merge",
    "evolve_parquet_append",
    "discard_row_delta_merge",
    "discard_row_quarantine",
    "discard_row_coerced_name_iceberg",
    "discard_value_iceberg_append",
    "discard_value_parquet",
    "discard_value_quarantine",
    "evolve_delta_table",
    "columns_discard_value",
    "table_discard_row_quarantine_delta",
    "table_discard_value_iceberg",
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`name` over the class's shapes (`SHAPES`), those a test takes (its `shapes` filter)."""
    if "name" in metafunc.fixturenames and hasattr(metafunc.cls, "SHAPES"):
        pick = getattr(metafunc.function, "shapes", lambda name: True)
        metafunc.parametrize("name", [n for n in metafunc.cls.SHAPES if pick(n)])


def shapes(pick):
    """The shapes a test of the class takes."""

    def mark(test):
        test.shapes = pick
        return test

    return mark


@pytest.mark.profile("session")  # counts in this process's SparkContext
class TestOneEvaluationEveryShape:
    SHAPES = CORE

    @pytest.fixture(scope="class")
    def models(self):
        return {f"{name}.sql": MODELS[name].replace("{name}", name) for name in self.SHAPES}

    @pytest.fixture(scope="class")
    def runs(self, project: Any) -> Iterator[Dict[str, Any]]:
        """The two runs under the probes: each model's status, its evaluations in the changing
        run, that run's adapter responses and its schema_changes.json."""
        names = list(self.SHAPES)
        with evaluation_probes(names) as count:
            first = run_dbt(["run"], expect_pass=None)  # type: ignore[arg-type]
            before = {name: count(name) for name in names}
            changed = run_dbt(["run", "--vars", "{v: 2}"], expect_pass=None)  # type: ignore[arg-type]
            after = {name: count(name) for name in names}
        report = Path(project.project_root) / "target" / "schema_changes.json"
        yield {
            "first": {r.node.name: str(r.status) for r in first},
            "changed": {r.node.name: str(r.status) for r in changed},
            "evaluations": {n: after[n] - before[n] for n in names},
            "responses": {r.node.name: r.adapter_response for r in changed},
            "report": json.loads(report.read_text())["models"],
        }

    def test_model_query_runs_once(self, runs: Dict[str, Any], name: str) -> None:
        assert (runs["first"][name], runs["changed"][name]) == ("success", "success"), name
        evaluated = runs["evaluations"][name]
        if name == "discard_row_quarantine":  # its first discarding run after a clean one: the
            # first pass met a discarded row, wrote nothing, and the pending table read it all
            # (each path counted in tests/functional/contracts/test_quarantine_first_pass.py)
            assert ROWS <= evaluated <= 2 * ROWS, (name, evaluated)
        else:
            assert evaluated == ROWS, (name, runs["evaluations"])

    @shapes(lambda name: name in ("evolve_delta_merge", "evolve_delta_append"))
    def test_delta_evolution_reads_the_model_without_a_stage(
        self, runs: Dict[str, Any], name: str
    ) -> None:
        entry = runs["report"][f"model.test.{name}"]
        assert entry["staged"] is False, entry

    @shapes(lambda name: name in DISCARDING)
    def test_discards_counted_where_they_land(
        self, project: Any, runs: Dict[str, Any], name: str
    ) -> None:
        response, entry = runs["responses"][name], runs["report"][f"model.test.{name}"]
        prefix = "iceberg." if "iceberg" in name else ""
        kept = rows_of(project, f"{prefix}{project.test_schema}.{name}")
        if name.startswith("discard_row"):
            assert (response["rows_discarded"], len(kept)) == (DISCARDED, 1 + ROWS - DISCARDED)
        else:  # every row kept, the bad values NULL (the first run's id 0 stays beside it)
            assert response["values_discarded"] == DISCARDED, response
            assert sum(1 for row in kept if row[1] is None) == DISCARDED, kept
        if name.startswith("discard_row_coerced_name"):  # the model's own column, its values
            assert all(row[2] == row[0] * 2 for row in kept), kept
        if name == "discard_row_quarantine":
            quarantine = f"{project.test_schema}.{name}__quarantine"
            assert len(project.run_sql(f"select * from {quarantine}", fetch="all")) == DISCARDED
        # Iceberg's MERGE with a key reads its source twice: that run loads from a stage; a
        # quarantining run reads the model once into its pending table, and loads from there
        quarantining = name == "discard_row_quarantine"
        assert entry["staged"] is (name.endswith("iceberg_merge") or quarantining), entry
        assert (entry["pending_table"] is not None) is quarantining, entry

    @shapes(lambda name: name.startswith("table_discard"))
    def test_a_table_rebuild_counts_its_discards(
        self, project: Any, runs: Dict[str, Any], name: str
    ) -> None:
        """The rebuild replaces the table with this run's kept rows (its discards counted)."""
        response = runs["responses"][name]
        prefix = "iceberg." if "iceberg" in name else ""
        kept = rows_of(project, f"{prefix}{project.test_schema}.{name}")
        if "discard_row" in name:
            assert (response["rows_discarded"], len(kept)) == (DISCARDED, ROWS - DISCARDED)
            quarantine = f"{project.test_schema}.{name}__quarantine"
            assert len(project.run_sql(f"select * from {quarantine}", fetch="all")) == DISCARDED
        else:
            assert response["values_discarded"] == DISCARDED, response
            assert (len(kept), sum(1 for row in kept if row[1] is None)) == (ROWS, DISCARDED)


class TestOneEvaluationMoreShapes(TestOneEvaluationEveryShape):
    """The other shapes (`make functional-extra`)."""

    SHAPES = tuple(name for name in MODELS if name not in CORE)
    test_a_table_rebuild_counts_its_discards = None  # its shapes are all in CORE


SNAPSHOT = """
{{% snapshot {name} %}}
{{{{ config(target_schema=target.schema, unique_key='id', strategy='check', check_cols=['n'],
    file_format='{fmt}'{extra}) }}}}
select {probed}, {{% if var('v', 1) == 1 %}}id{{% else %}}id + 1{{% endif %}} as n
{{% if var('v', 1) == 2 %}}, 'x' as note{{% endif %}}
from range({{{{ 1 if var('v', 1) == 1 else {rows} }}}})
{{% endsnapshot %}}
"""
SNAPSHOTS = {
    "snap_delta": ("delta", ""),
    "snap_delta_deletes": ("delta", ", hard_deletes='invalidate'"),
    "snap_iceberg": ("iceberg", ""),
}


@pytest.mark.profile("session")  # counts in this process's SparkContext
class TestOneEvaluationSnapshot:
    """A snapshot's query runs once in a run that changes its table (a new column, a row
    updated and new rows inserted; with `hard_deletes` also deleted rows sought), although dbt's
    staging SQL reads the snapshot's query in each of its branches. The query uses a temporary
    function (the probe), which dbt-spark's persistent staging view refused."""

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {
            f"{name}.sql": SNAPSHOT.format(
                name=name,
                fmt=fmt,
                extra=extra,
                rows=ROWS,
                probed=PROBED.replace("{name}", name),
            )
            for name, (fmt, extra) in SNAPSHOTS.items()
        }

    @pytest.mark.parametrize(
        "name",
        # Iceberg's MERGE refuses a non-deterministic source: its query is written once
        # before the merge (core/materialization/snapshot.SourceStage)
        ["snap_delta", "snap_delta_deletes", "snap_iceberg"],
    )
    def test_snapshot_query_runs_once(self, project: Any, name: str) -> None:
        with evaluation_probes([name]) as count:
            run_dbt(["snapshot", "--select", name])
            before = count(name)
            run_dbt(["snapshot", "--select", name, "--vars", "{v: 2}"])
            evaluated = count(name) - before
        prefix = "iceberg." if SNAPSHOTS[name][0] == "iceberg" else ""
        rows = rows_of(project, f"{prefix}{project.test_schema}.{name}")
        assert len(rows) == 1 + ROWS, len(rows)  # row 0 updated: closed, and a new version
        assert evaluated == ROWS, (name, evaluated)
