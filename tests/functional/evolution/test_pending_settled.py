"""Another run's pending table (core/recovery/pending.py) is settled by the next run of the model from the
model table's own log, on every connection method (`--profile`) and on delta and iceberg:

- a run that died after its load: its load (tagged in the table's log) stays, and its pending
  rows move into the quarantine (created again, if someone dropped it);
- a run that died before its load: the log reaches back before its pending table and holds no
  load of it, and the Spark application that ran its statements is gone (an embedded session's
  process that ended; a server restarted since), so its pending rows are dropped;
- the same, but its application may still be running a statement it sent (this very process;
  the server as it is now): its rows are kept, the load may commit yet;
- a run that died while creating the table (its pending table records no version: the table
  had none) and whose load is not in the table's log from its first commit on: dropped once its
  application is gone, kept while it may still run;
- a run whose lease is fresh may be alive: its pending table is left alone.

The dead runs are written by hand through the method under test (a tagged INSERT, the run's
record naming its pending table, and the pending table), as a run killed at that point leaves
them; some as builds before the run record left them (the bookkeeping on the pending table
itself), which are settled the same way. The real SIGKILL is in test_kill.py."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import List

import pytest
from dbt.adapters.exceptions.connection import InvalidConnectionError
from dbt.tests.util import run_dbt

from dbt.adapters.spark_contracts import run as runs
from dbt.adapters.spark_contracts.connection.spark_handle import _ConnectionSpark
from dbt.adapters.spark_contracts.core.recovery.manual import manual_move, rows_of_pending
from dbt.adapters.spark_contracts.core.recovery.pending import (
    APP_PROPERTY,
    BEAT_PROPERTY,
    RUN_PROPERTY,
    Application,
    Pending,
    loaded_property,
)
from dbt.adapters.spark_contracts.core.recovery.record import (
    PENDING_PROPERTY,
    SHARED_PROPERTY,
    pending_properties,
)
from dbt.adapters.spark_contracts.run.lease import LEASE_ENV, ModelKey, beat_sql
from dbt.adapters.spark_contracts.run.model_run import quarantine_format_for, stage_format
from dbt.adapters.spark_contracts.run.record_io import read_lease
from dbt.adapters.spark_contracts.run.report import RunReport
from dbt.adapters.spark_contracts.run.runner import Runner
from dbt.adapters.spark_contracts.run.settle import settle_pending
from tests.functional.probes import versioned_model

FORMATS = ("delta", "iceberg")


def model(fmt: str) -> str:
    return versioned_model(
        f"materialized='incremental', incremental_strategy='append', file_format='{fmt}', "
        "schema_contract={'data_type': 'discard_row', 'quarantine': true}",
        "select cast(id as int) as id, cast(id as bigint) as n from range(1, 2)",
        "select 2 as id, 'bad' as n union all select 3 as id, '3' as n",
    )


TAGGED_LOAD = """
{% macro tagged_load(table, key, tag) %}
  {% do run_query("set `" ~ key ~ "`=`" ~ tag ~ "`") %}
  {% do run_query("insert into " ~ table ~ " values (99, 99)") %}
  {% do run_query("reset `" ~ key ~ "`") %}
{% endmacro %}
"""


def tag(run: str, fmt: str) -> str:
    return f"dbt-spark-contracts:{run}:x:model.test.pm_{fmt}"


ENDED_PID = 4_194_999  # above Linux's highest pid: no process has it


def applications(project) -> tuple:
    """(gone, alive): an application that ran a dead run's statements and has ended since, and
    one that may still run them (the one this connection reaches now)."""
    with project.adapter.connection_named("__test_application"):
        here = _ConnectionSpark(project.adapter).application()
    if here.process() is not None:  # the embedded session: a process on this host that ended
        host = here.process()[0]
        return Application(f"session://{host}/{ENDED_PID}", "local-1"), here
    return Application(here.endpoint, here.app_id + "-before-a-restart"), here


def version_of(project, table: str, fmt: str) -> str:
    """The table's version now, as a run records it on its pending table ('' for parquet)."""
    if fmt == "delta":
        return str(project.run_sql(f"describe history {table} limit 1", fetch="one")[0])
    if fmt == "iceberg":
        project.run_sql(f"refresh table {table}")
        rows = project.run_sql(
            f"select snapshot_id from {table}.history where is_current_ancestor "
            "order by made_current_at desc limit 1",
            fetch="one",
        )
        return str(rows[0])
    return ""


def record_of(table: str, run: str) -> str:
    return f"{table}__dbt_lease_{run.replace('-', '')[:12]}"


def pending_of(table: str, run: str) -> str:
    return f"{table}__quarantine__pending_{run.replace('-', '')[:12]}"


def dead_run_sql(
    table: str,
    fmt: str,
    run: str,
    beat: float,
    row_id: int,
    app: Application | None = None,
    version: str = "",
    record: bool = True,
) -> List[str]:
    """What a quarantining run leaves before its load: its record (`record`; else, as builds
    before the record did, the same properties on the pending table), then its pending table."""
    says = {RUN_PROPERTY: run, BEAT_PROPERTY: str(beat)}
    says.update(pending_properties(pending_of(table, run), tag(run, fmt), version or None))
    if record:
        says[SHARED_PROPERTY] = "true"
    else:  # earlier builds: the table itself is the record, it names no other
        del says[PENDING_PROPERTY]
    if app is not None:
        says[APP_PROPERTY] = app.to_property()
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in says.items())
    rows = (
        f"select {row_id} as id, 'bad' as n, 'n: does not cast' as _contract_reason, "
        f"'{run}' as _dbt_run_id"
    )
    fmt_of = stage_format(fmt)
    if not record:
        return [
            f"create table {pending_of(table, run)} using {fmt_of} tblproperties ({properties}) as {rows}"
        ]
    return [
        f"create table {record_of(table, run)} (lease int) using {quarantine_format_for(fmt)} "
        f"tblproperties ({properties})",
        f"create table {pending_of(table, run)} using {fmt_of} as {rows}",
    ]


class TestPendingSettled:
    @pytest.fixture(scope="class")
    def macros(self):
        return {"tagged_load.sql": TAGGED_LOAD}

    @pytest.fixture(scope="class")
    def models(self):
        return {f"pm_{fmt}.sql": model(fmt) for fmt in (*FORMATS, "parquet")}

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_the_next_run_settles_dead_runs_and_leaves_live_ones(self, project, fmt, monkeypatch):
        monkeypatch.setenv(LEASE_ENV, "4")  # a lease that is not renewed runs out this soon
        schema = project.test_schema
        table = f"iceberg.{schema}.pm_{fmt}" if fmt == "iceberg" else f"{schema}.pm_{fmt}"
        run_dbt(["run", "--select", f"pm_{fmt}"])
        key = runs.DELTA_USER_METADATA if fmt == "delta" else runs.ICEBERG_SNAPSHOT_TAG

        def write(statements: List[str]) -> None:
            for statement in statements:
                project.run_sql(statement)

        # died after its load: the load's commit carries its tag, its rows wait in a pending table
        write(dead_run_sql(table, fmt, "dead-after-load", 0, 98))
        args = {"table": table, "key": key, "tag": tag("dead-after-load", fmt)}
        run_dbt(["run-operation", "tagged_load", "--args", str(args)])  # one session
        # died before its load (made at the table's version now, which its log holds), its
        # application gone; and one whose application may still run what it sent
        gone, alive = applications(project)
        version = version_of(project, table, fmt)
        write(dead_run_sql(table, fmt, "dead-before-load", 0, 97, gone, version))
        write(dead_run_sql(table, fmt, "app-alive", 0, 95, alive, version, record=False))
        # died while creating the table (no version recorded): another run created it since
        write(dead_run_sql(table, fmt, "dead-creating", 0, 94, gone, record=False))
        write(dead_run_sql(table, fmt, "creating-live", 0, 93, alive))
        # alive: its run renews its lease while the next run watches it (a thread beats it)
        write(dead_run_sql(table, fmt, "alive-run", 1, 96, None, version))
        # died after moving its rows, before dropping its record: the record names no table
        project.run_sql(dead_run_sql(table, fmt, "moved-rows", 0, 92)[0])
        alive_table = record_of(table, "alive-run")
        stop, ready = threading.Event(), threading.Event()
        adapter = project.adapter  # looked up here: `run_dbt` registers the adapter afresh

        def beat() -> None:
            with adapter.connection_named("__beats"):
                spark = _ConnectionSpark(adapter)
                spark.run(beat_sql(alive_table))
                ready.set()
                while not stop.wait(0.5):
                    try:
                        spark.run(beat_sql(alive_table))
                    except InvalidConnectionError:  # dbt's cleanup at the run's end took it
                        return  # (beats stopping earlier fail the test: alive-run repaired)

        beating = threading.Thread(target=beat, daemon=True)
        beating.start()
        assert ready.wait(60), "the live run's heartbeat did not start"

        def ids(t: str) -> list:
            return [r[0] for r in project.run_sql(f"select id from {t} order by id", fetch="all")]

        try:
            results = run_dbt(["run", "--select", f"pm_{fmt}", "--vars", "{v: 2}"])
        finally:
            stop.set()
            beating.join(timeout=30)
        repairs = results[0].adapter_response.get("repairs") or []
        assert any("dead-after-load" in r and "moved" in r for r in repairs), repairs
        assert any("dead-before-load" in r and "dropped" in r for r in repairs), repairs
        assert any("dead-creating" in r and "dropped" in r for r in repairs), repairs
        assert not any(w in r for w in ("alive-run", "app-alive", "creating-live") for r in repairs)
        assert ids(table) == [1, 3, 99]  # the dead run's finished load stays
        assert ids(f"{table}__quarantine") == [2, 98]  # its rows once, none of the other dead run
        tables = [
            r[1] for r in project.run_sql(f"show tables in {table.rsplit('.', 1)[0]}", fetch="all")
        ]
        left = sorted(t for t in tables if "__pending_" in t)
        kept = ("aliverun", "appalive", "creatinglive")
        assert left == [f"pm_{fmt}__quarantine__pending_{r}" for r in kept], left
        records = sorted(t for t in tables if "__dbt_lease_" in t)  # of those kept, no other
        assert records == [f"pm_{fmt}__dbt_lease_{r}" for r in ("aliverun", "creatinglive")]

    @pytest.mark.parametrize("fmt", (*FORMATS, "parquet"))
    def test_two_runs_settling_one_dead_run_at_once_move_its_rows_once(
        self, project, fmt, tmp_path
    ):
        """Two runs find the same dead run's pending table, its load in the table's record, at
        the same moment. Each settles only while it holds the model's lease alone, so one moves
        the rows and the other finds the pending table gone (or, on Delta and Iceberg, the MERGE
        that inserts only where the quarantine holds no row of that run backs this up). The
        rows are there once, also on Parquet, which has no conflict check."""
        schema = project.test_schema
        table = f"iceberg.{schema}.pm_{fmt}" if fmt == "iceberg" else f"{schema}.pm_{fmt}"
        run_dbt(["run", "--select", f"pm_{fmt}"])
        dead = "dead-twice"
        # Parquet's rows are moved for a run whose application is provably gone only (its
        # own move, which nothing fences off, may still land otherwise)
        gone = applications(project)[0] if fmt == "parquet" else None
        for statement in dead_run_sql(table, fmt, dead, 0, 90, gone):
            project.run_sql(statement)
        if fmt == "parquet":  # no log: the load recorded on the table, as a run does it
            project.run_sql(f"insert into {table} values (99, 99)")
            project.run_sql(
                f"alter table {table} set tblproperties "
                f"('{loaded_property(dead)}' = '{tag(dead, fmt)}')"
            )
        else:
            key = runs.DELTA_USER_METADATA if fmt == "delta" else runs.ICEBERG_SNAPSHOT_TAG
            args = {"table": table, "key": key, "tag": tag(dead, fmt)}
            run_dbt(["run-operation", "tagged_load", "--args", str(args)])
        pending, record = pending_of(table, dead), record_of(table, dead)
        quarantine = f"{table}__quarantine"
        start = threading.Barrier(2)

        def settle(i: int) -> list:
            with project.adapter.connection_named(f"__settler_{i}"):
                runner = Runner(_ConnectionSpark(project.adapter), RunReport(), tmp_path)
                start.wait()
                key = ModelKey(table, f"settler{i}", fmt, f"s{i}")
                found = read_lease(runner.spark, record)
                records = [found] if found is not None else []
                return settle_pending(
                    runner.spark, runner.leases, runner.book, key, quarantine, records, [pending]
                )

        with ThreadPoolExecutor(2) as pool:
            done = list(pool.map(settle, (1, 2)))
        assert any(done), done  # at least one of them settled it
        held = project.run_sql(
            f"select id from {quarantine} where _dbt_run_id = '{dead}'", fetch="all"
        )
        assert [r[0] for r in held] == [90], held

    @pytest.mark.parametrize("beat", ("1", "0"), ids=("ran-out", "released"))
    def test_a_parquet_run_that_may_still_move_its_rows_is_kept_until_it_let_go(
        self, project, monkeypatch, beat
    ):
        """A Parquet quarantining run that recorded its load, its application not provably
        gone. Its lease ran out (a stalled run: never renewed while the next run watched it):
        its own move into the quarantine may still land, and a Parquet quarantine could
        neither fence it off nor take it as a no-op, so the next run keeps its pending table
        and moves nothing. The statements by hand its warning names insert nothing twice when
        that run's move landed meanwhile. Released instead (the run failed after its load and
        let go, or a person made sure it is over): the next run moves the rows, once."""
        monkeypatch.setenv(LEASE_ENV, "4")  # a lease that is not renewed runs out this soon
        schema = project.test_schema
        table = f"{schema}.pm_parquet"
        run_dbt(["run", "--select", "pm_parquet"])
        stalled = f"p{beat}-stalled"  # its record and pending table named apart per case
        alive = applications(project)[1]
        for statement in dead_run_sql(table, "parquet", stalled, float(beat), 91, alive):
            project.run_sql(statement)
        project.run_sql(f"insert into {table} values (91, 91)")
        project.run_sql(
            f"alter table {table} set tblproperties "
            f"('{loaded_property(stalled)}' = '{tag(stalled, 'parquet')}')"
        )
        results = run_dbt(["run", "--select", "pm_parquet", "--vars", "{v: 2}"])
        repairs = results[0].adapter_response.get("repairs") or []
        quarantine, pending = f"{table}__quarantine", pending_of(table, stalled)

        def held() -> list:
            return project.run_sql(
                f"select id from {quarantine} where _dbt_run_id = '{stalled}'", fetch="all"
            )

        if beat == "0":
            assert any(stalled in r and "moved" in r for r in repairs), repairs
            assert [r[0] for r in held()] == [91]
            return
        assert not any(stalled in r for r in repairs), repairs
        assert held() == []  # not moved: the stalled run's own move would double it
        still = project.run_sql(
            f"select id from {pending} where _contract_reason is not null", fetch="all"
        )
        assert [r[0] for r in still] == [91], still  # kept, for its run or a person
        # the stalled run's own move lands now; then a person follows the warning
        project.run_sql(
            f"insert into {quarantine} by name select * from {pending} "
            "where _contract_reason is not null"
        )
        found = Pending.from_properties(pending, {RUN_PROPERTY: stalled})
        by_hand = manual_move(pending, quarantine, "parquet", rows_of_pending(found, quarantine))
        insert, drop = by_hand.split("; ", 1)
        project.run_sql(insert)
        project.run_sql(drop.split(" (if", 1)[0])
        assert [r[0] for r in held()] == [91]  # once
        project.run_sql(f"drop table {record_of(table, stalled)}")  # the next run would
