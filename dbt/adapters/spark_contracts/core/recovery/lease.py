"""A model's lease, decided without Spark. Pure.

A run that changes a table in several steps, or holds discarded rows in a pending table, holds a
lease: its run record (core/recovery/record.py; a pending table is one too) says which run holds
it, where that run's client process lives (`client`: host and pid), where its statements run (the
Spark application), its epoch, and a heartbeat its holder renews.

Whether another run's lease still binds is decided from positive evidence and from what this run
sees itself, never by comparing one machine's clock with another's:

- released (heartbeat "0") or taken over (`taken_by` set): it binds no one;
- *dead*: its client ran on this host and that process is gone, and its statements ran in that
  same process (the embedded session dies with it): no statement of it can run any more;
- otherwise this run *watches* it: a heartbeat that changes while watched is a live run; one
  that has not changed for the lease's length, timed on this run's own monotonic clock, has
  *expired*.

A run that takes over a dead or expired lease marks it `taken_by` itself and holds the next
epoch. Its holder, if it was only stalled (a GC pause, SIGSTOP, a lost network), checks its own
lease before each irreversible step (the fence) and fails, naming the run that took over.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from dbt.adapters.spark_contracts.core.recovery.record import RunRecord

# A lease binds this long after its holder's last heartbeat was seen to change (timed by the
# watcher's own clock); the holder renews it every BEAT_SECONDS. Short, because a stalled run
# that loses it can commit nothing (the fence). $DBT_SPARK_CONTRACTS_LEASE_SECONDS overrides it.
LEASE_SECONDS = 30.0
BEAT_SECONDS = 10.0


def beat_interval(lease_seconds: float) -> float:
    """How often a holder renews its lease: at least three beats in a lease's length."""
    return min(BEAT_SECONDS, lease_seconds / 3)


class State(enum.Enum):
    FREE = "free"  # released, or taken over already: it binds no one
    DEAD = "dead"  # positive evidence: its holder can run no statement any more
    WATCH = "watch"  # it may be alive: watch its heartbeat


def judge(record: RunRecord, host: str, process_running: Callable[[int], bool]) -> State:
    """What a lease found on the table says, before any watching (see the module's text):
    `host` is this machine's name, `process_running` tells whether a pid runs here."""
    if record.released or record.taken_by:
        return State.FREE
    return State.WATCH if may_still_run(record, host, process_running) else State.DEAD


def may_still_run(record: RunRecord, host: str, process_running: Callable[[int], bool]) -> bool:
    """A statement of the lease's holder may still run: no positive evidence that its
    statements ran in its own dbt process on this host (`host`), which is gone. A server may
    still run a statement a dead client sent."""
    client = record.client
    if client is None or client.host != host or process_running(client.pid):
        return True
    application = record.application
    process = application.process() if application is not None else None
    return process is None or process != (client.host, client.pid)


def holder_gone(record: RunRecord, host: str, process_running: Callable[[int], bool]) -> bool:
    """Positive evidence that a lease's holder can never read it again: its dbt process ran on
    this host (`host`) and is gone. A lease taken over is read only by its holder's fence, in
    that process (a statement a server may still run for the holder reads no lease), so such a
    lease can be dropped; one whose holder may be alive (stalled: its process still runs, or it
    ran on another host) stays marked for it to find."""
    client = record.client
    return client is not None and client.host == host and not process_running(client.pid)


class Seen(enum.Enum):
    LIVE = "live"  # its heartbeat changed while watched
    EXPIRED = "expired"  # unchanged for a lease's length
    WAITING = "waiting"


@dataclass
class Watch:
    """Heartbeats watched on this run's own monotonic clock: `first` maps a lease table to the
    heartbeat first seen and when."""

    lease_seconds: float
    first: dict[str, tuple[str | None, float]] = field(default_factory=dict)

    def see(self, record: RunRecord, now: float) -> Seen:
        seen = self.first.setdefault(record.table.lower(), (record.beat, now))
        if seen[0] != record.beat:
            return Seen.LIVE
        if now - seen[1] >= self.lease_seconds:
            return Seen.EXPIRED
        return Seen.WAITING

    def left(self, record: RunRecord, now: float) -> float:
        """Seconds until `record` expires, if its heartbeat does not change."""
        seen = self.first.get(record.table.lower())
        return (
            self.lease_seconds if seen is None else max(0.0, self.lease_seconds - (now - seen[1]))
        )


def next_epoch(records: tuple[RunRecord, ...] | list[RunRecord]) -> int:
    """The epoch of a lease that takes these over."""
    return max((r.epoch for r in records), default=0) + 1


@dataclass(frozen=True)
class Fence:
    """What a holder's check of its own lease found: held, or lost (and to whom). `work`: the
    lost record still says its run was changing a table (run/repair.py reads it there): its
    holder leaves it to the run that took over. `unconfirmed_after` (with `held` False): not
    marked taken over, but this run could not prove that no other run can have judged it
    expired: its last beat that went through was sent that many seconds ago, and its renewal
    failed (`renew_error`) or went through too slowly."""

    held: bool
    taken_by: str | None = None
    work: bool = False
    unconfirmed_after: float | None = None
    renew_error: str | None = None


def fence(record: RunRecord | None) -> Fence:
    """The holder's own lease as it reads it before an irreversible step: gone or marked taken
    over is lost."""
    if record is None:
        return Fence(False, None)
    if record.taken_by:
        return Fence(False, record.taken_by, record.holds_work)
    return Fence(True)


def unguarded_takeover(state: State, guarded: bool, gone: bool) -> bool:
    """Taking over a lease judged `state` would let its holder write after the taker: its
    table's format neither fences a late write off inside the commit nor takes it back
    (`guarded` False: Parquet, no log), and nothing proves its holder can run no statement
    any more (not DEAD, its Spark application not provably `gone`). A lease run out proves
    only a silent holder (a stopped process; a server still running a dead client's statement),
    so such a lease is never taken over: the run fails naming it, with the repair by hand."""
    return not guarded and state is not State.DEAD and not gone


class Replace(enum.Enum):
    """What another run's record marked `replacing` means for a run about to send its own
    replace of the model table (run/replace_alone.py)."""

    GO = "go"  # it binds no one: released by its holder, its holder provably gone, or landed
    WAIT = "wait"  # it may be alive: watch its heartbeat
    LIVE = "live"  # renewed while watched: a live run is replacing (`RunInProgress`)
    REFUSE = "refuse"  # run out, yet its replace may still run and is not in the table's log


def replace_verdict(state: State, seen: Seen | None, landed: bool, may_commit: bool) -> Replace:
    """Another run's `replacing` record, judged `state` (and, where it may be alive, `seen` by
    this run's watch): its replace, once sent, cannot be fenced off (Iceberg commits it onto
    whatever the table is by then, erasing a snapshot committed meanwhile), so this run sends
    none while that one may still run. Run out, it binds no more only on positive evidence:
    its replace is in the table's log (`landed`: its commit tag; a statement commits once), or
    its Spark application is provably gone (`may_commit` False). Never a clock against
    another's: the watch times a heartbeat on this run's own clock."""
    if state is not State.WATCH:
        return Replace.GO
    if seen is Seen.LIVE:
        return Replace.LIVE
    if seen is Seen.WAITING:
        return Replace.WAIT
    return Replace.GO if landed or not may_commit else Replace.REFUSE
