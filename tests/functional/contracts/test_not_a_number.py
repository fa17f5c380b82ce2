"""The load's fast answer for a text value that cannot be a number (core/checked_cast.py,
`NOT_A_NUMBER`) gives what `try_cast` gives, on real Spark, for every printable ASCII first
character and the blanks, signs and points Spark accepts, with ANSI on and off: the pattern only
saves the exception `try_cast` throws and catches inside."""

from __future__ import annotations

import pytest

from dbt.adapters.spark_contracts.core.checked_cast import try_cast_sql
from dbt.adapters.spark_contracts.core.parse import parse_type
from dbt.adapters.spark_contracts.core.types import Primitive, quote_identifier, sql_string

TAILS = ("", "1", "12.5", "e3", "1e3", "0", " 7 ")
SAMPLES = sorted(
    {chr(c) + tail for c in range(0x20, 0x7F) for tail in TAILS}
    | {"", " 1", "\t2", "\n3 ", "+", "-", ".", ".5", "1.", "\u00a01", "\u30001", "１", "0x10"}
)
TARGETS = ("tinyint", "int", "bigint", "decimal(10,2)", "decimal(38,0)")


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
        for target in TARGETS:
            guarded = try_cast_sql(ref, text, parse_type(target))
            assert "RLIKE" in guarded  # the fast answer is in the SQL under test
            rows = project.run_sql(
                f"select s, try_cast(s as {target}) as plain, {guarded} as fast from {table}",
                fetch="all",
            )
            assert len(rows) == len(SAMPLES)
            differ = [(r[0], r[1], r[2]) for r in rows if r[1] != r[2]]
            assert differ == [], f"{target}, ansi {ansi}"
            # the pattern answers for most samples: the test covers the path it takes
            fast = project.run_sql(
                f"select count_if(s rlike {guarded.split(' RLIKE ')[1].split(' THEN')[0]}) "
                f"from {table}",
                fetch="one",
            )[0]
            assert fast > len(SAMPLES) // 2
    finally:
        project.run_sql("reset spark.sql.ansi.enabled")
        project.run_sql(f"drop table if exists {table}")
