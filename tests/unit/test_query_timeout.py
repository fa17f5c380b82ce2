"""`query_timeout` on the embedded session, without Spark: the profile value, the deadline that
cancels a statement's jobs, and the cursor turning the failure of a statement past its deadline
into QueryTimeoutError (a fake SparkContext stands in for Spark's job tags)."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.connection.credentials import SparkContractsCredentials
from dbt.adapters.spark_contracts.connection.cursor import SparkSessionCursor
from dbt.adapters.spark_contracts.connection.errors import QueryTimeoutError, to_dbt_error
from dbt.adapters.spark_contracts.core.settings.config import ConfigError
from dbt.adapters.spark_contracts.core.settings.deadline import (
    StatementDeadline,
    query_timeout_seconds,
    timeout_message,
)


@pytest.mark.parametrize("value, seconds", [(None, None), (2, 2.0), (0.5, 0.5)])
def test_query_timeout_seconds(value: Any, seconds: Optional[float]) -> None:
    assert query_timeout_seconds(value) == seconds


@pytest.mark.parametrize("value", [0, -1, True, "2"])
def test_query_timeout_must_be_seconds_more_than_zero(value: Any) -> None:
    with pytest.raises(ConfigError, match="query_timeout"):
        query_timeout_seconds(value)


def test_profile_refuses_a_zero_query_timeout() -> None:
    data = SparkContractsCredentials.translate_aliases({"schema": "s", "query_timeout": 0})
    SparkContractsCredentials.validate(data)
    with pytest.raises(DbtRuntimeError, match="query_timeout: 0; allowed: seconds, more than 0"):
        SparkContractsCredentials.from_dict(data)


def test_timeout_message_names_the_key_and_the_method() -> None:
    assert timeout_message(2.0, "session") == (
        "Query exceeded timeout of 2 seconds (query_timeout, method: session); its Spark jobs were cancelled"
    )
    assert "of 1.5 seconds" in timeout_message(1.5, "session")


def test_query_timeout_error_is_kept_by_the_connection_manager() -> None:
    error = QueryTimeoutError(2, "session")
    assert isinstance(error, DbtRuntimeError)
    assert to_dbt_error(error) is error


def test_deadline_not_reached_never_cancels() -> None:
    calls: List[float] = []
    with StatementDeadline(5, lambda: calls.append(time.monotonic())) as deadline:
        pass
    assert not deadline.fired and calls == []


def test_deadline_cancels_then_repeats_until_the_statement_ends() -> None:
    calls: List[float] = []
    start = time.monotonic()
    with StatementDeadline(0.1, lambda: calls.append(time.monotonic()), repeat=0.02) as deadline:
        time.sleep(0.3)
    assert deadline.fired
    assert calls[0] - start >= 0.1
    assert len(calls) >= 3  # jobs started after the first cancel are cancelled too
    count = len(calls)
    time.sleep(0.05)
    assert len(calls) == count  # nothing after the statement ended


def test_deadline_keeps_failed_cancels_for_the_caller() -> None:
    def cancel() -> None:
        raise RuntimeError("no such tag")

    with StatementDeadline(0, cancel, repeat=1) as deadline:
        time.sleep(0.05)
    assert deadline.fired
    assert [str(e) for e in deadline.cancel_errors] == ["no such tag"]


class FakeContext:
    """SparkContext's job tags and local properties (of one thread, as in pinned-thread mode);
    a job runs until its tag is cancelled or `seconds` pass."""

    def __init__(self) -> None:
        self.tags: set = set()
        self.properties: Dict[str, Optional[str]] = {}
        self.cancelled: set = set()

    def addJobTag(self, tag: str) -> None:
        self.tags.add(tag)

    def removeJobTag(self, tag: str) -> None:
        self.tags.discard(tag)

    def setInterruptOnCancel(self, value: bool) -> None:
        self.properties["spark.job.interruptOnCancel"] = str(value).lower()

    def getLocalProperty(self, key: str) -> Optional[str]:
        return self.properties.get(key)

    def setLocalProperty(self, key: str, value: Optional[str]) -> None:
        self.properties[key] = value

    def cancelJobsWithTag(self, tag: str) -> None:
        self.cancelled.add(tag)

    def job(self, seconds: float) -> str:
        if self.tags:  # a statement with a deadline interrupts its tasks when cancelled
            assert self.properties.get("spark.job.interruptOnCancel") == "true"
        tags = set(self.tags)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if tags & self.cancelled:
                raise RuntimeError("[SPARK_JOB_CANCELLED] Job 0 cancelled")
            time.sleep(0.01)
        return "done"


class FakeSession:
    def __init__(self, seconds: float) -> None:
        self.sparkContext = FakeContext()
        self.seconds = seconds

    def sql(self, sql: str) -> str:
        return self.sparkContext.job(self.seconds)


def _cursor(session: FakeSession, timeout: Optional[float]) -> SparkSessionCursor:
    return SparkSessionCursor(lambda: session, timeout)


def test_statement_past_its_timeout_fails_with_query_timeout_error() -> None:
    session = FakeSession(seconds=5)
    start = time.monotonic()
    with pytest.raises(QueryTimeoutError, match="Query exceeded timeout of 0.1 seconds") as info:
        _cursor(session, 0.1).execute("select slow")
    assert time.monotonic() - start < 2
    assert "SPARK_JOB_CANCELLED" in str(info.value.__cause__)
    # the thread's tags and interrupt setting are as before the statement
    assert session.sparkContext.tags == set()
    assert session.sparkContext.properties["spark.job.interruptOnCancel"] is None


def test_statement_within_its_timeout_runs() -> None:
    session = FakeSession(seconds=0.05)
    cursor = _cursor(session, 5)
    cursor.execute("select quick")
    assert cursor._df == "done"
    assert session.sparkContext.cancelled == set()


def test_an_error_before_the_deadline_stays_what_it_was() -> None:
    session = FakeSession(seconds=0)
    session.sql = lambda sql: (_ for _ in ()).throw(ValueError("bad"))  # type: ignore[method-assign]
    with pytest.raises(ValueError, match="bad"):
        _cursor(session, 5).execute("select bad")


def test_no_timeout_sets_no_tag() -> None:
    session = FakeSession(seconds=0)
    _cursor(session, None).execute("select 1")
    assert session.sparkContext.properties == {}


def test_connect_warns_when_the_profile_loads_that_query_timeout_is_not_applied(
    monkeypatch,
) -> None:
    from dbt.adapters.spark_contracts.connection import credentials as creds_module

    warnings: List[str] = []
    monkeypatch.setattr(creds_module.logger, "warning", warnings.append)
    creds_module.SparkContractsCredentials(
        method="connect", host="sc://localhost", schema="s", query_timeout=30
    )
    creds_module.SparkContractsCredentials(method="connect", host="sc://localhost", schema="s")
    assert warnings == [
        "query_timeout: 30 is not applied on method connect: statements run until they end "
        "(it applies on method session, thrift and http)"
    ]
