"""core/recovery/lease.py: whether another run's lease binds, from positive evidence and from what the
watching run sees on its own clock (property-tested: a lease is never taken over while its
heartbeat changes, nor judged dead without its process gone on this host), and the fence."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.recovery.lease import (
    Seen,
    State,
    Watch,
    beat_interval,
    fence,
    holder_gone,
    judge,
    may_still_run,
    next_epoch,
)
from dbt.adapters.spark_contracts.core.recovery.pending import (
    APP_PROPERTY,
    BEAT_PROPERTY,
    RUN_PROPERTY,
    Application,
)
from dbt.adapters.spark_contracts.core.recovery.record import (
    CLIENT_PROPERTY,
    EPOCH_PROPERTY,
    TAKEN_PROPERTY,
    Client,
    RunRecord,
)

HOST = "ci-7"
running = {100, 200}.__contains__


def lease(pid: int = 300, host: str = HOST, app: str | None = "session", beat: str = "5.0"):
    application = None
    if app == "session":
        application = Application(f"session://{host}/{pid}", "local-1")
    elif app == "thrift":
        application = Application("thrift://spark:10000", "app-1")
    return RunRecord("db.t__dbt_lease_x", "run-x", beat, Client(host, pid), application)


def test_dead_only_on_positive_evidence():
    assert judge(lease(300), HOST, running) is State.DEAD  # its process here has ended
    assert judge(lease(200), HOST, running) is State.WATCH  # it runs
    assert judge(lease(300, host="other"), HOST, running) is State.WATCH  # another host
    # a server may still run a statement the dead client sent: watched, not dead
    assert judge(lease(300, app="thrift"), HOST, running) is State.WATCH
    assert judge(lease(300, app=None), HOST, running) is State.WATCH
    no_client = RunRecord("t", "run-x", "5.0")
    assert judge(no_client, HOST, running) is State.WATCH


def test_a_taken_over_holders_statements_may_still_run_unless_they_ran_in_its_gone_process():
    """What a taker of a lease commits an Iceberg marker for (run/fence.history_marker): a
    holder's statement may still run, taken over or not, unless they ran in its own dbt process
    on this host and that process is gone."""
    taken = RunRecord("t", "run-x", "5.0", Client(HOST, 300), lease(300).application, 1, "y")
    assert not may_still_run(taken, HOST, running)
    assert not may_still_run(lease(300), HOST, running)
    assert may_still_run(lease(200), HOST, running)  # its process runs: it may be stalled
    assert may_still_run(lease(300, app="thrift"), HOST, running)  # a server runs them
    assert may_still_run(lease(300, host="other"), HOST, running)
    assert may_still_run(RunRecord("t", "run-x", "5.0"), HOST, running)


def test_released_or_taken_over_binds_no_one():
    assert judge(lease(200, beat="0"), HOST, running) is State.FREE
    taken = RunRecord("t", "run-x", "5.0", Client(HOST, 200), None, 1, "run-y")
    assert judge(taken, HOST, running) is State.FREE


@given(st.lists(st.floats(0, 29.9), min_size=1, max_size=20))
def test_a_lease_whose_heartbeat_changes_is_live_and_never_expires(times):
    watch = Watch(30.0)
    assert watch.see(lease(beat="1.000"), 0.0) is Seen.WAITING
    for i, t in enumerate(sorted(times)):
        assert watch.see(lease(beat=f"{2 + i}.000"), t) is Seen.LIVE


@given(st.floats(0, 29.99), st.floats(30, 1e6))
def test_an_unchanged_heartbeat_expires_after_a_leases_length_on_the_watchers_clock(soon, late):
    watch = Watch(30.0)
    start = 1_000.0  # the watcher's monotonic clock; the heartbeat's value is never compared
    assert watch.see(lease(beat="99999999.0"), start) is Seen.WAITING
    assert watch.see(lease(beat="99999999.0"), start + soon) is Seen.WAITING
    assert watch.see(lease(beat="99999999.0"), start + late) is Seen.EXPIRED
    assert abs(watch.left(lease(), start + soon) - (30.0 - soon)) < 1e-6


def test_read_back_from_properties_and_the_epoch_grows():
    read = RunRecord.from_properties(
        "db.t__dbt_lease_x",
        {
            RUN_PROPERTY: "run-x",
            BEAT_PROPERTY: "12.5",
            CLIENT_PROPERTY.upper(): "ci-7/4242",
            APP_PROPERTY: "session://ci-7/4242 local-1",
            EPOCH_PROPERTY: "3",
        },
    )
    assert read.client == Client("ci-7", 4242) and read.epoch == 3 and not read.released
    assert read.application == Application("session://ci-7/4242", "local-1")
    assert next_epoch([read, RunRecord("t", None, "0", epoch=1)]) == 4
    assert next_epoch([]) == 1
    assert Client.from_property("garbled") is None
    assert RunRecord.from_properties("t", {EPOCH_PROPERTY: "x"}).epoch == 0


def test_the_fence():
    assert fence(lease()).held
    lost = fence(RunRecord.from_properties("t", {TAKEN_PROPERTY: "run-y", BEAT_PROPERTY: "0"}))
    assert not lost.held and lost.taken_by == "run-y"
    gone = fence(None)
    assert not gone.held and gone.taken_by is None


def test_three_beats_in_a_lease():
    assert beat_interval(30.0) == 10.0 and beat_interval(2.0) == 2.0 / 3


@given(
    st.integers(1, 500),
    st.sampled_from([HOST, "other"]),
    st.sampled_from(["session", "thrift", None]),
)
def test_a_taken_over_lease_is_dropped_only_once_its_holder_is_gone_from_this_host(pid, host, app):
    """Whoever finds a lease taken over drops it only on positive evidence that its holder can
    never read it again: its process ran on this host and has ended (where its statements ran
    does not matter: only the holder's fence reads the mark). A holder that may be alive (its
    process runs: stalled) or that ran on another host keeps its mark."""
    record = lease(pid, host, app)
    gone = holder_gone(record, HOST, running)
    assert gone == (host == HOST and not running(pid))
    if gone and app == "thrift":  # judged by the client alone, unlike `judge`
        assert judge(record, HOST, running) is State.WATCH
    assert not holder_gone(RunRecord("t", "run-x", "0"), HOST, running)  # no client named
