"""Settling other runs' pending tables of a model: their leases read and watched on this run's own
clock (core/recovery/lease.py), then each moved into the quarantine or dropped from the model
table's own record (core/recovery/pending.decide_pending), marked taken over first. The Runner
calls it under the model's settling lease, on a connection behind that lease's fence."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark, process_running
from dbt.adapters.spark_contracts.core.evolution.capabilities import drop_sql
from dbt.adapters.spark_contracts.core.recovery import pending as protocol
from dbt.adapters.spark_contracts.core.recovery.lease import Seen, State, Watch, judge
from dbt.adapters.spark_contracts.core.recovery.manual import manual_move, rows_of_pending
from dbt.adapters.spark_contracts.core.recovery.record import PENDING_PROPERTY, RunRecord
from dbt.adapters.spark_contracts.run import record_io
from dbt.adapters.spark_contracts.run.fence import commit_markers, fences
from dbt.adapters.spark_contracts.run.heartbeat import lease_seconds, this_client
from dbt.adapters.spark_contracts.run.lease import Leases, ModelKey
from dbt.adapters.spark_contracts.run.model_run import quarantine_format_for
from dbt.adapters.spark_contracts.run.outcome_events import RunBook
from dbt.adapters.spark_contracts.run.quarantine_steps import Quarantine
from dbt.adapters.spark_contracts.run.run_errors import RunInProgress

logger = AdapterLogger("SparkContracts")


def bare(table: str) -> str:
    """A table's own name, as a listing gives it (no schema, no quotes, lower case)."""
    return table.rsplit(".", 1)[-1].strip("`").lower()


@dataclass(frozen=True)
class Claim:
    """Another run's pending table and the table that keeps its bookkeeping and lease: that
    run's record (core/recovery/record.py), or, as builds before the record wrote it, the
    pending table itself (`lease` is then its name)."""

    pending: protocol.Pending  # its `name` is the pending table's
    lease: str
    record: bool  # the lease is a run record: dropped once the rows are settled
    seen: RunRecord  # the lease as read when it was found


def claims(
    spark: Spark, records: Sequence[RunRecord], pendings: Sequence[str], unique_id: str
) -> List[Claim]:
    """What to settle: the pending table of each of `records` (other runs' records) that names
    one and carries no intent (one with an intent is its repair's) and no watch for a late
    commit (its repair looks at that first: a late load rolled back is no load; on Delta, whose
    marker fences the load off, the watch is for an ALTER only), and each pending table of
    `pendings` (listed now) that no record names, read from its own properties (gone since it
    was listed: passed over)."""
    found = [
        Claim(r.pending, r.table, True, r)
        for r in records
        if r.pending is not None
        and r.intent is None
        and (r.late is None or r.pending.fenced_writes is not None)
    ]
    # a pending table named by any record is that record's (one with an intent: its repair's)
    named = {bare(r.pending.name) for r in records if r.pending is not None}
    for name in pendings:
        if bare(name) in named:
            continue
        try:
            properties = record_io.table_properties(spark, name)
        except DbtDatabaseError as exc:  # gone since it was listed (its run dropped it)
            logger.debug(f"{unique_id}: {name} cannot be read ({exc}); passed over")
            continue
        pending = protocol.Pending.from_properties(name, properties)
        found.append(Claim(pending, name, False, RunRecord.from_properties(name, properties)))
    return found


def watch_leases(
    spark: Spark, leases: Dict[str, RunRecord], unique_id: str, table_format: str
) -> Set[str]:
    """The leases (by table) that bind: renewed while watched on this run's clock
    (core/recovery/lease.py), never judged by another machine's clock. One whose run's process
    on this host is gone, or that was released or taken over, is not watched; the others are
    watched together until each is renewed or has run out (a lease's length at most). A lease
    gone meanwhile (its run settled its rows) leaves `leases`."""
    host = this_client().host
    watched = {
        name: lease
        for name, lease in leases.items()
        if judge(lease, host, process_running) is State.WATCH
    }
    watch, live, told = Watch(lease_seconds()), set(), False
    while watched:
        now = time.monotonic()
        for name, lease in list(watched.items()):
            seen = watch.see(lease, now)
            if seen is not Seen.WAITING:
                del watched[name]
                if seen is Seen.LIVE:
                    live.add(name)
        if not watched:
            break
        if not told:
            logger.info(
                f"{unique_id}: waiting up to {lease_seconds():.0f} s for the lease of "
                f"{len(watched)} run(s) with discarded rows pending ({', '.join(watched)}): a "
                "run that is alive renews it, one that died lets it run out"
            )
            told = True
        time.sleep(1.0)
        for name in list(watched):
            record = record_io.read_lease(spark, name, table_format)
            if record is None:  # its run settled it
                del watched[name]
                leases.pop(name, None)
            else:
                watched[name] = record
    return live


def settle_others(
    quarantine_steps: Quarantine,
    relation: str,
    table_format: str,
    quarantine: str,
    found: Sequence[Claim],
    listed: Set[str],
    unique_id: str,
    invocation_id: str,
) -> List[str]:
    """Other runs' pending tables of this model, settled from the model table's own record
    (core/recovery/pending.decide_pending), each lease marked taken over by `invocation_id`
    (this run) before anything is moved or dropped: what was done, one line each. `listed`:
    the pending tables listed now (`bare` names); a record whose pending table is not among them
    (moved already, or never made) is dropped once its lease no longer binds."""
    spark = quarantine_steps.spark
    done: List[str] = []
    record: Optional[protocol.ModelRecord] = None
    here: Optional[protocol.Application] = None
    leases: Dict[str, RunRecord] = {}
    for claim in found:
        # a record read again (it was read before the settling lease); a pending table's own
        # properties were just read (`claims`)
        lease = (
            record_io.read_lease(spark, claim.lease, table_format) if claim.record else claim.seen
        )
        if lease is not None:  # else its run let go of it meanwhile: settled
            leases[claim.lease] = lease
    binding = watch_leases(spark, leases, unique_id, table_format)
    marked: Set[str] = set()
    fenced: Set[str] = set()
    if fences(table_format):  # marked, and fenced off, before the model table's log is read
        marked, fenced = take_over(
            spark,
            found,
            (leases, binding, listed),
            invocation_id,
            (relation, quarantine),
            table_format,
        )
    for claim in found:
        if claim.lease not in leases:
            continue
        pending, name = claim.pending, claim.pending.name
        run = pending.run or "unknown"
        if claim.record and bare(name) not in listed:
            if claim.lease in binding:
                continue
            if claim.lease not in marked:
                spark.run(record_io.take_over_sql(claim.lease, invocation_id))
            settled(spark, leases[claim.lease], table_format)
            logger.info(
                f"{unique_id}: dropped run {run}'s record {claim.lease}: its pending table "
                f"{name} is not there (its rows were moved, or it was never made)"
            )
            continue
        # every pending table's record says the model table's version when it was made; one
        # that does not is still moved when its load is in the log, else kept with a warning,
        # never dropped on an absence (core/recovery/pending.decide_pending)
        if record is None:
            record = quarantine_steps.model_record(relation, table_format)
        if here is None:
            here = spark.application()
        gone = protocol.application_gone(pending.application, here, process_running)
        # a marker went in under the record's id, and the load said it carries that id
        fenced_off = claim.lease in fenced and pending.fenced_writes == leases[claim.lease].txn_app
        decision = protocol.decide_pending(
            pending,
            record,
            claim.lease in binding,
            gone,
            fenced_off,
            # a record its run let go of; a pending table without its record is released
            # from the start (`copy_of`), which says nothing of its run
            released=claim.record and leases[claim.lease].let_go,
        )
        if decision.action is protocol.Action.WAIT:
            logger.info(
                f"{unique_id}: {name} belongs to run {run}, which may be alive "
                f"({decision.reason}); left to it"
            )
            continue
        rows = rows_of_pending(pending, quarantine)  # whose rows it holds
        if decision.action is protocol.Action.KEEP:
            logger.warning(
                f"{unique_id}: {name} holds discarded rows of run {run}, which did not "
                f"finish; {decision.reason}, so it is kept. By hand: "
                f"{manual_move(name, quarantine, table_format, rows)}"
            )
            continue
        if claim.lease not in marked:  # taken over first: that run can commit nothing after
            spark.run(record_io.take_over_sql(claim.lease, invocation_id))
        if decision.action is protocol.Action.MOVE:
            what = quarantine_steps.move(relation, table_format, quarantine, name, rows)
        else:
            spark.run(drop_sql(name, table_format))
            what = f"dropped {name}"
        if claim.record:  # its rows are settled
            settled(spark, leases[claim.lease], table_format)
        message = f"settled run {run}'s discarded rows: {what} ({decision.reason})"
        logger.warning(f"{unique_id}: {message}")
        done.append(message)
    return done


def settled(spark: Spark, lease: RunRecord, table_format: str) -> None:
    """`lease`'s pending rows are settled: the record says nothing more and is dropped, unless
    it keeps a watch for its run's late commit (a Delta record's: its repair looks at that),
    which then stays without its pending table."""
    if lease.late is None:
        record_io.drop_record(spark, lease.table, table_format)
    else:
        spark.run(record_io.set_properties_sql(lease.table, {PENDING_PROPERTY: ""}))


def take_over(
    spark: Spark,
    found: Sequence[Claim],
    seen: Tuple[Dict[str, RunRecord], Set[str], Set[str]],
    invocation_id: str,
    tables: Tuple[str, str],
    table_format: str,
) -> Tuple[Set[str], Set[str]]:
    """Each claim's lease that no longer binds marked taken over by `invocation_id` (this run)
    first, before the model table's log is read: that run, if it was only stalled, can commit
    nothing after its fence finds the mark. Then, where its pending table is there, its writes
    to `tables` (the model table, the quarantine) are fenced off inside the commit where their
    format can (run/fence.commit_markers). `seen`: the claims' leases read now, those that bind, the pending tables listed.
    Returns (the leases marked, those whose model table got a marker)."""
    (leases, binding, listed), (relation, quarantine) = seen, tables
    marked: Set[str] = set()
    fenced: Set[str] = set()
    for claim in found:
        if claim.lease not in leases or claim.lease in binding:
            continue
        spark.run(record_io.take_over_sql(claim.lease, invocation_id))
        marked.add(claim.lease)
        if not claim.record or bare(claim.pending.name) not in listed:
            continue
        tables_of = [(relation, table_format), (quarantine, quarantine_format_for(table_format))]
        if relation in commit_markers(spark, leases[claim.lease], tables_of):
            fenced.add(claim.lease)
    return marked, fenced


def settle_pending(
    spark: Spark,
    leases: Leases,
    book: RunBook,
    model: ModelKey,
    quarantine: str,
    records: Sequence[RunRecord],
    pendings: Sequence[str],
) -> List[str]:
    """Other runs' pending tables of `model` (named by their runs' `records`, or listed in
    `pendings`: every pending table of the quarantine listed now), settled while this run holds the model's
    settling lease (`SETTLE_SUFFIX`) alone: two runs never settle one pending table at once,
    also where the quarantine's format has no conflict check (Parquet). Only settlers look
    for that lease, so a multi-step run of the model is never held up by it. A run that
    finds another settler's lease leaves the tables for a later run (they stay pending).
    Behind the fence: each statement it sends checks that lease first (`LeaseLost`)."""
    waiting = [r for r in records if r.pending is not None and r.intent is None]
    if not waiting and not pendings:
        return []
    try:
        leases.alone(model, protocol.SETTLE_SUFFIX)
    except RunInProgress as exc:
        logger.info(
            f"{model.unique_id}: run {exc.invocation_id} of the model holds its lease; "
            f"{len(waiting) + len(pendings)} pending table(s) left for a later run"
        )
        return []
    # each statement behind the settling lease's fence
    settler = Quarantine(record_io.Fenced(spark, lambda: leases.check(model)), book)
    try:
        found = claims(settler.spark, records, pendings, model.unique_id)
        return settle_others(
            settler,
            model.relation,
            model.table_format,
            quarantine,
            found,
            {bare(p) for p in pendings},
            model.unique_id,
            model.invocation_id,
        )
    finally:
        leases.let_go(model)
