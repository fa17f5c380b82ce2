"""A lease's heartbeat (core/recovery/lease.py): how long a lease binds, a beat, this dbt process
as a lease names its holder, and the thread that renews a lease on a connection of its own."""

import os
import socket
import threading
import time
from typing import Callable, List, Optional

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.recovery import statements
from dbt.adapters.spark_contracts.core.recovery.lease import LEASE_SECONDS, Watch, beat_interval
from dbt.adapters.spark_contracts.core.recovery.pending import RELEASED
from dbt.adapters.spark_contracts.core.recovery.record import Client, RunRecord

logger = AdapterLogger("SparkContracts")

LEASE_ENV = "DBT_SPARK_CONTRACTS_LEASE_SECONDS"
# the least wait after a beat, as a share of the interval: the lock is free for `renew`/`write`
MIN_WAIT = 0.1


def lease_seconds() -> float:
    """How long a lease binds after its heartbeat was last seen to change."""
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


def wait_while(
    binding: Callable[[], List[RunRecord]],
    watch: Watch,
    say: Callable[[RunRecord, float], str],
) -> None:
    """Read `binding` (the other runs' records that still bind this run; it raises where one
    must end the wait) until it is empty, half a beat between reads. Says once on the console
    why the run waits (`say`: the first binding record, the longest wait left in seconds)."""
    told = False
    while True:
        waiting = binding()
        if not waiting:
            return
        if not told:
            logger.info(say(waiting[0], max(watch.left(r, time.monotonic()) for r in waiting)))
            told = True
        time.sleep(min(1.0, beat_interval(watch.lease_seconds) / 2))


def beat_sql(table: str, at: Optional[float] = None) -> str:
    """A heartbeat: a value that changes with each beat (only its change is read, never
    compared with another machine's clock); 0 releases the lease."""
    value = RELEASED if at == 0 else f"{at if at is not None else time.time():.3f}"
    return statements.beat_sql(table, value)


def this_client() -> Client:
    """This dbt process, as a lease records its holder."""
    return Client(socket.gethostname(), os.getpid())


class Heartbeat:
    """Renews `table`'s lease every `interval` seconds until `stop()`.

    `last` is this process's monotonic time just before the last beat that went through was
    sent: no other run can take the lease over sooner than a
    lease's length after it (it must watch the heartbeat unchanged that long), so while `fresh()`
    the lease is still this run's, also after a pause the run cannot see (a stopped process).
    That holds only while the beats are continuous: a beat sent once the lease was no longer
    fresh (the process was stopped, or the beats were slow) may land on a lease another run has
    taken over meanwhile (the beat does not see the mark), so the thread's beat then leaves
    `last` as it was, and only `renew` followed by reading the lease back (run/lease.confirm)
    makes it fresh again."""

    def __init__(
        self,
        spark: Spark,
        table: str,
        interval: Optional[float] = None,
        since: Optional[float] = None,
    ) -> None:
        self.spark, self.table = spark, table
        self.interval = interval if interval is not None else beat_interval(lease_seconds())
        self.last = since if since is not None else time.monotonic()
        self._stop = threading.Event()
        self._beating = threading.Lock()  # one beat at a time: the thread's, or `renew`
        self._thread = threading.Thread(target=self._beat, name=f"lease {table}", daemon=True)

    def start(self) -> "Heartbeat":
        self._thread.start()
        return self

    def fresh(self) -> bool:
        """No other run can have taken the lease over yet (see the class's text; a tenth of the
        lease is left for the two clocks' rates)."""
        return self.stale_for() < 0.9 * lease_seconds()

    def stale_for(self) -> float:
        """Seconds since the last beat that went through was sent."""
        return time.monotonic() - self.last

    def renew(self, spark: Spark, attempts: int = 3) -> None:
        """Beat now, on `spark` (the run's own connection), and wait for it, unless the thread's
        beat in flight (waited for: the two never commit to the table at once) made the lease
        fresh. A failed beat (a busy machine, a format's conflict check) is tried again; the last
        failure is raised."""
        for attempt in range(1, attempts + 1):
            with self._beating:
                if self.fresh():
                    return
                sent = time.monotonic()
                try:
                    spark.run(beat_sql(self.table))
                except Exception:
                    if attempt == attempts:
                        raise
                    continue
                self.last = max(self.last, sent)
                return

    def write(self, spark: Spark, sql: str) -> None:
        """`sql`, a change of the lease table's own properties (what the run record says),
        sent on `spark` and waited for while no beat is in flight: a metastore that rewrites a
        table's properties whole never loses one of two statements sent at once."""
        with self._beating:
            spark.run(sql)

    def _beat(self) -> None:
        if self._stop.wait(self.interval):
            return  # a short run: no connection opened, no beat
        failures = 0
        while True:
            try:
                with self.spark.own_connection(f"lease {self.table}") as own:
                    while True:
                        with self._beating:
                            sent, lapsed = time.monotonic(), not self.fresh()
                            own.run(beat_sql(self.table))
                            failures = 0
                            if not lapsed:  # continuous: still fresh (see the class's text)
                                self.last = sent
                        # on a steady cadence: a slow beat (a busy server) shortens the wait
                        # after it, so beats are sent every `interval`, not `interval` + the
                        # beat; never back to back (`renew` and `write` wait for the lock)
                        took = time.monotonic() - sent
                        if self._stop.wait(max(MIN_WAIT * self.interval, self.interval - took)):
                            return
            except Exception as exc:  # a blip: try again
                failures += 1
                if failures in (1, 10):
                    logger.warning(f"could not renew the lease on {self.table} ({exc}); retrying")
            if self._stop.wait(self.interval):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
