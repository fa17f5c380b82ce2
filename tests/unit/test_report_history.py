"""The schema history is queued per run and written once per invocation (RunReport)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from dbt.adapters.spark_contracts.core.evolution.operations import AddColumns, NewColumn
from dbt.adapters.spark_contracts.core.report.outcome import (
    history_insert_rows,
    history_rows,
)
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.run.report import RunReport

ADD = (AddColumns((NewColumn(("note",), parse_type("string")),)),)


def rows_of(model: str) -> tuple[str, ...]:
    return history_rows(model, "s.t", "inv", ADD, 2, 0, ("repaired",))


def test_rows_compose_into_one_insert():
    rows = rows_of("model.p.m")
    assert len(rows) == 3  # the change, the discards, the repair
    assert history_insert_rows("s.h", rows) == "INSERT INTO s.h VALUES " + ", ".join(rows)
    assert "'change', 'note', NULL, 'STRING'" in rows[0] and "'repaired'" in rows[2]
    assert history_rows("m", "s.t", "inv", (), None, None, ()) == ()


def test_history_of_many_threads_is_taken_once_per_table():
    report = RunReport()
    models = [f"model.p.m{i}" for i in range(40)]

    def queue(model: str) -> None:
        table = "s.h_a" if model.endswith(("0", "2", "4", "6", "8")) else "s.h_b"
        report.queue_history(table, "delta", rows_of(model))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(queue, models))
    taken = {table: rows for table, _, rows in report.take_history()}
    assert sorted(taken) == ["s.h_a", "s.h_b"]
    assert sum(len(rows) for rows in taken.values()) == 3 * len(models)
    assert all(
        any(f"'{m}'" in row for row in rows) for m in models for rows in [sum(taken.values(), ())]
    )
    assert report.take_history() == []  # taken once
