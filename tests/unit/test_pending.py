"""core/pending.decide_pending: what another run's pending table comes to, from the model
table's own record only (property-tested: it never drops the rows of a load that is in the
table, never acts on a run whose lease is fresh, never drops on a log that does not reach
back to the run)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.pending import (
    BEAT_PROPERTY,
    CREATED_PROPERTY,
    LOADED_PREFIX,
    RUN_PROPERTY,
    TAG_PROPERTY,
    Action,
    Application,
    LogEntry,
    ModelRecord,
    Pending,
    application_gone,
    decide_pending,
    is_pending_of,
    loaded_property,
    pending_name,
)

TAG = "dbt-spark-contracts:inv-1:abc:model.p.t"
OTHER = "dbt-spark-contracts:inv-2:def:model.p.t"
NOW = 10_000.0

entries = st.lists(
    st.builds(
        LogEntry,
        st.floats(0, NOW),
        st.sampled_from([TAG, OTHER, None]),
        st.sampled_from(["WRITE", "MERGE", "SET TBLPROPERTIES", "RESTORE", "OPTIMIZE"]),
    ),
    max_size=8,
).map(lambda log: sorted(log, key=lambda e: e.timestamp))


def pending(heartbeat: float, created: float | None = 5_000.0) -> Pending:
    return Pending("db.t__quarantine__pending_inv1", TAG, "inv-1", heartbeat, created)


@given(entries, st.floats(0, 179))
def test_a_fresh_lease_is_left_alone(log, age):
    decision = decide_pending(pending(NOW - age), ModelRecord(log, {}), NOW, 180)
    assert decision.action is Action.WAIT


@given(entries, st.floats(0, NOW), st.floats(0, NOW))
def test_the_rows_of_a_load_in_the_table_are_never_dropped(log, created, beat):
    loaded = [*log, LogEntry(NOW, TAG, "WRITE")]
    decision = decide_pending(pending(beat, created), ModelRecord(loaded, {}), NOW + 1000, 180)
    assert decision.action in (Action.MOVE, Action.WAIT)


@given(entries, st.booleans())
def test_rows_are_dropped_only_where_the_log_reaches_back_and_holds_no_load(log, gone):
    """... and, where no load of the run was ever in the log, only once the Spark application
    that ran its statements is provably gone (a statement of it may commit yet)."""
    decision = decide_pending(pending(0, 5_000.0), ModelRecord(log, {}), NOW, 180, gone)
    loads = [e for e in log if e.tag == TAG and e.operation in ("WRITE", "MERGE")]
    if decision.action is Action.DROP:
        reaches_back = bool(log) and min(e.timestamp for e in log) <= 5_000.0
        undone = any(e.tag == TAG and e.operation == "RESTORE" for e in log) and loads
        assert reaches_back or undone
        assert not loads or undone
        assert gone or undone
    if decision.action is Action.MOVE:
        assert loads


def test_a_load_taken_back_by_its_own_run_is_dropped():
    log = [
        LogEntry(1, None, "CREATE"),
        LogEntry(6_000, TAG, "WRITE"),
        LogEntry(6_001, TAG, "RESTORE"),
    ]
    assert decide_pending(pending(0), ModelRecord(log, {}), NOW).action is Action.DROP


def test_a_repairs_restore_to_before_the_load_takes_it_back_and_a_later_one_does_not():
    """A repair's RESTORE carries the repairing run's tag: what counts is where it went."""
    load = LogEntry(6_000, TAG, "WRITE", version=4)
    back = LogEntry(6_100, OTHER, "RESTORE", version=5, restored_to=3)
    later = LogEntry(6_100, OTHER, "RESTORE", version=6, restored_to=4)
    base = [LogEntry(1, None, "CREATE TABLE AS SELECT", version=0), load]
    assert decide_pending(pending(0), ModelRecord([*base, back], {}), NOW).action is Action.DROP
    assert decide_pending(pending(0), ModelRecord([*base, later], {}), NOW).action is Action.MOVE


def test_a_backfill_update_is_not_the_load():
    log = [LogEntry(1, None, "CREATE TABLE AS SELECT"), LogEntry(6_000, TAG, "UPDATE")]
    assert decide_pending(pending(0), ModelRecord(log, {}), NOW, gone=True).action is Action.DROP


def test_a_run_that_never_loaded_is_dropped_only_once_its_application_is_gone():
    """A Thrift or Connect server runs on what a killed client sent: while it may, the load
    may commit yet, and the rows are kept (the next run looks again)."""
    log = [LogEntry(1, None, "CREATE TABLE AS SELECT")]
    kept = decide_pending(pending(0), ModelRecord(log, {}), NOW, gone=False)
    assert kept.action is Action.KEEP and "may still be running" in kept.reason
    assert decide_pending(pending(0), ModelRecord(log, {}), NOW, gone=True).action is Action.DROP


def test_an_application_is_gone_only_on_positive_evidence():
    host = "ci-7"
    mine = Application(f"session://{host}/100", "local-1")
    running = {100, 200}.__contains__
    # an embedded session lives in its process: ended on this host is gone
    assert application_gone(Application(f"session://{host}/300", "local-0"), mine, running)
    assert not application_gone(Application(f"session://{host}/200", "local-0"), mine, running)
    assert not application_gone(Application("session://other/300", "local-0"), mine, running)
    # a server: the same endpoint now running another application restarted
    server = Application("thrift://spark:10000", "app-2")
    assert application_gone(Application("thrift://spark:10000", "app-1"), server, running)
    assert not application_gone(Application("thrift://spark:10000", "app-2"), server, running)
    assert not application_gone(Application("thrift://other:10000", "app-1"), server, running)
    assert not application_gone(Application("thrift://spark:10000", "app-1"), mine, running)
    assert not application_gone(None, mine, running)
    # read back from the property the run sets
    recorded = Application.from_property(mine.to_property())
    assert recorded == mine and Application.from_property("garbled") is None


def test_a_pending_table_made_lately_is_alive_whatever_its_first_heartbeat_says():
    """A CTAS longer than the lease: the table's own creation is a sign of life."""
    made_now = Pending("p", TAG, "inv-1", NOW - 3_600, NOW - 5)
    assert decide_pending(made_now, ModelRecord([], {}), NOW, 180).action is Action.WAIT
    released = Pending("p", TAG, "inv-1", 0, NOW - 5)
    assert decide_pending(released, ModelRecord([], {}), NOW, 180).action is not Action.WAIT


def test_timestamps_read_back_as_thrift_prints_them():
    from dbt.adapters.spark_contracts.run.table_log import _epoch, _restored_to

    assert _epoch("2026-11-26 12:00:05.1") == _epoch("2026-11-26 12:00:05.100000")
    assert _epoch("2026-11-26 12:00:05") + 0.5 == _epoch("2026-11-26 12:00:05.5")
    assert _restored_to({"operationParameters": '{"version":"3","timestamp":null}'}) == 3
    assert _restored_to({"operationParameters": {"version": "12"}}) == 12


def test_a_log_cleaned_past_the_run_keeps_the_rows():
    log = [LogEntry(7_000, OTHER, "WRITE")]  # the oldest left is younger than the pending table
    decision = decide_pending(pending(0, 5_000), ModelRecord(log, {}), NOW)
    assert decision.action is Action.KEEP and "no longer reaches back" in decision.reason


def test_parquet_moves_on_its_property_and_keeps_without_it():
    loaded = ModelRecord(None, {loaded_property("inv-1"): TAG})
    assert decide_pending(pending(0), loaded, NOW).action is Action.MOVE
    assert decide_pending(pending(0), ModelRecord(None, {}), NOW).action is Action.KEEP
    assert loaded_property("inv-1").startswith(LOADED_PREFIX)


def test_a_pending_table_is_named_by_its_run_and_read_back_from_its_properties():
    name = pending_name("db.t__quarantine", "0a1b-2c3d-4e5f-6789")
    assert name == "db.t__quarantine__pending_0a1b2c3d4e5f"
    assert is_pending_of("T__Quarantine__pending_0a1b2c3d4e5f", "t__quarantine")
    assert not is_pending_of("t__quarantine", "t__quarantine")
    read = Pending.from_properties(
        name,
        {
            TAG_PROPERTY.upper(): TAG,
            RUN_PROPERTY: "inv-1",
            BEAT_PROPERTY: "12",
            CREATED_PROPERTY: "3",
        },
    )
    assert (read.tag, read.run, read.heartbeat, read.created) == (TAG, "inv-1", 12.0, 3.0)
    unnamed = Pending.from_properties(name, {BEAT_PROPERTY: "x"})
    assert decide_pending(unnamed, ModelRecord([], {}), NOW).action is Action.KEEP
