"""The fault-injection point (connection/failpoint.py): a run stops itself before the write a
test names, by its number or by how its text starts."""

from __future__ import annotations

import signal

import pytest

from dbt.adapters.spark_contracts.connection import failpoint


@pytest.fixture
def stops(monkeypatch: pytest.MonkeyPatch) -> list:
    sent: list = []
    monkeypatch.setattr(failpoint, "_COUNTER", failpoint._Counter())
    monkeypatch.setattr(failpoint.os, "kill", lambda pid, sig: sent.append(sig))
    return sent


COMMENT = '/* {"app": "dbt", "node_id": "model.p.m"} */ '


def test_stops_before_the_first_write_whose_text_starts_so(monkeypatch, stops):
    monkeypatch.setenv(failpoint.STOP_BEFORE_ENV, "sql:update iceberg.s.m ")
    failpoint.before_statement(COMMENT + "ALTER TABLE iceberg.s.m ADD COLUMNS (x INT)")
    failpoint.before_statement(COMMENT + "select * from iceberg.s.m")  # a read: never
    failpoint.before_statement(COMMENT + "update iceberg.s.m_2 set x = 1")  # another table
    assert stops == []
    failpoint.before_statement(COMMENT + "UPDATE  iceberg.s.m SET `x` = id * 10")
    assert stops == [signal.SIGSTOP]
    failpoint.before_statement(COMMENT + "UPDATE iceberg.s.m SET `x` = 1")  # once only
    assert stops == [signal.SIGSTOP]


def test_stops_before_the_nth_write(monkeypatch, stops):
    monkeypatch.setenv(failpoint.STOP_BEFORE_ENV, "2")
    failpoint.before_statement("insert into s.m values (1)")
    failpoint.after_statement("insert into s.m values (1)")
    assert stops == []
    failpoint.before_statement("update s.m set x = 1")
    assert stops == [signal.SIGSTOP]
