"""The load's fast answer for a text value that cannot be a number (core/contracts/checked_cast.py,
`not_a_number`) gives what `try_cast` gives, on real Spark, for every ASCII first character
(0x00-0x7F, blanks, control characters and DEL included), signs, points and exponents, into
every integral type and decimals, with ANSI on and off; and on a column with a collation. It only
saves the exception `try_cast` throws and catches inside."""

from __future__ import annotations

import pytest

from dbt.adapters.spark_contracts.core.contracts.checked_cast import not_a_number, try_cast_sql
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.schema.types import Primitive, quote_identifier, sql_string

TAILS = ("", "1", "12.5", "e3", "1e3", "0", " 7 ", "5e1", "E2")
SAMPLES = sorted(
    {chr(c) + tail for c in range(0x00, 0x80) for tail in TAILS}
    | {"", " 1", "\t2", "\n3 ", "+", "-", ".", ".5", "1.", "\u00a01", "\u30001", "１", "0x10"}
    | {"\x7f5", "\x005", "1e3", ".5e1", "+1E2", "-2.5e-1", "ſ1", "K1"}
)
TARGETS = ("tinyint", "smallint", "int", "bigint", "decimal(10,2)", "decimal(38,0)")


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_the_fast_answer_is_try_casts_answer(project, ansi):
    table = f"{project.test_schema}.nan_samples"
    project.run_sql(f"create table {table} (s string) using parquet")
    values = ", ".join(f"({sql_string(s)})" for s in SAMPLES)
    # run_sql formats its text: the samples' braces are doubled
    project.run_sql(f"insert into {table} values {values}".replace("{", "{{").replace("}", "}}"))
    project.run_sql(f"set spark.sql.ansi.enabled = {ansi}")
    try:
        ref, text = quote_identifier("s"), Primitive("string")
        pairs = []
        for i, target in enumerate(TARGETS):
            guarded = try_cast_sql(ref, text, parse_type(target))
            assert not_a_number(ref) in guarded  # the fast answer is in the SQL under test
            pairs.append(f"try_cast(s as {target}) as plain_{i}, {guarded} as fast_{i}")
        # one query for every target (each statement costs a round trip)
        rows = project.run_sql(
            f"select s, {', '.join(pairs)}, {not_a_number(ref)} as answered from {table}",
            fetch="all",
        )
        assert len(rows) == len(SAMPLES)
        for i, target in enumerate(TARGETS):
            differ = [
                (r[0], r[1 + 2 * i], r[2 + 2 * i]) for r in rows if r[1 + 2 * i] != r[2 + 2 * i]
            ]
            assert differ == [], f"{target}, ansi {ansi}"
        # the fast answer answers most samples: the test covers the path it takes
        assert sum(1 for r in rows if r[-1]) > len(SAMPLES) // 2
    finally:
        project.run_sql("reset spark.sql.ansi.enabled")
        project.run_sql(f"drop table if exists {table}")


def test_a_collated_column_takes_the_fast_answer(project):
    """Spark 4 columns may carry a collation; the fast answer (`ascii()`) takes any. (`s` is
    read back in the default collation: Spark's Thrift server returns a collated string JSON
    quoted.)"""
    ref = quote_identifier("s")
    guarded = try_cast_sql(ref, Primitive("string"), parse_type("bigint"))
    rows = project.run_sql(
        f"select cast(s as string collate utf8_binary), {guarded} as fast from "
        "(select cast(s as string collate unicode_ci) as s "
        "from (select explode(array('12', 'n/a', ' 7', 'x1')) as s))",
        fetch="all",
    )
    assert sorted((r[0], r[1]) for r in rows) == [
        (" 7", 7),
        ("12", 12),
        ("n/a", None),
        ("x1", None),
    ]
