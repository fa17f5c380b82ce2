"""Leases (core/recovery/lease.py): `Leases`, the runner's collaborator for the model-level
leases (take, hold alone, check, let go, read other runs'). A run's lease on a table (its
`<model>__dbt_lease_<run>` / `__dbt_settle_<run>` record): while the run holds it, a thread of
its own renews the heartbeat on a connection of its own, so that no other run takes over from
a run that is still alive; released (heartbeat "0") when the run lets go. Another run's lease
is judged by positive evidence (its process on this host is gone) or watched on this run's own
clock until its heartbeat changes (alive: `RunInProgress`) or has not changed for the lease's
length: a dead or expired lease is taken over, marked with the run that took it and the next
epoch. A holder checks its own lease before each irreversible step (`Leases.check`, the fence)
and fails with `LeaseLost` once another run took it over."""

import random
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import Spark, process_running
from dbt.adapters.spark_contracts.core.recovery.late import LATE_PROPERTY
from dbt.adapters.spark_contracts.core.recovery.lease import (
    Seen,
    State,
    Watch,
    beat_interval,
    holder_gone,
    judge,
    may_still_run,
    next_epoch,
)
from dbt.adapters.spark_contracts.core.recovery.pending import LEASE_SUFFIX
from dbt.adapters.spark_contracts.core.recovery.record import (
    COMMIT_TAG_PROPERTY,
    EPOCH_PROPERTY,
    SHARED_PROPERTY,
    SWAP_PROPERTY,
    TXN_APP_PROPERTY,
    RunRecord,
)
from dbt.adapters.spark_contracts.core.recovery.txn_fence import app_id
from dbt.adapters.spark_contracts.core.schema.types import sql_string
from dbt.adapters.spark_contracts.run import late
from dbt.adapters.spark_contracts.run.fence import (  # noqa: F401 (confirm: named from here too)
    carrying,
    commit_markers,
    confirm,
    fence_off,
    fences,
    history_marker,
    refuse_unguarded,
)
from dbt.adapters.spark_contracts.run.heartbeat import (  # noqa: F401 (named from here too)
    LEASE_ENV,
    Heartbeat,
    beat_sql,
    lease_seconds,
    this_client,
    wait_while,
)
from dbt.adapters.spark_contracts.run.model_run import quarantine_format_for
from dbt.adapters.spark_contracts.run.record_io import (  # noqa: F401 (named from here too)
    LeaseOwner,
    ModelKey,
    drop_record,
    lease_properties,
    other_records,
    record_name,
    set_properties_sql,
    take_over_sql,
)
from dbt.adapters.spark_contracts.run.run_errors import LeaseLost, RunInProgress

logger = AdapterLogger("SparkContracts")


# rounds of two runs taking their leases at one moment before this one gives up (Leases.alone)
LEASE_ROUNDS = 5


def first_of(owner: LeaseOwner, binding: Sequence[RunRecord]) -> bool:
    """`owner`'s run sorts before every run in `binding` (by invocation id): of runs that took
    their leases at one moment, it is the one that goes on."""
    return all(owner.invocation_id < (r.run or "") for r in binding)


class Leases:
    """The model-level leases of one run on one connection; `held`: the one it holds, if any."""

    def __init__(self, spark: Spark) -> None:
        self.spark = spark
        self.held: Optional[Heartbeat] = None
        self.swapping = False  # the held record says a swap is under way
        # the held record's transaction id, drawn when it was taken (`draw`), and the last
        # version its writes carried (`fenced`); None where its format has none
        self.txn_app: Optional[str] = None
        self.txn_version = 0
        # (record table, tag): the repairers' records its last takeover gave a watch (late.py)
        self.watching: List[Tuple[str, str]] = []
        self.undo_may_land = False  # its last takeover's: run/late.undo_may_land
        self.abandoned = ""  # the statement without an answer for which `abandon` left it

    def take(
        self,
        owner: LeaseOwner,
        suffix: str = LEASE_SUFFIX,
        says: Optional[Dict[str, str]] = None,
        txn_app: Optional[str] = None,
        tag: Optional[str] = None,
    ) -> None:
        """The run's record made, saying `says` from the start, and its lease held. With `says`
        (a run that only quarantines: its pending table) the record is `shared`: it does not
        hold the model alone (`alone` passes it by). `txn_app`: the transaction id it names (one
        `draw` gave), else one is drawn for a run's lease where its format has them. `tag`: a
        repairing run's commit tag, which its record names (`COMMIT_TAG_PROPERTY`)."""
        lease = record_name(owner, suffix)
        since = time.monotonic()
        extra = dict(says or {})
        if says is not None:
            extra[SHARED_PROPERTY] = "true"
        app = txn_app or (self.draw(owner) if suffix == LEASE_SUFFIX else None)
        self.txn_app, self.txn_version = app, 0
        if app is not None:
            extra[TXN_APP_PROPERTY] = app
        if tag:
            extra[COMMIT_TAG_PROPERTY] = tag
        pairs = "".join(f", '{k}' = {sql_string(v)}" for k, v in extra.items())
        self.spark.run(
            f"create table if not exists {lease} (lease int) using "
            f"{quarantine_format_for(owner.table_format)} "
            f"tblproperties ({lease_properties(self.spark, owner.invocation_id)}{pairs})"
        )
        self.held = Heartbeat(self.spark, lease, since=since).start()
        self.swapping = False

    def alone(
        self, owner: LeaseOwner, suffix: str = LEASE_SUFFIX, tag: Optional[str] = None
    ) -> List[RunRecord]:
        """Take the run's lease and hold it only if no other run of the model holds one (`tag`:
        a repairing run's commit tag, for its record). A dead or expired lease is taken over;
        one that may be alive is watched until it is renewed (`RunInProgress`), goes or expires.
        Of two runs that took their leases at one moment, the one whose invocation id sorts
        first keeps its lease and outwaits the other's (`_outwait`), which lets go and waits:
        one goes on, never neither, and no clock or random wait decides it. A failure lets go
        of the lease. Returns the other runs' records that still say their run was changing a
        table (`RunRecord.holds_work`): only a run that repairs them drops them."""
        watch = Watch(lease_seconds())
        for round_ in range(1, LEASE_ROUNDS + 1):
            self.take(owner, suffix, tag=tag)
            try:
                others = self._exclusive(owner, suffix)
                binding = self._binding(owner, others, watch)
                if binding and first_of(owner, binding):
                    others, binding = self._outwait(owner, suffix, watch)
                if not binding:
                    self._take_over(owner, others, watch, suffix == LEASE_SUFFIX, tag)
                    return [r for r in others if r.holds_work]
            except BaseException:
                self.let_go(owner)
                raise
            self.let_go(owner)
            if round_ == LEASE_ROUNDS:
                raise RunInProgress(owner.unique_id, owner.relation, binding[0].holder)
            time.sleep(random.uniform(0.5, 2.0) * round_)
            self._wait_for(owner, suffix, watch)

    def _outwait(
        self, owner: LeaseOwner, suffix: str, watch: Watch
    ) -> Tuple[List[RunRecord], List[RunRecord]]:
        """Holding its lease, this run (first of those it found: `first_of`) watches the others'
        until none binds (a run that tied with it lets go of its own at once; a dead one's
        expires) or one sorts before it: (the others, those that bind). A lease seen renewed is
        a live run's: `RunInProgress` (the caller lets go)."""
        told = False
        while True:
            time.sleep(min(1.0, beat_interval(watch.lease_seconds) / 2))
            others = self._exclusive(owner, suffix)
            binding = self._binding(owner, others, watch)
            if not binding or not first_of(owner, binding):
                return others, binding
            if not told:
                logger.info(
                    f"{owner.unique_id}: holding its lease on {owner.relation}, waiting for "
                    f"run {binding[0].holder}'s to go or run out"
                )
                told = True

    def _exclusive(self, owner: LeaseOwner, suffix: str) -> List[RunRecord]:
        """Other runs' records that hold (or held) the model alone: a `shared` record, a run's
        that only quarantines, is its settler's (run/settle.py), never a reason to wait."""
        others = other_records(
            self.spark, owner.relation, owner.invocation_id, suffix, owner.table_format
        )
        return [r for r in others if not r.shared]

    def _state(self, record: RunRecord) -> State:
        return judge(record, this_client().host, process_running)

    def _binding(
        self, owner: LeaseOwner, others: Sequence[RunRecord], watch: Watch
    ) -> List[RunRecord]:
        """The leases among `others` that may still be held; one seen renewed is a live run's
        (`RunInProgress`)."""
        binding, now = [], time.monotonic()
        for record in others:
            if self._state(record) is not State.WATCH:
                continue
            seen = watch.see(record, now)
            if seen is Seen.LIVE:
                raise RunInProgress(owner.unique_id, owner.relation, record.holder)
            if seen is Seen.WAITING:
                binding.append(record)
        return binding

    def _wait_for(self, owner: LeaseOwner, suffix: str, watch: Watch) -> None:
        """Watch the other runs' leases until none binds (gone, released, dead or expired);
        `RunInProgress` as soon as one is renewed. Says so on the console while it waits."""

        def binding() -> List[RunRecord]:
            return self._binding(owner, self._exclusive(owner, suffix), watch)

        def say(first: RunRecord, left: float) -> str:
            return (
                f"{owner.unique_id}: waiting up to {left:.0f} s for the lease of run "
                f"{first.holder} on {owner.relation}: it has not been renewed since this run "
                "found it; a run that is alive renews it, one that died lets it run out"
            )

        wait_while(binding, watch, say)

    def _take_over(
        self,
        owner: LeaseOwner,
        others: Sequence[RunRecord],
        watch: Watch,
        fence: bool = True,
        tag: Optional[str] = None,
    ) -> None:
        """Other runs' leases that are dead or expired marked taken over by this run, which
        holds the next epoch; `fence`: each one's holder's writes to the model table then
        fenced off inside the commit where its format can (run/fence.commit_markers); `tag`: a
        repair's (its tag), which watches for a repairer's late RESTORE (run/late.on_takeover).
        A lease taken over whose
        holder's process on this host is gone is dropped (only that process's fence read the
        mark); one whose holder may be alive stays marked for its fence (`check`); one that
        says its run was changing a table is left to the run that repairs it."""
        host = this_client().host
        taken = [r for r in others if not r.released and not r.taken_by]
        if fence:  # a model's lease (a settler's late move into a Parquet quarantine is the
            # at-least-once gap run-guarantees.md names)
            refuse_unguarded(self.spark, owner, [(r, self._state(r)) for r in taken])
        stale = [
            r
            for r in others
            if r.taken_by and not r.holds_work and holder_gone(r, host, process_running)
        ]
        self.watching = []
        self.undo_may_land = fence and late.undo_may_land(self.spark, others, owner.table_format)
        for record in taken:
            dead = self._state(record) is State.DEAD
            # a repairer that may still commit: watched for its late RESTORE (run/late.py)
            found = (
                late.on_takeover(self.spark, record, owner.table_format) if fence and tag else None
            )
            told = {LATE_PROPERTY: found.to_property()} if found else {}
            self.spark.run(take_over_sql(record.table, owner.invocation_id, told))
            self.watching += [(record.table, found.tag)] if found else []
            why = (
                "its process on this host has ended"
                if dead
                else f"it was not renewed for {watch.lease_seconds:.0f} s"
            )
            logger.warning(
                f"{owner.unique_id}: took over the lease of run {record.holder} on "
                f"{owner.relation} ({why}); that run can commit nothing more"
            )
            if not told and not record.holds_work and holder_gone(record, host, process_running):
                stale.append(record)
        if fence:  # also a record taken over before (its taker may have died before this)
            marked = False  # one empty snapshot changes the history every guard reads
            for record in [*taken, *(r for r in others if r.taken_by and r.holds_work)]:
                commit_markers(self.spark, record, [(owner.relation, owner.table_format)])
                # (not again for one only watched: its taker marked it, and a watch lasts)
                again = record in taken or record.late is None
                if again and not marked and may_still_run(record, host, process_running):
                    marked = history_marker(self.spark, record, owner.relation, owner.table_format)
        if taken and self.held is not None:
            self.write(owner, {EPOCH_PROPERTY: str(next_epoch(taken))})
        for record in stale:  # no one can read them any more: their holders are gone
            self._drop(record.table, owner)

    def _drop(self, table: str, owner: LeaseOwner) -> None:
        try:
            drop_record(self.spark, table, owner.table_format)
        except Exception as exc:
            logger.warning(f"{owner.unique_id}: could not drop {table}, a lease taken over: {exc}")

    def check(self, owner: LeaseOwner) -> None:
        """The fence, before an irreversible step: the run's own lease is still its own, or
        `LeaseLost`, naming the run that took it over. Its heartbeat stops, and it drops its
        record (the mark was for it alone), unless the record says what a taker must repair."""
        beat = self.held
        if beat is None:
            return
        found = confirm(self.spark, beat, owner.table_format)
        if not found.held:
            beat.stop()
            self.held, self.txn_app = None, None
            if not found.work:
                self._drop(beat.table, owner)
            raise LeaseLost(
                owner.unique_id,
                owner.relation,
                found.taken_by,
                unconfirmed_after=found.unconfirmed_after,
                renew_error=found.renew_error,
            )

    def draw(self, owner: LeaseOwner) -> Optional[str]:
        """A new transaction id for `owner`'s record, where its format fences inside the commit:
        its name and a nonce (core/recovery/txn_fence.app_id), so no two holders of one record
        name share a version sequence."""
        if not fences(owner.table_format):
            return None
        return app_id(record_name(owner), uuid.uuid4().hex[:12])

    def fenced(self, table_format: str, action: Callable[[], Any]) -> Any:
        """`action`, a write to a table of `table_format` this run answers for under the lease it
        holds (its model table, its quarantine), sent under the record's transaction id at the
        next version where the format fences inside the commit (core/recovery/txn_fence.py):
        once a taker's marker is in, that write is skipped or fails. A skipped write returns
        as if done: the caller checks the lease after it (the mark came before the marker, so
        the fence finds it)."""
        if self.held is None or self.txn_app is None or not fences(table_format):
            return action()
        self.txn_version += 1
        with carrying(self.spark, self.txn_app, self.txn_version):
            return action()

    def fence_off_own(self, owner: LeaseOwner) -> bool:
        """This run's own writes to its model table that may still be on their way (a load or
        a backfill Spark gave no answer for: writes of rows, which carry the id) made final: a
        marker under the run's own transaction id (run/fence.fence_off). True: the table's log now says for good whether they committed
        (its format fences inside the commit, the run's writes carry an id, the table exists).
        Only a failed run calls it: no write of its own follows on that table under that id."""
        if self.held is None or self.txn_app is None or not fences(owner.table_format):
            return False
        tables = [(owner.relation, owner.table_format)]
        return bool(fence_off(self.spark, self.txn_app, self.held.table, tables))

    def write(self, owner: LeaseOwner, properties: Dict[str, str]) -> None:
        """The held record says `properties` from here on (its intent, the steps done, a swap
        under way), written between two beats. A failure raises: what the record does not say,
        no repair can read."""
        beat = self.held
        if beat is None:
            raise RuntimeError(f"{owner.unique_id}: no run record is held to write to")
        beat.write(self.spark, set_properties_sql(beat.table, properties))
        if SWAP_PROPERTY in properties:
            self.swapping = bool(properties[SWAP_PROPERTY])

    def end(self, owner: LeaseOwner) -> None:
        """The held record dropped, once what it says stands (the run's change is done): a
        failure raises, since the record would have the next run repair a change that is
        done."""
        beat, self.held, self.txn_app = self.held, None, None
        if beat is None:
            return
        beat.stop()
        drop_record(self.spark, beat.table, owner.table_format)

    def let_go(self, owner: LeaseOwner) -> None:
        """The held lease dropped."""
        self.release(owner, keep=False)

    def abandon(self, step: str) -> None:
        """The held lease left as it is, its heartbeat stopped, not released: a statement of
        this run Spark gave no answer for (`step`) may still commit, so the next run takes the
        lease over as a dead run's, with its marker and the watch for a late commit
        (run/late.py). `abandoned` names it from here on."""
        self.abandoned = step
        beat, self.held, self.txn_app, self.swapping = self.held, None, None, False
        if beat is not None:
            beat.stop()

    def release(self, owner: LeaseOwner, keep: bool) -> None:
        """The held lease stopped; `keep`: left (its heartbeat "0": the next run need not wait
        for it), else dropped. A failure is logged: the lease runs out by itself."""
        beat, self.held, self.txn_app = self.held, None, None
        if beat is None:
            return
        beat.stop()
        try:
            if keep:
                self.spark.run(beat_sql(beat.table, 0))
            else:
                drop_record(self.spark, beat.table, owner.table_format)
        except Exception as exc:
            logger.warning(f"{owner.unique_id}: could not let go of its lease {beat.table}: {exc}")
