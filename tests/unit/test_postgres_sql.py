"""The Spark spelling of dbt's simple_snapshot suites' Postgres setup SQL
(tests/functional/adapter/postgres_sql.py), checked without Spark."""

from __future__ import annotations

from tests.functional.adapter.postgres_sql import run_postgres_sql, spark_statements


def test_statements_are_split_and_comment_only_parts_dropped():
    sql = "-- a\nupdate {schema}.seed set a = 1;\n\n-- b\nupdate {schema}.x set b = 2;\n\n"
    assert [s.strip() for s in spark_statements(sql)] == [
        "-- a\nupdate {schema}.seed set a = 1",
        "-- b\nupdate {schema}.x set b = 2",
    ]


def test_tables_are_delta_and_types_spelled_for_spark():
    (create,) = spark_statements(
        "create table {database}.{schema}.t (\n  a TEXT,\n  b TIMESTAMP WITHOUT TIME ZONE\n);"
    )
    assert create == "create table {schema}.t (\n  a STRING,\n  b TIMESTAMP\n) using delta"
    (ctas,) = spark_statements("\n create table s.fact as\n select * from s.seed where 1 = 1")
    assert ctas == "\n create table s.fact using delta as\n select * from s.seed where 1 = 1"
    (kept,) = spark_statements("create table s.t (a int) using iceberg")
    assert kept == "create table s.t (a int) using iceberg"


def test_values_literals_typed_and_default_null_dropped():
    (insert,) = spark_statements("insert into s.t values (1, 'x', '2015-12-24 12:19:28');")
    assert insert == "insert into s.t values (1, 'x', timestamp'2015-12-24 12:19:28')"
    (alter,) = spark_statements("alter table s.t\n add column c varchar(200) default null")
    assert alter == "alter table s.t\n add column c varchar(200)"
    assert spark_statements("select md5(a || b::text) from s.t") == [
        "select md5(a || b::STRING) from s.t"
    ]


def test_each_statement_runs_and_the_last_result_is_returned():
    ran = []

    def run_sql(sql, fetch=None):
        ran.append((sql.strip(), fetch))
        return len(ran)

    assert run_postgres_sql(run_sql)("update a set x = 1; select 2", fetch="all") == 2
    assert ran == [("update a set x = 1", "all"), ("select 2", "all")]
