"""Two runs of one model taking their leases at one moment (CI saw both fail, each naming the
other): of the two, one goes on and the other fails naming it, never neither. The Runner's own
lease steps against one shared, scripted catalogue of lease tables; no Spark."""

from __future__ import annotations

import contextlib
import re
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from dbt.adapters.spark_contracts.core.recovery.intent import INTENT_PROPERTY
from dbt.adapters.spark_contracts.run import Runner, RunReport
from dbt.adapters.spark_contracts.run import lease as lease_module
from dbt.adapters.spark_contracts.run.run_errors import RunInProgress


class Catalogue:
    """Lease tables as `create table if not exists`, `drop table`, `show tables` and
    `show tblproperties` see them; `first_look` holds both runs' first listing until both
    have taken their leases (the tie)."""

    def __init__(self, runs: int) -> None:
        self.tables: dict[str, dict[str, str]] = {}
        self.lock = threading.Lock()
        self.first_look = threading.Barrier(runs)
        self.looked: set[int] = set()

    def connection(self) -> Connection:
        return Connection(self)


class Connection:
    def __init__(self, catalogue: Catalogue) -> None:
        self.catalogue = catalogue

    @contextlib.contextmanager
    def own_connection(self, name: str):  # a heartbeat's: the same catalogue
        yield Connection(self.catalogue)

    def run(self, sql: str) -> None:
        cat = self.catalogue
        created = re.match(r"create table if not exists (\S+) .*tblproperties \((.*)\)$", sql)
        if created:
            props = dict(re.findall(r"'([^']+)' = '([^']*)'", created.group(2)))
            with cat.lock:
                cat.tables.setdefault(created.group(1).lower(), props)
            return
        dropped = re.match(r"drop table if exists (\S+)(?: purge)?$", sql)
        if dropped:
            with cat.lock:
                cat.tables.pop(dropped.group(1).lower(), None)
            return
        altered = re.match(r"alter table (\S+) set tblproperties \((.*)\)$", sql)
        assert altered, sql  # a heartbeat, or a mark
        with cat.lock:
            table = cat.tables.get(altered.group(1).lower())
            if table is not None:
                table.update(re.findall(r"'([^']+)' = '([^']*)'", altered.group(2)))

    def fetch(self, sql: str) -> list[dict]:
        cat = self.catalogue
        listed = re.match(r"show tables in (\S+) like '(\S+)\*'$", sql)
        if listed:
            me = threading.get_ident()
            if me not in cat.looked:
                cat.looked.add(me)
                cat.first_look.wait(timeout=10)
            schema, prefix = listed.groups()
            with cat.lock:
                return [
                    {"tableName": t.split(".", 1)[1]}
                    for t in cat.tables
                    if t.startswith(f"{schema}.{prefix}".lower())
                ]
        exact = re.match(r"show tables in (\S+) like '(\w+)'$", sql)  # is the table there
        if exact:
            with cat.lock:
                name = ".".join(exact.groups()).lower()
                return [{"tableName": exact.group(2)}] if name in cat.tables else []
        props = re.match(r"show tblproperties (\S+)$", sql)
        assert props, sql
        with cat.lock:
            table = cat.tables.get(props.group(1).lower())
        if table is None:
            raise RuntimeError(f"Table or view not found: {props.group(1)}")
        return [{"key": k, "value": v} for k, v in table.items()]


def model_run(invocation_id: str) -> SimpleNamespace:
    return SimpleNamespace(
        relation="db.t",
        invocation_id=invocation_id,
        table_format="delta",
        unique_id="model.p.t",
        batch_tag="",
    )


@pytest.mark.parametrize("order", [("aaaa1111", "bbbb2222"), ("bbbb2222", "aaaa1111")] * 3)
def test_two_runs_at_one_moment_one_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: tuple
):
    """Of two runs that tie, the one whose invocation id sorts first goes on, whichever starts
    first, every time (no random wait decides it: one let both give up when they looked again
    at one moment, CI's `[[], []]`). It keeps its lease, renewed (every second here): the
    other sees it renewed and fails naming it (a lease that stopped beating would be taken
    over)."""
    sleep = lease_module.time.sleep
    monkeypatch.setattr(lease_module.time, "sleep", lambda s: sleep(s / 20))
    monkeypatch.setenv(lease_module.LEASE_ENV, "3")
    catalogue = Catalogue(2)
    outcomes: dict[str, object] = {}
    held: list = []

    def run(invocation_id: str) -> None:
        runner = Runner(catalogue.connection(), RunReport(), tmp_path)  # type: ignore[arg-type]
        try:
            runner.leases.alone(model_run(invocation_id))  # type: ignore[arg-type]
            outcomes[invocation_id] = "goes on"
            held.append(runner.leases.held)
        except RunInProgress as exc:
            outcomes[invocation_id] = exc

    threads = [threading.Thread(target=run, args=(inv,)) for inv in order]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for beat in held:
        beat.stop()
    assert catalogue.looked == {t.ident for t in threads}, "the two runs did not tie"
    going = [inv for inv, outcome in outcomes.items() if outcome == "goes on"]
    assert going == ["aaaa1111"], outcomes
    (failed,) = [outcome for outcome in outcomes.values() if outcome != "goes on"]
    assert isinstance(failed, RunInProgress) and failed.invocation_id == going[0], outcomes
    # the run that goes on holds its lease; the one that failed left none behind
    assert list(catalogue.tables) == [f"db.t__dbt_lease_{going[0]}"], catalogue.tables


def test_a_run_alone_takes_its_lease_at_once(tmp_path: Path):
    catalogue = Catalogue(1)
    runner = Runner(catalogue.connection(), RunReport(), tmp_path)  # type: ignore[arg-type]
    runner.leases.alone(model_run("cccc3333"))  # type: ignore[arg-type]
    runner.leases.held.stop()
    assert list(catalogue.tables) == ["db.t__dbt_lease_cccc3333"]


def test_a_run_that_only_quarantines_holds_up_no_multi_step_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Another run of the model (its process runs) only quarantines: its record is `shared`,
    so a multi-step run takes the model alone at once and leaves that record as it is (its
    settler's, or its own run's). The control: the same record without `shared` holds the
    model alone; not renewed, it is watched for a lease's length and taken over."""
    import os
    import socket

    from dbt.adapters.spark_contracts.core.recovery.pending import BEAT_PROPERTY, RUN_PROPERTY
    from dbt.adapters.spark_contracts.core.recovery.record import (
        CLIENT_PROPERTY,
        SHARED_PROPERTY,
        TAKEN_PROPERTY,
        pending_properties,
    )

    monkeypatch.setenv(lease_module.LEASE_ENV, "1")
    other = {
        RUN_PROPERTY: "other111",
        BEAT_PROPERTY: "17.0",
        CLIENT_PROPERTY: f"{socket.gethostname()}/{os.getpid()}",  # its process runs
        **pending_properties("db.t__quarantine__pending_other111", "tag-o", 2),
    }
    for shared in (True, False):
        catalogue = Catalogue(1)
        record = {**other, **({SHARED_PROPERTY: "true"} if shared else {})}
        catalogue.tables["db.t__dbt_lease_other111"] = dict(record)
        runner = Runner(catalogue.connection(), RunReport(), tmp_path)  # type: ignore[arg-type]
        runner.leases.alone(model_run("cccc3333"))  # type: ignore[arg-type]
        runner.leases.held.stop()
        found = catalogue.tables["db.t__dbt_lease_other111"]  # never dropped: it names rows
        if shared:
            assert found == record
        else:
            assert found[TAKEN_PROPERTY] == "cccc3333" and found[BEAT_PROPERTY] == "0"


class Deployed(Connection):
    """The lease catalogue, and `spark.deployed` as the table is now."""

    def __init__(self, catalogue: Catalogue, schema: object) -> None:
        super().__init__(catalogue)
        self.schema = schema

    def deployed(self, table: str, describable: bool) -> tuple:
        return self.schema, {}

    def fetch(self, sql: str) -> list[dict]:
        if sql == "describe history db.t limit 1":  # the version before the run's change
            return [{"version": 3}]
        return super().fetch(sql)


def multi_step_run(deployed: object) -> SimpleNamespace:
    """A multi-step run of `db.t` planned against `deployed`, with no steps (what
    `Runner._begin_steps` reads of a `ModelRun`)."""
    from dbt.adapters.spark_contracts.run.model_run import ModelRun

    run = SimpleNamespace(
        relation="db.t",
        invocation_id="cccc3333",
        table_format="delta",
        unique_id="model.p.t",
        batch_tag="",
        deployed=deployed,
        statements=[],
        commit_tag="tag",
        plan=SimpleNamespace(operations=()),
    )
    run.intent = lambda version: ModelRun.intent(run, version)  # type: ignore[arg-type]
    return run


@pytest.mark.parametrize("changed", [False, True])
def test_a_plan_made_before_another_runs_change_is_not_carried_out(
    tmp_path: Path, changed: bool
) -> None:
    """A multi-step run holding its lease reads the table's schema again before its intent:
    the same schema goes on (rows loaded meanwhile are no reason to stop); a schema another run
    changed since the plan fails the run before any change, naming both schemas, its lease
    let go."""
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type
    from dbt.adapters.spark_contracts.run.run_errors import TableChangedMeanwhile

    planned = parse_type("struct<id:bigint,n:bigint>")
    now = parse_type("struct<id:bigint,n:bigint,note:string>") if changed else planned
    catalogue = Catalogue(1)
    spark = Deployed(catalogue, now)
    run = multi_step_run(planned)
    runner = Runner(spark, RunReport(), tmp_path)  # type: ignore[arg-type]
    if not changed:
        intents = []
        spark.run = intents.append  # type: ignore[method-assign]
        runner._take_alone(run)  # type: ignore[arg-type]
        runner._begin_steps(run)  # type: ignore[arg-type]
        runner.leases.held.stop()
        # the intent went into the run's record, with the version it puts the table back to
        (written,) = [s for s in intents if "__dbt_lease_cccc3333 set tblproperties" in s]
        assert INTENT_PROPERTY in written and runner.state.intent.restore_version == 3
        return
    runner._take_alone(run)  # type: ignore[arg-type]
    with pytest.raises(TableChangedMeanwhile) as caught:
        runner._begin_steps(run)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "note" in message and "left the table as it was" in message, message
    assert runner.state.intent is None and catalogue.tables == {}  # no intent; lease let go


def test_a_dead_runs_record_found_when_taking_the_lease_stops_the_run(tmp_path: Path) -> None:
    """A run that died half way after this run's repair step looked (its record carries its
    intent) leaves the table half changed: this run, planned against it, changes nothing
    (`RepairFirst`), lets go of its lease, and leaves the record for the next run's repair."""
    from dbt.adapters.spark_contracts.core.recovery.intent import Intent
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type
    from dbt.adapters.spark_contracts.run.run_errors import RepairFirst

    catalogue = Catalogue(1)
    dead = Intent("dead1111", "model.p.t", "db.t", "delta", 2, "tag-dead")
    catalogue.tables["db.t__dbt_lease_dead1111"] = {
        "dbt_spark_contracts.pending_run": "dead1111",
        "dbt_spark_contracts.heartbeat": "0",  # let go of: it binds no one
        INTENT_PROPERTY: dead.to_property(),
    }
    schema = parse_type("struct<id:bigint>")
    run = multi_step_run(schema)
    runner = Runner(Deployed(catalogue, schema), RunReport(), tmp_path)  # type: ignore[arg-type]
    with pytest.raises(RepairFirst) as caught:
        runner._take_alone(run)  # type: ignore[arg-type]
    assert caught.value.invocation_id == "dead1111"
    assert list(catalogue.tables) == ["db.t__dbt_lease_dead1111"]  # its own lease let go
    assert runner.state.intent is None


def test_a_failure_while_looking_for_other_runs_lets_go_of_the_lease(tmp_path: Path) -> None:
    """Listing the other leases fails (it fails closed): the run's own lease is let go, so no
    heartbeat keeps a lease of a run that stopped fresh."""

    class Failing(Connection):
        def fetch(self, sql: str) -> list[dict]:
            raise RuntimeError("listing failed")

    catalogue = Catalogue(1)
    runner = Runner(Failing(catalogue), RunReport(), tmp_path)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="listing failed"):
        runner.leases.alone(model_run("dddd4444"))  # type: ignore[arg-type]
    assert runner.leases.held is None and catalogue.tables == {}
