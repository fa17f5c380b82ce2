"""Reading observed metrics (cursor._observed) without Spark: a scripted JVM observation."""

from __future__ import annotations

from dbt.adapters.spark_contracts.connection.cursor import _observed


class Future:
    def __init__(self, done_after: int):
        self.polls, self.done_after = 0, done_after

    def isCompleted(self):  # noqa: N802 - the JVM's name
        self.polls += 1
        return self.polls > self.done_after


class Row:
    def __init__(self, *values):
        self.values = values

    def size(self):
        return len(self.values)

    def get(self, i):
        return self.values[i]


class Observation:
    def __init__(self, future, row):
        self._jo = self
        self._future, self._row = future, row

    def future(self):
        return self._future

    def getRow(self):  # noqa: N802
        return self._row


NAMES = ["rows_discarded", "values_discarded"]


def test_metrics_are_read_by_position_once_delivered():
    got = _observed(Observation(Future(3), Row(5, 2)), NAMES, timeout=5)
    assert got == {"rows_discarded": 5, "values_discarded": 2}


def test_a_plan_read_without_running_gives_no_metrics():
    assert _observed(Observation(Future(0), Row()), NAMES, timeout=5) is None


def test_metrics_never_delivered_time_out():
    assert _observed(Observation(Future(10**9), Row(1, 1)), NAMES, timeout=0.05) is None
