"""A run's lease on its pending table (core/pending.py): while the run holds the table, a thread
of its own renews the table's heartbeat on a connection of its own (every connection method:
dbt opens one per thread), so that another run of the model never takes the table over from a
run that is still alive. Released (heartbeat "0") when the run lets go of the table."""

import os
import threading
import time
from dataclasses import dataclass
from typing import Optional, Protocol

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.core.pending import BEAT_PROPERTY, BEAT_SECONDS, LEASE_SECONDS
from dbt.adapters.spark_contracts.spark_handle import Spark

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
