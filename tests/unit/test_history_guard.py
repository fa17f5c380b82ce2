"""core/recovery/history_guard.py: an Iceberg ALTER sent as a script that runs it only while the
table's history is the one the run read before its fence (its effect on real Iceberg:
test_kill.py::TestLateIcebergDropColumns)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.connection import failpoint
from dbt.adapters.spark_contracts.core.recovery.history_guard import (
    SHOWN,
    fingerprint,
    guarded,
    guards_load,
    inner,
    read_sql,
)
from dbt.adapters.spark_contracts.core.recovery.statements import changes_something

T = "iceberg.analytics.m"
DROP = f"alter table {T} drop columns (`gone`)"
COMMENT = '/* {"app": "dbt", "node_id": "model.p.m"} */\n'


def test_the_script_checks_the_history_read_then_sends_the_statement_or_fails():
    script = guarded(DROP, T, "4:-123")
    assert script.startswith(f"BEGIN\n  REFRESH TABLE {T};\n")  # the server's cache refreshed
    check = f"IF {fingerprint(T)} <=> '4:-123' THEN\n    {DROP}\n    ;\n  ELSE\n"
    assert check in script
    assert "SELECT raise_error(" in script.split("ELSE", 1)[1]  # else: nothing sent
    assert f"not sent: {DROP}" in script  # the error names the statement
    assert script.rstrip().endswith("END IF;\nEND")


def test_the_fingerprint_hashes_each_history_entry_and_compares_no_time():
    read = read_sql(T)
    assert read == f"SELECT {fingerprint(T)} AS fingerprint"
    assert f"FROM {T}.history" in read
    assert "xxhash64(snapshot_id, made_current_at)" in read and "count(*)" in read
    assert "<" not in read and ">" not in read  # the entries' times are hashed, never ordered


def test_a_fingerprint_is_quoted_as_a_string():
    assert "<=> 'it\\'s' THEN" in guarded(DROP, T, "it's")


@given(st.text(alphabet="abcdefghij _`().,0123456789", min_size=1).map(str.strip))
def test_inner_finds_the_statement_a_script_carries_and_leaves_other_sql(tail):
    statement = f"alter table {T} add columns ({tail or 'x'} int)"
    assert inner(guarded(statement, T, "1:2")) == statement
    assert inner(COMMENT + guarded(statement, T, "1:2")) == statement
    assert inner(statement) == statement


def test_a_script_is_a_write_and_a_stop_by_text_finds_its_alter(monkeypatch):
    """Fault injection counts the script as one write and stops before it by the ALTER's text."""
    stops: list = []
    monkeypatch.setattr(failpoint, "_COUNTER", failpoint._Counter())
    monkeypatch.setattr(failpoint.signal, "pthread_kill", lambda _t, sig: stops.append(sig))
    monkeypatch.setenv(failpoint.STOP_BEFORE_ENV, f"sql:alter table {T} drop columns")
    script = COMMENT + guarded(DROP, T, "1:2")
    assert changes_something(script)
    failpoint.before_statement(COMMENT + f"refresh table {T}")  # a read
    failpoint.before_statement(COMMENT + read_sql(T))
    assert stops == []
    failpoint.before_statement(script)
    assert len(stops) == 1


REPLACE = f"create or replace table {T} using iceberg as\nselect * from {T}__dbt_tmp"


def test_a_long_statement_is_shown_in_part_and_carried_whole():
    """A rebuild's replace carries the model's whole SELECT: the guard's error shows its first
    `SHOWN` characters; the script carries it whole (and `inner` finds it whole)."""
    long = REPLACE + " where " + " or ".join(f"id = {i}" for i in range(200))
    assert len(long) > SHOWN
    script = guarded(long, T, "4:-123")
    message = script.split("raise_error(", 1)[1]
    assert f"not sent: {long[:SHOWN]} ..." in message and long not in message
    assert inner(script) == long
    assert inner(guarded(REPLACE, T, "1:2")) == REPLACE
    assert f"not sent: {REPLACE}'" in guarded(REPLACE, T, "1:2")  # a short one whole


def test_a_statement_ending_in_a_line_comment_still_ends():
    """The script's `;` after the statement stands on a line of its own: a statement whose last
    line is a `--` comment (a model's SQL can end so) does not comment it out."""
    commented = REPLACE + " -- the model's last line"
    script = guarded(commented, T, "1:2")
    assert f"{commented}\n    ;\n  ELSE" in script
    assert inner(script) == commented


@given(st.booleans(), st.booleans(), st.booleans())
def test_only_a_rebuilds_replace_of_the_deployed_table_under_a_lease_is_guarded(
    rebuilds, replaces, leased
):
    assert guards_load(rebuilds, replaces, leased) == (rebuilds and replaces and leased)
