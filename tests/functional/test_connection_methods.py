"""The distributed connection methods, end to end: dbt through a Spark Thrift Server (`thrift`,
PyHive) and a Spark Connect server (`connect`), each started locally from the pyspark wheel.

Run them (no make needed; the fixture in conftest.py starts and stops the server):

    export DBT_SPARK_CONTRACTS_JARS=$PWD/.jars   # or leave unset to let Spark resolve the jars
    .venv/bin/pytest tests/functional/test_connection_methods.py --profile thrift
    .venv/bin/pytest tests/functional/test_connection_methods.py --profile connect
    # dbt's conformance suites over a server:
    .venv/bin/pytest tests/functional/adapter/test_basic.py --profile connect

`--profile` defaults to $DBT_SPARK_CONTRACTS_PROFILE, else `session`; under `session` these tests
are skipped. To point dbt at such a server by hand, start one with
`python -m spark_contracts_dev.servers thrift|connect --port N --warehouse-dir DIR` and use
`method: thrift, host: localhost, port: N, user: dbt, schema: ...` or
`method: connect, host: sc://localhost:N, schema: ...` in profiles.yml.
"""

from __future__ import annotations

import pytest
from dbt.tests.util import get_connection, run_dbt

DISTRIBUTED = pytest.mark.profile("thrift", "connect")

MODELS = {
    "delta_model.sql": "{{ config(materialized='table', file_format='delta') }}\n"
    "select 1 as id, 'a' as name",
    "iceberg_model.sql": "{{ config(materialized='table', file_format='iceberg') }}\n"
    "select 1 as id, 'a' as name",
    "parquet_model.sql": "{{ config(materialized='table', file_format='parquet') }}\n"
    "select 1 as id, 'a' as name",
    "merge_model.sql": "{{ config(materialized='incremental', incremental_strategy='merge',"
    " unique_key='id', file_format='delta') }}\n"
    "{% if is_incremental() %}\n"
    "select 1 as id, 'updated' as name union all select 3 as id, 'new' as name\n"
    "{% else %}\n"
    "select 1 as id, 'first' as name union all select 2 as id, 'first' as name\n"
    "{% endif %}",
}


def _provider(project, relation: str) -> str:
    rows = project.run_sql(f"describe extended {relation}", fetch="all")
    for row in rows:
        if str(row[0]).strip().lower() == "provider":
            return str(row[1]).strip().lower()
    raise AssertionError(f"no Provider row in DESCRIBE EXTENDED {relation}: {rows}")


@DISTRIBUTED
class TestTableFormatsThroughServer:
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    def test_formats_and_merge(self, project):
        results = run_dbt(["run"])
        assert len(results) == 4
        assert all(r.status == "success" for r in results)

        schema = project.test_schema
        assert _provider(project, f"{schema}.delta_model") == "delta"
        assert _provider(project, f"iceberg.{schema}.iceberg_model") == "iceberg"
        assert _provider(project, f"{schema}.parquet_model") == "parquet"
        assert _provider(project, f"{schema}.merge_model") == "delta"

        for relation in (
            f"{schema}.delta_model",
            f"iceberg.{schema}.iceberg_model",
            f"{schema}.parquet_model",
        ):
            rows = project.run_sql(f"select id, name from {relation}", fetch="all")
            assert [tuple(r) for r in rows] == [(1, "a")]

        results = run_dbt(["run", "--select", "merge_model"])
        assert results[0].status == "success"
        rows = project.run_sql(
            f"select id, name from {schema}.merge_model order by id", fetch="all"
        )
        assert [tuple(r) for r in rows] == [(1, "updated"), (2, "first"), (3, "new")]


@DISTRIBUTED
class TestSchemaAnalysisThroughServer:
    def test_schema_json_returns_struct(self, project):
        with get_connection(project.adapter) as connection:
            handle = connection.handle
            schema = handle.schema_json("select 1 as a, named_struct('x', 2) as s")
        assert schema["type"] == "struct"
        fields = {f["name"]: f["type"] for f in schema["fields"]}
        assert fields["a"] == "integer"
        assert fields["s"] == {
            "type": "struct",
            "fields": [
                {
                    "name": "x",
                    "type": "integer",
                    "nullable": fields["s"]["fields"][0]["nullable"],
                    "metadata": {},
                }
            ],
        }

    def test_adapter_schema_json_is_analysis_only(self, project):
        """A query that would fail at run time (division by zero under ANSI, raise_error) is
        analysed without being run."""
        with get_connection(project.adapter):
            schema = project.adapter.schema_json(
                "select raise_error('must not run') as boom, cast(1 as bigint) as n"
            )
        types = {f["name"]: f["type"] for f in schema["fields"]}
        assert types["n"] == "long"
        assert "boom" in types

    def test_analysis_error_is_a_dbt_error(self, project):
        from dbt_common.exceptions import DbtRuntimeError

        with get_connection(project.adapter):
            with pytest.raises(DbtRuntimeError, match="(?i)no_such_column|cannot be resolved"):
                project.adapter.schema_json("select no_such_column from (select 1 as a)")


def test_thrift_schema_forms_match_spark_json():
    """The two forms thrift's `schema_json` reads (no server needed) give Spark's JSON schema."""
    from pyspark.sql import types as T

    from dbt.adapters.spark_contracts.connection.schema_io import (
        describe_json_to_json,
        describe_rows_to_json,
    )

    expected = T.StructType(
        [
            T.StructField("a", T.IntegerType()),
            T.StructField("s", T.StructType([T.StructField("x", T.LongType())])),
            T.StructField("arr", T.ArrayType(T.DecimalType(10, 2))),
            T.StructField("m", T.MapType(T.StringType(), T.DoubleType())),
            T.StructField("i", T.DayTimeIntervalType(0, 3)),
            T.StructField("y", T.YearMonthIntervalType(0, 0)),
            T.StructField("t", T.TimestampType()),
        ]
    ).jsonValue()
    rows = [
        ("a", "int", None),
        ("s", "struct<x:bigint>", None),
        ("arr", "array<decimal(10,2)>", None),
        ("m", "map<string,double>", None),
        ("i", "interval day to second", None),
        ("y", "interval year", None),
        ("t", "timestamp", None),
        ("", "", ""),
        ("# Partition Information", "", ""),
    ]
    assert describe_rows_to_json(rows) == expected

    columns = [
        {"name": "a", "type": {"name": "int"}, "nullable": False},
        {
            "name": "s",
            "type": {
                "name": "struct",
                "fields": [{"name": "x", "type": {"name": "bigint"}, "nullable": False}],
            },
            "nullable": True,
        },
        {
            "name": "arr",
            "type": {
                "name": "array",
                "element_type": {"name": "decimal", "precision": 10, "scale": 2},
                "element_nullable": True,
            },
            "nullable": True,
        },
        {
            "name": "m",
            "type": {
                "name": "map",
                "key_type": {"name": "string", "collation": "UTF8_BINARY"},
                "value_type": {"name": "double"},
                "value_nullable": True,
            },
            "nullable": True,
        },
        {
            "name": "i",
            "type": {"name": "interval", "start_unit": "day", "end_unit": "second"},
            "nullable": True,
        },
        {
            "name": "y",
            "type": {"name": "interval", "start_unit": "year", "end_unit": "year"},
            "nullable": True,
        },
        {"name": "t", "type": {"name": "timestamp_ltz"}, "nullable": True},
    ]
    expected["fields"][0]["nullable"] = False
    expected["fields"][1]["type"]["fields"][0]["nullable"] = False
    assert describe_json_to_json(columns) == expected
