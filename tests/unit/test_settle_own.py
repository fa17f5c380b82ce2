"""A failed run's own pending table (run/quarantine_steps.Quarantine.settle_own) by format, when
its load got no final answer from Spark (`answered=False`: it may still commit). The Delta
branches, where the run fences its own load off first, are in the scripted fault matrix
(test_fault_matrix_pending.py); here the formats that cannot: nothing is dropped while the
table's own record does not show the load, whatever the run did before (restored or not)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, List

import pytest

from dbt.adapters.spark_contracts.core.materialization.build_plan import Build
from dbt.adapters.spark_contracts.core.recovery.pending import LogEntry
from dbt.adapters.spark_contracts.run import quarantine_steps
from dbt.adapters.spark_contracts.run.outcome_events import RunBook
from dbt.adapters.spark_contracts.run.quarantine_steps import Quarantine

TAG = "dbt-spark-contracts:inv-1:model.p.m"
PENDING = "db.m__quarantine__pending_inv1"


class Recording:
    """A Spark that records what it is sent; every listing finds no table (the table a
    creating run was to create is not there: no proof its CREATE will not come)."""

    def __init__(self) -> None:
        self.sent: List[str] = []

    def run(self, sql: str) -> Any:
        self.sent.append(sql)

    def fetch(self, sql: str) -> Any:
        self.sent.append(sql)
        return []


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> List[str]:
    said: List[str] = []
    logger = SimpleNamespace(warning=said.append, info=said.append, debug=said.append)
    monkeypatch.setattr(quarantine_steps, "logger", logger)
    return said


class Log:
    """An Iceberg table's log as the settling reads it (its snapshots, oldest first)."""

    def __init__(self, entries: List[LogEntry]) -> None:
        self._entries = entries

    def entries(self, relation: str) -> List[LogEntry]:
        return self._entries


def run_of(table_format: str, replace_by: Build = Build.EVOLVE) -> Any:
    return SimpleNamespace(
        unique_id="model.p.m",
        invocation_id="inv-1",
        batch_tag="",
        relation="db.m",
        table_format=table_format,
        commit_tag=TAG,
        replace_by=replace_by,
        quarantine_table="db.m__quarantine",
    )


def settle(
    table_format: str, restored: bool, log: List[LogEntry], replace_by: Build = Build.EVOLVE
) -> tuple:
    spark, book = Recording(), RunBook()
    book.state.pending = PENDING
    quarantine = Quarantine(spark, book, leases=SimpleNamespace())  # type: ignore[arg-type]
    quarantine.log = lambda fmt: Log(log)  # type: ignore[method-assign,assignment,return-value]
    run = run_of(table_format, replace_by)
    done = quarantine.settle_own(run, restored=restored, answered=False)
    return done, book.state.pending, [s for s in spark.sent if not s.startswith("show tables")]


@pytest.mark.parametrize("replace_by", [Build.EVOLVE, Build.CREATE])
@pytest.mark.parametrize("restored", [False, True])
@pytest.mark.parametrize("table_format", ["iceberg", "parquet"])
def test_a_load_without_an_answer_leaves_its_pending_rows(
    table_format: str, restored: bool, replace_by: Build, warnings: List[str]
):
    """Iceberg's log holds no load of the run yet; Parquet's property that would record it is
    one only the run sets; a creating run's table is not there yet: either way the load may
    still land, so the pending table stays (named on the run's state, which keeps its record),
    nothing is dropped, and the warning says why (not an error on the way)."""
    earlier = [LogEntry("someone-else", "append", 1, first=True)]
    done, pending, sent = settle(table_format, restored, earlier, replace_by)
    assert done is None and pending == PENDING and sent == []
    (said,) = warnings
    assert "gave no answer" in said and PENDING in said, said


def test_a_load_in_the_log_is_moved_even_without_an_answer():
    """Iceberg: the load is in the log (it committed before the answer was lost): its rows are
    moved as after any load (the move's own statements: not checked here)."""
    loaded = [LogEntry(TAG, "append", 7)]
    spark, book = Recording(), RunBook()
    book.state.pending = PENDING
    quarantine = Quarantine(spark, book, leases=SimpleNamespace())  # type: ignore[arg-type]
    quarantine.log = lambda fmt: Log(loaded)  # type: ignore[method-assign,assignment,return-value]
    moved: List[str] = []
    quarantine.move = lambda *args, **kwargs: moved.append(args[3]) or "moved"  # type: ignore[method-assign]
    done = quarantine.settle_own(run_of("iceberg"), restored=False, answered=False)
    assert done == "moved" and moved == [PENDING] and book.state.pending is None


@pytest.mark.parametrize("table_format", ["iceberg", "parquet"])
def test_the_control_a_refused_load_is_over_and_its_rows_dropped(table_format: str):
    """The same run whose load Spark refused (a final answer): no load of it can come, so its
    pending table is dropped at once."""
    spark, book = Recording(), RunBook()
    book.state.pending = PENDING
    quarantine = Quarantine(spark, book, leases=SimpleNamespace())  # type: ignore[arg-type]
    quarantine.log = lambda fmt: Log([])  # type: ignore[method-assign,assignment,return-value]
    done = quarantine.settle_own(run_of(table_format), restored=False, answered=True)
    assert done is not None and "dropped" in done and book.state.pending is None
    assert [s for s in spark.sent if s.startswith("drop table")] == [
        f"drop table if exists {PENDING}" + (" purge" if table_format == "iceberg" else "")
    ], spark.sent
