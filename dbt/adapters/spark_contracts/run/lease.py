"""Leases (core/pending.py). A run's lease on a table (its pending table, or the
`<model>__dbt_lease_<run>` / `__dbt_settle_<run>` table that says a run of the model is at work):
while the run holds it, a thread of its own renews the table's heartbeat on a connection of its
own (every connection method: dbt opens one per thread), so that another run of the model never
takes over from a run that is still alive. Released (heartbeat "0") when the run lets go.

`Leases` is the runner's collaborator for the model-level leases: take, hold alone, let go, and
read other runs' leases."""

import os
import random
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Protocol, Tuple

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.intent import Intent
from dbt.adapters.spark_contracts.core.pending import (
    BEAT_PROPERTY,
    BEAT_SECONDS,
    LEASE_SECONDS,
    LEASE_SUFFIX,
    RUN_PROPERTY,
    heartbeat_of,
    lease_is_fresh,
    lease_name,
)
from dbt.adapters.spark_contracts.core.types import drop_sql, sql_string
from dbt.adapters.spark_contracts.run.model_run import quarantine_format_for
from dbt.adapters.spark_contracts.run.run_errors import RunInProgress

logger = AdapterLogger("SparkContracts")
LEASE_ENV = "DBT_SPARK_CONTRACTS_LEASE_SECONDS"


class LeaseOwner(Protocol):
    """Who holds a model's run lease: a planned `ModelRun`, or a `ModelKey` while settling."""

    @property
    def relation(self) -> str: ...
    @property
    def invocation_id(self) -> str: ...
    @property
    def table_format(self) -> str: ...
    @property
    def unique_id(self) -> str: ...


@dataclass(frozen=True)
class ModelKey:
    """One invocation's run of one model, before its run is planned."""

    relation: str
    invocation_id: str
    table_format: str
    unique_id: str


def lease_seconds() -> float:
    """How long a pending table's lease stays fresh after its last heartbeat."""
    value = os.environ.get(LEASE_ENV)
    if not value:
        return LEASE_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"${LEASE_ENV}={value!r}: expected a number of seconds") from None
    if seconds <= 0:
        raise ValueError(f"${LEASE_ENV}={value!r}: expected a positive number of seconds")
    return seconds


def beat_sql(table: str, at: Optional[float] = None) -> str:
    value = "0" if at == 0 else str(int(at if at is not None else time.time()))
    return f"alter table {table} set tblproperties ('{BEAT_PROPERTY}' = '{value}')"


class Heartbeat:
    """Renews `table`'s lease every `interval` seconds until `stop()`. `made=False`: the table
    is still being made (a pending table's CREATE TABLE AS SELECT, whose creation time counts
    as a sign of life); the beats begin once `made()` is called, so none fails on a table that
    does not exist yet."""

    def __init__(
        self, spark: Spark, table: str, interval: Optional[float] = None, made: bool = True
    ) -> None:
        self.spark, self.table = spark, table
        self.interval = interval if interval is not None else min(BEAT_SECONDS, lease_seconds() / 3)
        self._stop = threading.Event()
        self._made = threading.Event()
        if made:
            self._made.set()
        self._thread = threading.Thread(target=self._beat, name=f"lease {table}", daemon=True)

    def start(self) -> "Heartbeat":
        self._thread.start()
        return self

    def made(self) -> None:
        """The table exists now: beat at once if a beat is due, then every `interval`."""
        self._made.set()

    def _beat(self) -> None:
        if self._stop.wait(self.interval):
            return  # a short run: no connection opened, no beat
        while not self._made.is_set():  # the table is being made: nothing to renew yet
            if self._stop.wait(min(1.0, self.interval)):
                return
        failures = 0
        while True:
            try:
                with self.spark.own_connection(f"lease {self.table}") as own:
                    while True:
                        own.run(beat_sql(self.table))
                        failures = 0
                        if self._stop.wait(self.interval):
                            return
            except Exception as exc:  # the table is being made, or a blip: try again
                failures += 1
                if failures in (1, 10):
                    logger.warning(f"could not renew the lease on {self.table} ({exc}); retrying")
            if self._stop.wait(self.interval):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)


# rounds of two runs taking their leases at one moment before this one gives up (Leases.alone)
LEASE_ROUNDS = 5


def table_listed(spark: Spark, relation: str) -> bool:
    """`relation` (`schema.name`) is listed in its schema now (not dbt's cache)."""
    schema, name = relation.rsplit(".", 1)
    return bool(spark.fetch(f"show tables in {schema} like '{name.strip('`')}'"))


def table_properties(spark: Spark, table: str) -> Dict[str, str]:
    rows = spark.fetch(f"show tblproperties {table}")
    return {str(r.get("key")): str(r.get("value")) for r in rows}


class Leases:
    """The model-level leases of one run on one connection; `held` is the heartbeat of the
    lease it holds, if any (one at a time)."""

    def __init__(self, spark: Spark) -> None:
        self.spark = spark
        self.held: Optional[Heartbeat] = None

    def take(self, owner: LeaseOwner, suffix: str = LEASE_SUFFIX) -> None:
        lease, now = lease_name(owner.relation, owner.invocation_id, suffix), int(time.time())
        self.spark.run(
            f"create table if not exists {lease} (lease int) using "
            f"{quarantine_format_for(owner.table_format)} "
            f"tblproperties ('{RUN_PROPERTY}' = {sql_string(owner.invocation_id)}, "
            f"'{BEAT_PROPERTY}' = '{now}')"
        )
        self.held = Heartbeat(self.spark, lease).start()

    def alone(self, owner: LeaseOwner, suffix: str = LEASE_SUFFIX) -> None:
        """Take the run's lease and hold it only if no other run of the model holds one.

        Two runs that take their leases at one moment each see the other's. Both let go, wait a
        random while (longer on each round) and look again: a run that finds the other's lease
        still there fails, naming it (that run goes on, or fails in turn only if it saw this
        one's lease, which is gone); a run that finds it gone takes its lease again. So of two
        runs at once one goes on, never neither (but for `LEASE_ROUNDS` ties in a row). A
        failure while it holds its lease lets go of it (no heartbeat outlives the call)."""
        for round_ in range(1, LEASE_ROUNDS + 1):
            self.take(owner, suffix)
            try:
                others = self.live_runs(owner.relation, owner.invocation_id, suffix)
            except BaseException:
                self.let_go(owner)
                raise
            if not others:
                return
            self.let_go(owner)
            if round_ < LEASE_ROUNDS:
                time.sleep(random.uniform(0.5, 2.0) * round_)
                others = self.live_runs(owner.relation, owner.invocation_id, suffix)
            if others:  # its intent on the table: never written over
                raise RunInProgress(owner.unique_id, owner.relation, ", ".join(others), 0.0)

    def let_go(self, owner: LeaseOwner) -> None:
        """The held lease dropped."""
        self.release(owner, keep=False)

    def release(self, owner: LeaseOwner, keep: bool) -> None:
        """The held lease stopped; `keep`: left (its heartbeat "0": the next run need not wait
        for it), else dropped. A failure is logged: the lease runs out by itself."""
        beat, self.held = self.held, None
        if beat is None:
            return
        beat.stop()
        try:
            if keep:
                self.spark.run(beat_sql(beat.table, 0))
            else:
                self.spark.run(drop_sql(beat.table, owner.table_format))
        except Exception as exc:
            logger.warning(f"{owner.unique_id}: could not let go of its lease {beat.table}: {exc}")

    def live_runs(
        self, relation: str, invocation_id: str, suffix: str = LEASE_SUFFIX
    ) -> Tuple[str, ...]:
        """Other runs of the model holding a fresh lease on `relation`. Fails closed: a listing
        that fails raises (the run then changes nothing), and a lease whose properties cannot
        be read counts as live unless it is no longer listed (its run let go of it)."""
        schema, name = relation.rsplit(".", 1)
        own = lease_name(relation, invocation_id, suffix).rsplit(".", 1)[1].lower()
        pattern = f"show tables in {schema} like '{name}{suffix}*'"

        def listed() -> List[str]:
            tables = (str(row.get("tableName") or "") for row in self.spark.fetch(pattern))
            return [t for t in tables if t and t.lower() != own]

        found: List[str] = []
        for table in listed():
            try:
                props = table_properties(self.spark, f"{schema}.{table}")
            except Exception as exc:
                if table in listed():  # still there, unreadable: it may be a live run's
                    logger.debug(f"could not read the lease {table}: {exc}")
                    found.append(table)
                continue
            if lease_is_fresh(heartbeat_of(props), time.time(), lease_seconds()):
                found.append(props.get(RUN_PROPERTY, table))
        return tuple(found)

    def check_dead(self, intent: Intent, unique_id: str) -> None:
        """`RunInProgress` if the intent's run holds a fresh lease (it may be alive)."""
        self.check_gone(intent.relation, intent.invocation_id, unique_id)

    def check_gone(self, relation: str, invocation_id: str, unique_id: str) -> None:
        """`RunInProgress` if `invocation_id`'s run of the model holds a fresh lease."""
        lease = lease_name(relation, invocation_id)
        if not table_listed(self.spark, lease):
            return  # no lease: the run ended, or predates leases
        heartbeat, now = heartbeat_of(table_properties(self.spark, lease)), time.time()
        if lease_is_fresh(heartbeat, now, lease_seconds()):
            assert heartbeat is not None
            raise RunInProgress(unique_id, relation, invocation_id, now - heartbeat)

    def drop_dead(self, intent: Intent, unique_id: str) -> None:
        """A dead run's lease dropped (after its repair)."""
        lease = lease_name(intent.relation, intent.invocation_id)
        try:
            self.spark.run(drop_sql(lease, intent.table_format))
        except Exception as exc:
            logger.warning(f"{unique_id}: could not drop {lease}, the dead run's lease: {exc}")
