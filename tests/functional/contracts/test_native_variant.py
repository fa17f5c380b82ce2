"""`schema_contract: {data_type: evolve, variant_columns: native}` on real Spark (issue 31 item 2).

A value that does not coerce into the deployed column is kept in one VARIANT column
`<column>__v` (the column itself NULL on that row), on Delta, Iceberg (upgraded to format v3 by
the plan) and Parquet; through an append and a merge; a rejected struct field at its path in the
variant; through an insert_overwrite by partition. v1 builds each table, v2 brings the uncoercible values, v3 more of them into the
variant column v2 added. The assertions read the real tables and run_results."""

from __future__ import annotations

import pytest
from dbt.tests.util import get_connection, run_dbt

from dbt.adapters.spark_contracts.connection.errors import VariantResultOverThriftError
from tests.functional.contracts.test_contract_matrix import rel
from tests.functional.evolution.test_evolution_matrix import schema_of
from tests.functional.test_microbatch import EVENTS, day, relation, window

NATIVE = "{'data_type': 'evolve', 'variant_columns': 'native'}"

TOP_LEVEL = (
    "{% if var('v', 1) == 1 %}select 1 as id, cast(10 as int) as score"
    "{% elif var('v', 1) == 2 %}select 2 as id, '20' as score union all "
    "select 3 as id, 'not_a_number' as score"
    "{% else %}select 4 as id, 'also_bad' as score{% endif %}\n"
)
NESTED = (
    "{% if var('v', 1) == 1 %}select 1 as id, named_struct('a', cast(1 as int), 'b', "
    "cast(2 as int)) as s"
    "{% elif var('v', 1) == 2 %}select 2 as id, named_struct('a', cast(3 as int), 'b', 'bad') "
    "as s union all select 3 as id, named_struct('a', cast(4 as int), 'b', '5') as s"
    "{% else %}select 4 as id, named_struct('a', cast(5 as int), 'b', 'worse') as s{% endif %}\n"
)


def model(fmt: str, body: str, strategy: str = "append") -> str:
    key = {"merge": ", unique_key='id'", "insert_overwrite": ", partition_by=['id']"}.get(
        strategy, ""
    )
    return (
        "{{ config(materialized='incremental', incremental_strategy='"
        + strategy
        + "'"
        + key
        + ", file_format='"
        + fmt
        + "', schema_contract="
        + NATIVE
        + ") }}\n"
        + body
    )


MODELS = {
    "native_delta": model("delta", TOP_LEVEL),
    "native_merge_delta": model("delta", TOP_LEVEL, "merge"),
    # each run overwrites the partitions its rows are in (ids are new each run)
    "native_overwrite_delta": model("delta", TOP_LEVEL, "insert_overwrite"),
    "native_iceberg": model("iceberg", TOP_LEVEL),
    "native_nested_delta": model("delta", NESTED),
    "native_nested_iceberg": model("iceberg", NESTED),
    # a table model rebuilds from the model's rows: v2's rows, then v3's
    "native_table_delta": model("delta", TOP_LEVEL).replace(
        "materialized='incremental', incremental_strategy='append'", "materialized='table'"
    ),
}


def read_back(project, name: str) -> list[tuple]:
    sql = (
        "select id, score, variant_get(score__v, '$', 'string') "
        f"from {rel(project, name)} order by id"
    )
    return [tuple(r) for r in project.run_sql(sql, fetch="all")]


class TestNativeVariantColumns:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"{name}.sql": sql for name, sql in MODELS.items()}

    @pytest.fixture(scope="class")
    def outcome(self, project):
        run_dbt(["run"])
        v2 = {r.node.name: r for r in run_dbt(["run", "--vars", "{v: 2}"], expect_pass=None)}
        v3 = {r.node.name: r for r in run_dbt(["run", "--vars", "{v: 3}"], expect_pass=None)}
        return v2, v3

    @pytest.mark.parametrize(
        "name",
        [
            "native_delta",
            "native_merge_delta",
            "native_overwrite_delta",
            "native_iceberg",
        ],
    )
    def test_an_uncoercible_value_is_kept_in_one_variant_column(self, project, outcome, name):
        v2, v3 = outcome
        for results in (v2, v3):
            assert str(results[name].status) == "success", results[name].message
        assert schema_of(project, rel(project, name)) == {
            "id": "int",
            "score": "int",
            "score__v": "variant",
        }
        assert read_back(project, name) == [
            (1, 10, None),
            (2, 20, None),
            (3, None, "not_a_number"),
            (4, None, "also_bad"),
        ]

    def test_delta_has_the_variant_feature(self, project, outcome):
        rows = project.run_sql(f"show tblproperties {rel(project, 'native_delta')}", fetch="all")
        assert ("delta.feature.variantType", "supported") in {tuple(r) for r in rows}

    def test_iceberg_is_upgraded_to_format_v3(self, project, outcome):
        rows = project.run_sql(f"show tblproperties {rel(project, 'native_iceberg')}", fetch="all")
        assert dict(tuple(r) for r in rows).get("format-version") == "3"

    def test_a_table_model_rebuilds_with_the_variant_column(self, project, outcome):
        name = "native_table_delta"
        for results in outcome:
            assert str(results[name].status) == "success", results[name].message
        assert schema_of(project, rel(project, name))["score__v"] == "variant"
        assert read_back(project, name) == [(4, None, "also_bad")]

    @pytest.mark.parametrize("name", ["native_nested_delta", "native_nested_iceberg"])
    def test_a_rejected_struct_field_is_kept_at_its_path(self, project, outcome, name):
        for results in outcome:
            assert str(results[name].status) == "success", results[name].message
        assert schema_of(project, rel(project, name))["s__v"] == "variant"
        sql = (
            "select id, s.a, s.b, variant_get(s__v, '$.b', 'string') "
            f"from {rel(project, name)} order by id"
        )
        rows = [tuple(r) for r in project.run_sql(sql, fetch="all")]
        assert rows == [
            (1, 1, 2, None),
            (2, 3, None, "bad"),
            (3, 4, 5, None),
            (4, 5, None, "worse"),
        ]


MERGED = (
    "{% if var('v', 1) == 1 %}select 1 as id, cast(10 as int) as score"
    "{% elif var('v', 1) == 2 %}select 1 as id, '10' as score union all "
    "select 3 as id, 'not_a_number' as score"
    "{% else %}select 1 as id, '10' as score union all "
    "select 3 as id, 'still_bad' as score{% endif %}\n"
)


def snapshot(fmt: str) -> str:
    return (
        "{% snapshot scores_snapshot_" + fmt + " %}\n"
        "{{ config(strategy='check', unique_key='id', check_cols='all', target_schema=schema, "
        "file_format='" + fmt + "') }}\n"
        "select * from {{ ref('scores_" + fmt + "') }}\n{% endsnapshot %}\n"
    )


class TestSnapshotOfANativeVariantColumn:
    """A snapshot (check_cols: all) of a merge model with a native variant column: the snapshot
    gains `score__v` (VARIANT) through the planner, and a change only in the variant's value
    is recorded (compared through to_json: Spark cannot compare VARIANT values). Delta here,
    Iceberg (the snapshot upgraded to format v3) below."""

    fmt = "delta"

    @pytest.fixture(scope="class")
    def models(self):
        return {f"scores_{self.fmt}.sql": model(self.fmt, MERGED, "merge")}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {f"scores_snapshot_{self.fmt}.sql": snapshot(self.fmt)}

    def test_snapshot_records_a_change_of_the_variant_value(self, project):
        for v in (1, 2, 3):
            run_dbt(["run", "--vars", f"{{v: {v}}}"])
            run_dbt(["snapshot", "--vars", f"{{v: {v}}}"])
        snap = rel(project, f"scores_snapshot_{self.fmt}")
        assert schema_of(project, snap)["score__v"] == "variant"
        sql = (
            "select id, score, variant_get(score__v, '$', 'string'), dbt_valid_to is null "
            f"from {snap} order by id, dbt_valid_from"
        )
        rows = [tuple(r) for r in project.run_sql(sql, fetch="all")]
        assert rows == [
            # dbt's check strategy: the run that adds a column records every row again
            (1, 10, None, False),
            (1, 10, None, True),
            (3, None, "not_a_number", False),
            (3, None, "still_bad", True),
        ]


class TestAnIcebergSnapshotRefusesANewVariantColumn:
    """Iceberg 1.12 fails a merge into a table whose new VARIANT column no data file holds yet
    (a NullPointerException planning it, after the column was added): the Iceberg snapshot of
    a source that brings a native variant column is refused before anything changes, naming
    the way out."""

    @pytest.fixture(scope="class")
    def models(self):  # the source on Delta: an Iceberg merge model refuses native variants
        return {"scores_iceberg.sql": model("delta", MERGED, "merge")}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"scores_snapshot_iceberg.sql": snapshot("iceberg")}

    def test_refused_before_any_change(self, project):
        run_dbt(["run"])
        run_dbt(["snapshot"])
        snap = rel(project, "scores_snapshot_iceberg")
        before = schema_of(project, snap)
        run_dbt(["run", "--vars", "{v: 2}"])
        results = run_dbt(["snapshot", "--vars", "{v: 2}"], expect_pass=False)
        message = " ".join(results[0].message.split())
        assert "brings the VARIANT column `score__v`" in message, message
        assert "file_format: delta" in message and "typed" in message
        assert schema_of(project, snap) == before
        rows = project.run_sql(f"show tblproperties {snap}", fetch="all")
        assert dict(tuple(r) for r in rows).get("format-version") != "3"


class TestAVariantResultPerMethod:
    """A result holding a VARIANT column: read on session and connect. Spark's Thrift server has
    no thrift type for VARIANT and fails to describe such a result; over thrift that is one
    typed error naming the column and the ways out, and the same value through `to_json` reads."""

    def test_read_or_refused_naming_the_column(self, project, request):
        sql = "select id, named_struct('x', cast(id as variant)) as s, cast(id as variant) as v"
        adapter = project.adapter
        with get_connection(adapter):
            if request.config.getoption("--profile") == "thrift":
                with pytest.raises(VariantResultOverThriftError) as raised:
                    adapter.execute(f"{sql} from range(2)", fetch=True)
                assert raised.value.columns == ("s", "v")
                message = str(raised.value)
                assert "`s`, `v`" in message and "to_json" in message and "connect" in message
            else:
                _, table = adapter.execute(f"{sql} from range(2)", fetch=True)
                assert [row[0] for row in table.rows] == [0, 1]
            _, table = adapter.execute(
                "select to_json(cast(id as variant)) from range(2)", fetch=True
            )
            assert [row[0] for row in table.rows] == ["0", "1"]


# From `bad_day` on, a batch outputs `score` as a string; one row a day (id % 4 = 0) does not
# coerce to the deployed int.
NATIVE_MICROBATCH = """
{{{{ config(materialized='incremental', incremental_strategy='microbatch', file_format='{fmt}',
    event_time='event_time', batch_size='day', begin=modules.datetime.datetime(2020, 1, 1),
    schema_contract={native}) }}}}
select id, event_time,
{{% if model.batch and model.batch.event_time_start.day >= var('bad_day', 99) %}}
  case when id % 4 = 0 then 'bad_' || id else cast(id as string) end as score
{{% else %}}
  cast(id as int) as score
{{% endif %}}
from {{{{ ref('events') }}}}
"""


class TestNativeVariantThroughMicrobatch:
    """Each batch of a microbatch model evolves on its own: the batch that first brings an
    uncoercible value adds `score__v`, the next batch writes into it, and the batches before
    keep their rows (Delta; an Iceberg microbatch model refuses native variants at parse,
    test_parse_validation.py, as an Iceberg merge model does)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "events.sql": EVENTS,
            "mb_delta.sql": NATIVE_MICROBATCH.format(fmt="delta", native=NATIVE),
        }

    @pytest.mark.parametrize("fmt", ["delta"])
    def test_each_batch_keeps_its_uncoercible_values(self, project, fmt):
        run_dbt(["run", "--select", "events"])
        name = f"mb_{fmt}"
        run_dbt(window("2020-01-01", "2020-01-04", "--select", name))
        results = run_dbt(
            [*window("2020-01-02", "2020-01-04", "--select", name), "--vars", "{bad_day: 2}"]
        )
        assert len(results[0].batch_results.successful) == 2, results[0].message
        table = relation(project, fmt, name)
        assert schema_of(project, table)["score__v"] == "variant"
        rows = project.run_sql(
            f"select id, score, variant_get(score__v, '$', 'string') from {table} order by id",
            fetch="all",
        )
        expected = [
            (i, None, f"bad_{i}") if i % 4 == 0 and i not in day(1) else (i, i, None)
            for d in (1, 2, 3)
            for i in day(d)
        ]
        assert [tuple(r) for r in rows] == expected
