"""One recovery record per model run. Pure.

A run that may leave something for a later run to repair keeps one record from before its first
change until its work stands or is undone: the table `<model>__dbt_lease_<run>` (an empty table;
the record is its properties). The record is also the run's lease (core/recovery/lease.py): it
names its run, the dbt process that holds it (`client`), where its statements run
(`application`), its epoch and a heartbeat its holder renews. What the run is doing:

- `intent`: a multi-step change (core/recovery/intent.Intent): the table's version before the
  run's first change (Delta version, Iceberg snapshot id; none for Parquet), the steps, the
  columns its ADD COLUMNS add and the quarantine it writes to;
- `done`: as each step completes, its index and the version it produced;
- `swap`: a rebuild swapped in by two renames (core/recovery/swap.py) is under way on the
  relation it names;
- `pending`: the run's discarded rows wait in its pending table (core/recovery/pending.py) to
  follow its load into the quarantine: the table's name, the run's commit tag and the model
  table's version before the pending table was made. A run that only quarantines (no
  multi-step change) makes a `shared` record: it does not hold the model alone, so another run's
  multi-step change is not held up by it (the formats' conflict checks order the two loads).

The states a later run finds, and what it does (run/repair.py, run/swap.py):

- no record: nothing to repair;
- a record whose lease binds (its run may be alive): left to it (`RunInProgress` for a run that
  needs the model alone);
- a record whose lease is free (its run let go of it after a failure it could not undo), dead
  (its process on this host is gone) or expired (not renewed for a lease's length while watched)
  and that carries an intent: the run that takes the lease over puts the table back to the
  intent's version, after checking in the table's own log that every commit after it carries
  the dead run's tag, then drops the record (on Delta and Iceberg, where the dead run's
  statements may still run, it keeps it, its intent cleared, with a `late` watch instead);
- a record with a `late` watch (core/recovery/late.py): the table's commits after the watch's
  are read for its run's tag; one found at the head is taken back, one under another writer's
  commit fails the run naming both; the record is dropped once a late commit was taken back
  or its run's statements can no longer run (on Iceberg, where a run whose lease the repair
  took over may still send the same rollback, the record first says which snapshot the
  take-back rolls back to, `fence_due`, and every repair step fences that snapshot off before
  the record goes: run/rollback_fence.py);
- a record that carries a swap, its relation missing, the backup and the table built beside it
  there: the backup is renamed back (the relation, the backup, the new table and the record
  together are the evidence);
- a record that carries pending rows and no intent (its run died after its load, or before
  it), its lease not binding: settled from the model table's own log (core/recovery/pending.py:
  moved into the quarantine if the load is there, dropped if the log proves it is not), then
  the record dropped; one whose pending table is not there (moved already, or never made) is
  dropped;
- a record that carries none of these (a lease let go of or taken over): no one needs it once
  its holder is gone; a repairing run's record names its commit tag (`tag`): the run that takes
  it over while its holder may still commit gives it a `late` watch (its late RESTORE would undo
  the taker's repair and load).

The model table carries nothing of this: no bookkeeping commit lands in its log. An intent that a
earlier build (before the run record) wrote into the model table's properties is still read and repaired
(run/restore.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dbt.adapters.spark_contracts.core.recovery.intent import INTENT_PROPERTY, Intent
from dbt.adapters.spark_contracts.core.recovery.late import (
    FENCE_DUE_PROPERTY,
    LATE_PROPERTY,
    LateWatch,
    fence_due,
)
from dbt.adapters.spark_contracts.core.recovery.pending import (
    APP_PROPERTY,
    BEAT_PROPERTY,
    CREATED_VERSION_PROPERTY,
    FENCED_PROPERTY,
    RELEASED,
    RUN_PROPERTY,
    TAG_PROPERTY,
    Application,
    Pending,
    host_pid,
)

CLIENT_PROPERTY = "dbt_spark_contracts.client"  # "<host>/<pid>" of the run's dbt process
EPOCH_PROPERTY = "dbt_spark_contracts.epoch"  # grows by one on each takeover
TAKEN_PROPERTY = "dbt_spark_contracts.taken_by"  # the run that took the lease over
# the transaction id its holder's Delta writes carry (core/recovery/txn_fence.py)
TXN_APP_PROPERTY = "dbt_spark_contracts.txn_app_id"
DONE_PROPERTY = "dbt_spark_contracts.done"  # "<step>@<version>,...": the steps done
SWAP_PROPERTY = "dbt_spark_contracts.swap"  # the relation a swap under way renames
PENDING_PROPERTY = "dbt_spark_contracts.pending"  # the run's pending table of discarded rows
SHARED_PROPERTY = "dbt_spark_contracts.shared"  # "true": the record does not hold the model alone
# the commit tag a repairing run's commits carry (its record has no intent to name it): a run that
# takes its lease over watches the table for a late one (core/recovery/late.py)
COMMIT_TAG_PROPERTY = "dbt_spark_contracts.commit_tag"
# the run's commit tag: the run is about to send, or sent, a replace of its model table that no
# fence can stop once sent (Iceberg's `create or replace`: run/replace_alone.py), under that tag
REPLACING_PROPERTY = "dbt_spark_contracts.replacing"


def under_record(*, steps: bool, guards_late_writes: bool, into_deployed: bool, here: bool) -> bool:
    """The run changes the table under its record (its intent written, the model's lease held
    alone) before its first change: a multi-step change (`steps`); and a load into a deployed
    table (`into_deployed`: not a creating run's, not a rebuild's new table) on a format that
    cannot fence off or take back a late write (`guards_late_writes` false: Parquet keeps no
    log) whose statements go to a server (`here` false: a Thrift or Connect server, where a
    statement Spark gave no answer for may still run after the run failed). Its record then
    stays unreleased after such a statement, and no later run takes it over while that
    statement may still write. The embedded session's statement is over once its call
    returned."""
    return steps or (not guards_late_writes and into_deployed and not here)


@dataclass(frozen=True)
class Client:
    """The dbt process that holds a record's lease."""

    host: str
    pid: int

    def to_property(self) -> str:
        return f"{self.host}/{self.pid}"

    @classmethod
    def from_property(cls, value: str | None) -> Client | None:
        found = host_pid((value or "").strip())
        return cls(*found) if found is not None else None


@dataclass(frozen=True)
class Done:
    """A step of the intent that completed: its index in the intent's steps and the table's
    version after it (None where the format keeps no log)."""

    step: int
    version: int | None


def done_property(done: tuple[Done, ...]) -> str:
    return ",".join(f"{d.step}@{'' if d.version is None else d.version}" for d in done)


def parse_done(value: str | None) -> tuple[Done, ...]:
    """The steps done, as `done_property` wrote them; anything unreadable is left out (the
    table's own log, not this list, decides what a repair puts back)."""
    found = []
    for item in (value or "").split(","):
        step, at, version = item.strip().partition("@")
        if step.isdigit() and at:
            found.append(Done(int(step), int(version) if version.lstrip("-").isdigit() else None))
    return tuple(found)


@dataclass(frozen=True)
class RunRecord:
    """A run's record as its table's properties describe it."""

    table: str
    run: str | None
    beat: str | None  # the heartbeat as written ("0": released)
    client: Client | None = None
    application: Application | None = None
    epoch: int = 0
    taken_by: str | None = None
    intent: Intent | None = None
    done: tuple[Done, ...] = ()
    swap: str | None = None
    pending: Pending | None = None  # its pending table, as the record describes it
    shared: bool = False
    txn_app: str | None = None  # the transaction id its holder's writes carry, if any
    # taken over and repaired, its holder may still commit once (core/recovery/late.py)
    late: LateWatch | None = None
    tag: str | None = None  # a repairing run's commit tag (`COMMIT_TAG_PROPERTY`)
    # the snapshot a take-back of its late commit rolled back to, still to be fenced off
    fence_due: int | None = None
    replacing: str = ""  # `REPLACING_PROPERTY`: the tag of the replace its run sends

    @classmethod
    def from_properties(cls, table: str, properties: Mapping[str, str]) -> RunRecord:
        """Keys are compared case-insensitively. An intent that cannot be read raises
        `IntentUnreadable` (a repair never goes on without it)."""
        lowered = {k.lower(): v for k, v in properties.items()}
        try:
            epoch = int(lowered.get(EPOCH_PROPERTY, "0") or 0)
        except ValueError:
            epoch = 0
        intent = lowered.get(INTENT_PROPERTY)
        pending = (lowered.get(PENDING_PROPERTY) or "").strip()
        return cls(
            table,
            lowered.get(RUN_PROPERTY),
            lowered.get(BEAT_PROPERTY),
            Client.from_property(lowered.get(CLIENT_PROPERTY)),
            Application.from_property(lowered.get(APP_PROPERTY)),
            epoch,
            lowered.get(TAKEN_PROPERTY) or None,
            Intent.from_property(intent) if intent else None,
            parse_done(lowered.get(DONE_PROPERTY)),
            lowered.get(SWAP_PROPERTY) or None,
            Pending.from_properties(pending, properties) if pending else None,
            (lowered.get(SHARED_PROPERTY) or "").strip().lower() == "true",
            (lowered.get(TXN_APP_PROPERTY) or "").strip() or None,
            LateWatch.from_property(lowered.get(LATE_PROPERTY)),
            (lowered.get(COMMIT_TAG_PROPERTY) or "").strip() or None,
            fence_due(lowered.get(FENCE_DUE_PROPERTY)),
            (lowered.get(REPLACING_PROPERTY) or "").strip(),
        )

    @property
    def released(self) -> bool:
        return (self.beat or "").strip() in (RELEASED, "0.0")

    @property
    def let_go(self) -> bool:
        """Released by its holder (a run that failed and let go sends nothing more) or by a
        person who made sure of that; not by a taker's mark, which releases it too."""
        return self.released and not self.taken_by

    @property
    def holder(self) -> str:
        return self.run or self.table

    @property
    def holds_work(self) -> bool:
        """It says its run was changing a table (an intent, or a swap), has discarded rows
        waiting (its pending table), or may still commit once after a repair (`late`): only a
        run that has repaired, settled or watched that out, or its own run, drops it."""
        return (
            self.intent is not None
            or self.swap is not None
            or self.pending is not None
            or self.late is not None
            or self.fence_due is not None
        )


# what a record says once its intent is no longer to be put back (its load is in, or a repair
# rolled it forward): only its pending rows, if any, are left to settle
INTENT_CLEARED = {INTENT_PROPERTY: "", DONE_PROPERTY: ""}


def pending_properties(
    pending: str, tag: str, version: object, fenced_writes: str | None = None
) -> dict[str, str]:
    """What a record says of its run's pending table (`RunRecord.pending`): its name, the run's
    commit tag, the model table's version before it was made (empty: the table had none), and
    the transaction id its writes carry, if any (core/recovery/txn_fence.py)."""
    says = {
        PENDING_PROPERTY: pending,
        TAG_PROPERTY: tag,
        CREATED_VERSION_PROPERTY: "" if version is None else str(version),
    }
    if fenced_writes:
        says[FENCED_PROPERTY] = fenced_writes
    return says
