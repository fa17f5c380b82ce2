"""Microbatch incremental models on real Spark, Delta and Iceberg: each batch replaces exactly its
event_time window in one commit; a rerun of one batch replaces only that window; the schema
contract holds per batch (a violating batch fails alone, the table as before it); a new column
arrives under `columns: evolve`; the model's query runs once per batch.

`events` holds four rows a day, 2020-01-01 .. 2020-01-04 (ids 0-3, 4-7, 8-11, 12-15)."""

from __future__ import annotations

import pytest
from dbt.exceptions import ParsingError
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.evolution.test_evolution_matrix import schema_of

EVENTS = """
{{ config(materialized='table', event_time='event_time') }}
select id, timestamp_seconds(1577836800 + id * 21600) as event_time from range(0, 16)
"""

# `extra_day`: the batches from that day on output one more column
MICROBATCH = """
{{{{ config(materialized='incremental', incremental_strategy='microbatch', file_format='{fmt}',
    event_time='event_time', batch_size='day', begin=modules.datetime.datetime(2020, 1, 1)
    {config}) }}}}
select {id_expr} as id, event_time, '{{{{ var("tag", "v1") }}}}' as tag
{{% if model.batch and model.batch.event_time_start.day >= var('extra_day', 99) %}}
  , 1 as extra
{{% endif %}}
from {{{{ ref('events') }}}}
"""


def microbatch_model(fmt: str, config: str = "", id_expr: str = "id") -> str:
    return MICROBATCH.format(fmt=fmt, config=config, id_expr=id_expr)


def window(start: str, end: str, *args: str) -> list[str]:
    return ["run", "--event-time-start", start, "--event-time-end", end, *args]


def relation(project, fmt: str, name: str) -> str:
    schema = project.test_schema
    return f"iceberg.{schema}.{name}" if fmt == "iceberg" else f"{schema}.{name}"


def commits(project, fmt: str, rel: str) -> list[dict]:
    """The table's commits, oldest first: Delta's history, Iceberg's snapshots."""
    if fmt == "delta":
        rows = project.run_sql(f"describe history {rel}", fetch="all")
        return [{"operation": r[4], "parameters": dict(r[5] or {})} for r in reversed(rows)]
    rows = project.run_sql(
        f"select operation, summary from {rel}.snapshots order by committed_at", fetch="all"
    )
    return [{"operation": r[0], "summary": dict(r[1] or {})} for r in rows]


def by_id(project, rel: str, cols: str = "id, tag") -> dict[int, tuple]:
    rows = project.run_sql(f"select {cols} from {rel}", fetch="all")
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)), f"duplicate rows in {rel}: {sorted(ids)}"
    return {r[0]: tuple(r[1:]) for r in rows}


def day(n: int) -> range:
    """The ids of events on 2020-01-0<n>."""
    return range((n - 1) * 4, n * 4)


class BaseMicrobatchWindows:
    fmt = "delta"

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "events.sql": EVENTS,
            "mb.sql": microbatch_model(self.fmt),
            "mb_freeze.sql": microbatch_model(self.fmt, ", schema_contract={'columns': 'freeze'}"),
            "mb_evolve.sql": microbatch_model(self.fmt, ", schema_contract={'columns': 'evolve'}"),
        }

    @pytest.fixture(scope="class", autouse=True)
    def events(self, project):
        run_dbt(["run", "--select", "events"])

    def test_backfill_replaces_each_window(self, project):
        rel = relation(project, self.fmt, "mb")
        run_dbt(window("2020-01-01", "2020-01-02", "--select", "mb"))  # creates it: day 1, v1
        assert by_id(project, rel) == {i: ("v1",) for i in day(1)}
        # a row outside every window the backfill replaces
        project.run_sql(f"insert into {rel} values (100, timestamp'2019-12-31 12:00:00', 'kept')")
        before = len(commits(project, self.fmt, rel))

        results = run_dbt(window("2020-01-01", "2020-01-04", "--select", "mb", "--vars", "tag: v2"))
        assert [len(r.batch_results.successful) for r in results] == [3]

        expected = {i: ("v2",) for d in (1, 2, 3) for i in day(d)}
        assert by_id(project, rel) == {**expected, 100: ("kept",)}
        new = commits(project, self.fmt, rel)[before:]
        assert len(new) == 3, new  # one commit per batch
        days = ["2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04"]
        self.assert_window_commits(new, list(zip(days, days[1:], strict=False)), [4, 0, 0])

    def test_rerun_one_batch_replaces_only_its_window(self, project):
        rel = relation(project, self.fmt, "mb")
        before = len(commits(project, self.fmt, rel))
        run_dbt(window("2020-01-02", "2020-01-03", "--select", "mb", "--vars", "tag: v3"))
        expected = {i: ("v3" if i in day(2) else "v2",) for d in (1, 2, 3) for i in day(d)}
        assert by_id(project, rel) == {**expected, 100: ("kept",)}
        new = commits(project, self.fmt, rel)[before:]
        assert len(new) == 1, new
        self.assert_window_commits(new, [("2020-01-02", "2020-01-03")], [4])

    def assert_window_commits(self, new: list[dict], windows: list[tuple], replaced: list[int]):
        """Delta: each commit a replaceWhere of its batch's window; Iceberg: each snapshot adds
        the batch's four rows and deletes the window's previous rows, nothing else."""
        for commit, (start, end), deleted in zip(new, windows, replaced, strict=True):
            if self.fmt == "delta":
                assert commit["operation"] == "WRITE", commit
                predicate = commit["parameters"]["predicate"]
                assert f">= TIMESTAMP '{start} 00:00:00'" in predicate, predicate
                assert f"< TIMESTAMP '{end} 00:00:00'" in predicate, predicate
                assert commit["parameters"]["mode"] == "Overwrite", commit
            else:
                summary = commit["summary"]
                assert int(summary.get("added-records", 0)) == 4, summary
                assert int(summary.get("deleted-records", 0)) == deleted, summary

    def test_freeze_violation_fails_only_that_batch(self, project):
        rel = relation(project, self.fmt, "mb_freeze")
        run_dbt(window("2020-01-01", "2020-01-04", "--select", "mb_freeze"))
        columns = schema_of(project, rel)
        before = len(commits(project, self.fmt, rel))

        args = window("2020-01-01", "2020-01-04", "--select", "mb_freeze")
        results = run_dbt([*args, "--vars", "{tag: v2, extra_day: 3}"], expect_pass=False)
        batches = results[0].batch_results
        assert (len(batches.successful), len(batches.failed)) == (2, 1), batches
        assert str(results[0].status) == "partial success", results[0].status

        # batch 3 left the table as it was before it: day 3 still v1, no new column
        expected = {i: ("v1" if i in day(3) else "v2",) for d in (1, 2, 3) for i in day(d)}
        assert by_id(project, rel) == expected
        assert schema_of(project, rel) == columns
        assert len(commits(project, self.fmt, rel)) == before + 2

    def test_evolve_adds_the_column_in_its_batch(self, project):
        rel = relation(project, self.fmt, "mb_evolve")
        run_dbt(window("2020-01-01", "2020-01-04", "--select", "mb_evolve"))
        before = len(commits(project, self.fmt, rel))

        args = window("2020-01-01", "2020-01-04", "--select", "mb_evolve")
        results = run_dbt([*args, "--vars", "{tag: v2, extra_day: 2}"])
        assert len(results[0].batch_results.successful) == 3
        assert "extra" in schema_of(project, rel)
        # batch 2 added the column, batch 3 wrote it too; batch 1 ran before it
        expected = {i: ("v2", None if i in day(1) else 1) for d in (1, 2, 3) for i in day(d)}
        assert by_id(project, rel, "id, tag, extra") == expected
        new = commits(project, self.fmt, rel)[before:]
        if self.fmt == "delta":  # the new column rode in batch 2's REPLACE WHERE: no ALTER
            assert [c["operation"] for c in new] == ["WRITE"] * 3, new
        else:  # Iceberg adds the column first (a schema change, no snapshot), then merges
            assert len(new) == 3, new


class TestMicrobatchDelta(BaseMicrobatchWindows):
    fmt = "delta"


class TestMicrobatchIceberg(BaseMicrobatchWindows):
    fmt = "iceberg"


CONTRACT_YML = """
version: 2
models:
  - name: mb_contract
    config:
      contract: {enforced: true}
    columns:
      - name: id
        data_type: bigint
      - name: event_time
        data_type: timestamp
      - name: tag
        data_type: string
"""


class TestMicrobatchEnforcedContract:
    """dbt's enforced model contract on a microbatch model (Delta): every batch of every run is
    checked; a batch whose output breaks it fails alone, before it writes, and the batches
    before it load. `on_schema_change='append_new_columns'`: without the contract, the breaking
    batch's new column would be added."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "events.sql": EVENTS,
            "mb_contract.sql": microbatch_model("delta", ", on_schema_change='append_new_columns'"),
            "schema.yml": CONTRACT_YML,
        }

    def test_each_batch_is_checked(self, project):
        rel = relation(project, "delta", "mb_contract")
        args = window("2020-01-01", "2020-01-05", "--select", "events", "mb_contract")
        run_dbt(args)
        assert by_id(project, rel) == {i: ("v1",) for i in range(16)}
        before = len(commits(project, "delta", rel))

        args = window("2020-01-01", "2020-01-04", "--select", "mb_contract")
        results, log = run_dbt_and_capture(
            [*args, "--vars", "{tag: v2, extra_day: 3}"], expect_pass=False
        )
        batches = results[0].batch_results
        assert (len(batches.successful), len(batches.failed)) == (2, 1), batches
        assert str(results[0].status) == "partial success", results[0].status
        assert "This model has an enforced contract that failed" in log, log[-3000:]
        # day 3's batch broke the contract (one more column) and wrote nothing
        expected = {i: ("v1" if i in day(3) or i in day(4) else "v2",) for i in range(16)}
        assert by_id(project, rel) == expected
        assert "extra" not in schema_of(project, rel)
        assert len(commits(project, "delta", rel)) == before + 2


class TestMicrobatchRefusals:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "events.sql": EVENTS,
            # rows outside the batch's window: the load fails, nothing is written
            "mb_outside.sql": microbatch_model("delta").replace(
                "event_time, '", "event_time + interval 3 days as event_time, '"
            ),
            "mb_outside_ice.sql": microbatch_model("iceberg").replace(
                "event_time, '", "event_time + interval 3 days as event_time, '"
            ),
        }

    def test_rows_outside_the_window_fail_the_batch(self, project):
        run_dbt(["run", "--select", "events"])
        for name, fmt in (("mb_outside", "delta"), ("mb_outside_ice", "iceberg")):
            rel = relation(project, fmt, name)
            project.run_sql(
                f"create table {rel} (id bigint, event_time timestamp, tag string) using {fmt}"
            )
            project.run_sql(f"insert into {rel} values (1, timestamp'2020-01-01 01:00:00', 'x')")
            before = len(commits(project, fmt, rel))
            _, log = run_dbt_and_capture(
                window("2020-01-01", "2020-01-02", "--select", name), expect_pass=False
            )
            assert "outside its batch window" in log, fmt
            assert by_id(project, rel) == {1: ("x",)}
            assert len(commits(project, fmt, rel)) == before


@pytest.mark.profile("session")  # counts evaluations in this process's SparkContext
class TestOneEvaluationPerBatch:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "events.sql": EVENTS,
            "mb_eval.sql": microbatch_model("delta", id_expr="probe_eval(id)"),
        }

    def test_each_batch_evaluates_its_rows_once(self, project, evaluations):
        run_dbt(["run", "--select", "events"])
        run_dbt(window("2020-01-01", "2020-01-02", "--select", "mb_eval"))
        before = evaluations()
        run_dbt(window("2020-01-01", "2020-01-04", "--select", "mb_eval", "--vars", "tag: v2"))
        assert evaluations() - before == 12  # three batches of four rows, each read once


PARQUET = """
{{ config(materialized='incremental', incremental_strategy='microbatch', file_format='parquet',
    partition_by=['d'], event_time='event_time', batch_size='day',
    begin=modules.datetime.datetime(2020, 1, 1)) }}
select id, event_time, '{{ var("tag", "v1") }}' as tag, to_date(event_time) as d
from {{ ref('events') }}
"""


class TestMicrobatchParquet:
    """dbt-spark's behaviour: each batch overwrites the partitions it writes (dynamic)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"events.sql": EVENTS, "mb_parquet.sql": PARQUET}

    def test_batches_overwrite_their_partitions(self, project):
        rel = f"{project.test_schema}.mb_parquet"
        run_dbt(["run", "--select", "events"])
        run_dbt(window("2020-01-01", "2020-01-04", "--select", "mb_parquet"))
        run_dbt(window("2020-01-02", "2020-01-03", "--select", "mb_parquet", "--vars", "tag: v2"))
        expected = {i: ("v2" if i in day(2) else "v1",) for d in (1, 2, 3) for i in day(d)}
        assert by_id(project, rel) == expected


class TestMicrobatchParquetNeedsPartitionBy:
    @pytest.fixture(scope="class")
    def models(self):
        return {"events.sql": EVENTS, "mb_no_partition.sql": microbatch_model("parquet")}

    def test_refused_at_parse_time(self, project):
        with pytest.raises(ParsingError) as info:
            run_dbt(["parse"])
        flat = " ".join(str(info.value).split())
        assert "model.test.mb_no_partition (models/mb_no_partition.sql)" in flat
        assert "microbatch on file_format parquet" in flat and "needs `partition_by`" in flat
