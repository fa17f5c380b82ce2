"""Which statements the fault-injection point numbers (core/recovery/statements.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.recovery.statements import (
    beat_sql,
    changes_something,
    is_beat,
)

COMMENT = '/* {"app": "dbt", "node_id": "model.x.y"} */\n'


def test_reads_settings_and_temporary_views_change_nothing() -> None:
    for sql in (
        "select 1",
        "  WITH a AS (select 1) select * from a",
        "show tables in s",
        "describe history s.t",
        "DESC s.t",
        "set spark.sql.x = 1",
        "create or replace temporary view v as select 1",
        "refresh table s.t",
        "",
        COMMENT + "select 1",
        "-- a comment\nshow tblproperties s.t",
    ):
        assert not changes_something(sql), sql


def test_writes_change_something() -> None:
    for sql in (
        "create table s.t using delta as select 1",
        "create or replace table s.t as select 1",
        "insert into s.t select 1",
        "merge into s.t using v on false when not matched then insert *",
        "alter table s.t set tblproperties ('a' = 'b')",
        "drop table if exists s.t",
        "drop view s.v",
        "delete from s.t where id = 1",
        "update s.t set a = 1",
        "restore table s.t to version as of 3",
        "call iceberg.system.rollback_to_snapshot('s.t', 1)",
        COMMENT + "insert into s.t select 1",
        "selective_table_name",  # a word that starts like a read is not one
    ):
        assert changes_something(sql), sql


@given(st.sampled_from(["select 1", "insert into t select 1"]), st.text(" \n\t", max_size=5))
def test_leading_space_and_dbts_comment_do_not_change_the_answer(sql: str, space: str) -> None:
    assert changes_something(space + COMMENT + space + sql) == changes_something(sql)


@given(
    st.from_regex(r"[a-z_]{1,8}\.[a-z_]{1,8}__dbt_lease_[0-9a-f]{4}", fullmatch=True),
    st.floats(min_value=0.001, max_value=4e9, allow_nan=False).map(lambda f: f"{f:.3f}"),
)
def test_a_beat_is_recognised_by_the_shape_that_builds_it(table: str, value: str) -> None:
    """One owner for the heartbeat's shape: whatever `beat_sql` builds, `is_beat` knows (after
    dbt's query comment, in any case); the release ("0") and any other property are not beats."""
    beat = beat_sql(table, value)
    assert is_beat(beat) and is_beat('/* {"app": "dbt"} */\n' + beat.upper())
    assert not is_beat(beat_sql(table, "0"))
    assert not is_beat(beat.replace("beat", "intent"))
    assert changes_something(beat)
