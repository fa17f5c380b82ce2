"""The step before planning: a table or incremental build that evolves first repairs what dead
runs of the model left (their run records, core/recovery/record.py), under the model's lease
(core/recovery/lease.py), and settles their pending discarded rows; planning then only reads. `Repaired` is what the step hands to the plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.core.contracts.quarantine import QUARANTINE_SUFFIX
from dbt.adapters.spark_contracts.core.evolution.render import suffixed
from dbt.adapters.spark_contracts.core.recovery.intent import find_intent
from dbt.adapters.spark_contracts.core.recovery.pending import (
    LEASE_SUFFIX,
    PENDING_SUFFIX,
    is_invocations_pending,
    is_pending_of,
    lease_name,
)
from dbt.adapters.spark_contracts.core.recovery.record import RunRecord
from dbt.adapters.spark_contracts.run import late
from dbt.adapters.spark_contracts.run.lease import ModelKey
from dbt.adapters.spark_contracts.run.record_io import records_of
from dbt.adapters.spark_contracts.run.settle import settle_pending

logger = AdapterLogger("SparkContracts")
READ_ONLY = ("create or replace temporary view", "refresh table", "describe", "show", "select")


@dataclass(frozen=True)
class Repaired:
    """The relation a build goes on with (put back from a stopped swap, if one was), the commit
    tag its session carries from here on, what was repaired, and the deployed table as read
    after the repairs (schema, properties), so the plan reads it once."""

    relation: Any = None
    tag: str = ""
    repairs: Tuple[str, ...] = ()
    deployed: Optional[Tuple[Any, Dict[str, str]]] = None


def repair(
    spark: Any,
    runner: Any,
    key: ModelKey,
    deployed: Tuple[Any, Dict[str, str]],
    read_again: Any,
    dry_run: bool = False,
) -> Tuple[Tuple[str, ...], Tuple[Any, Dict[str, str]]]:
    """What dead runs left half done put back (their run records' intents, under the model's
    lease: run/restore.Restorer.repair), then other runs' pending tables of the model's
    quarantine settled (under the settling lease): (what was done, the deployed table as it is
    after it). The records and the pending tables are found by one listing. `read_again()`
    reads the deployed table again. A dry run (`dry_run`) changes nothing: what a run would
    repair or settle first is named in a warning, and its plan is against the table as it is.
    A run of a model an earlier batch of this invocation left to the next one changes nothing
    (`Runner.hold_if_left`)."""
    if not dry_run:  # an earlier batch's statement may still commit: nothing repaired, settled
        runner.hold_if_left(key.relation, key.unique_id)
    repairs: Tuple[str, ...] = ()
    older = find_intent(deployed[1])  # written into the table's properties before the run record
    on_table = older is not None and older.invocation_id != key.invocation_id
    records, pendings = recovery_tables(spark, key)
    if dry_run:
        left = [
            r.table
            for r in records
            if r.intent
            or r.swap
            or r.pending
            or late.to_do(spark, r, key.relation, key.table_format)
        ]
        left += pendings + ([f"{key.relation} (its properties' intent)"] if on_table else [])
        if left:
            logger.warning(
                f"{key.unique_id}: dry run: not repaired: {', '.join(left)}; a run that is not "
                "a dry run repairs or settles first those whose run has ended, so its plan may "
                "differ from this one"
            )
        return repairs, deployed
    # a dead run's intent, or a repaired run's late commit landed (or its run gone: the watch
    # ends), looked for without the lease first, so a watch alone holds up no concurrent run
    dead = [r for r in records if r.intent is not None]
    dead += [r for r in records if late.to_do(spark, r, key.relation, key.table_format)]
    if on_table or dead:
        done = runner.repair(key, on_table)
        if done:
            repairs += (done,)
        deployed = read_again()
        records, pendings = recovery_tables(spark, key)  # as the repair left them
    if pendings or any(r.pending is not None for r in records):
        # other runs' discarded rows, not yet in the quarantine (core/recovery/pending.py)
        quarantine = suffixed(key.relation, QUARANTINE_SUFFIX)
        settled = settle_pending(
            spark, runner.leases, runner.book, key, quarantine, records, pendings
        )
        repairs += tuple(settled)
    return repairs, deployed


def recovery_tables(spark: Any, key: ModelKey) -> Tuple[List[RunRecord], List[str]]:
    """Other runs' records of the model (core/recovery/record.py) and other invocations'
    pending tables of its quarantine (also where the model no longer quarantines: a record may
    name one), listed now in one statement
    (not from dbt's relation cache, which another run's table may have joined or left since it
    was read). This invocation's own are left out, its microbatch batches' too: a batch settles
    its own pending table when it fails (run/quarantine_steps.py), else the model's next
    invocation does."""
    schema, identifier = key.relation.rsplit(".", 1)
    quarantine = suffixed(identifier, QUARANTINE_SUFFIX)
    patterns = [identifier + LEASE_SUFFIX + "*", quarantine + PENDING_SUFFIX + "*"]
    rows = spark.fetch(f"show tables in {schema} like '{'|'.join(patterns)}'")
    names = [str(r.get("tableName") or "") for r in rows]
    prefix = (identifier + LEASE_SUFFIX).lower()
    leases = [n for n in names if n.lower().startswith(prefix)]
    own = lease_name(identifier, key.invocation_id)
    records = records_of(spark, schema, leases, own, key.table_format)
    pendings = sorted(
        f"{schema}.{n}"
        for n in names
        if is_pending_of(n, quarantine)
        and not is_invocations_pending(n, quarantine, key.invocation_id)
    )
    return records, pendings


class TaggedRepairs:
    """The runner of the repair step, whose repair of a dead run's intent (a RESTORE, which
    looks its own commit up by the session's tag, run/table_log.py) goes with this run's tag
    in the session: set just before it."""

    def __init__(self, runner: Any, tags: Any, spark: Any, tag: str) -> None:
        self._runner, self._tags, self._spark, self._tag = runner, tags, spark, tag

    def repair(self, key: ModelKey, on_table: bool) -> Optional[str]:
        self._tags.set(self._spark, self._tag)
        return self._runner.repair(key, on_table, self._tag)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)


class PlanWrote(RuntimeError):
    """Planning sent a statement that is not a read: a bug in the adapter, caught before the
    statement reaches Spark."""


class ReadOnly:
    """The run's Spark while it is planned: reads pass (`READ_ONLY`, by the statement's first
    words), anything else raises `PlanWrote` before it is sent. `sent`: every statement."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self.sent: List[str] = []

    def _check(self, sql: str) -> None:
        self.sent.append(sql)
        if not " ".join(sql.split()).lower().startswith(READ_ONLY):
            raise PlanWrote(f"planning only reads, and it was about to send: {sql[:200]}")

    def run(self, sql: str) -> Any:
        self._check(sql)
        return self._spark.run(sql)

    def fetch(self, sql: str) -> Any:
        self._check(sql)
        return self._spark.fetch(sql)

    def __getattr__(self, name: str) -> Any:
        if name in ("set_conf", "own_connection", "observe"):
            raise PlanWrote(f"planning only reads, and it called {name}")
        return getattr(self._spark, name)
