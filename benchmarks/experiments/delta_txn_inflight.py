"""Delta's idempotent writes against a write already running (docs/run-guarantees.md, the fence
inside the commit; 2026-11-29): an old holder's UPDATE under a transaction id, running (a slow
UDF, one task) when a taker commits its marker under that id in another session, fails at its
commit (ConcurrentTransactionException) and the table keeps its rows. Where the holder's write
commits first, the marker is the one refused (the taker sends it again: run/fence.py). A manual
check, not a test: run with the project's venv from the project root."""

import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

APP, VERSION = "spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion"
spark = build_session(Path(tempfile.mkdtemp(prefix="experiment_")) / "wh")
spark.sql("create table f (id bigint) using delta")
spark.sql("insert into f select /*+ COALESCE(1) */ id from range(60)")  # one file: one task


def slow(x: int) -> int:
    time.sleep(0.5)
    return x + 100


holder, taker = spark.newSession(), spark.newSession()
holder.udf.register("slow", slow, "bigint")
outcome = {}


def old_holder() -> None:
    holder.conf.set(APP, "holder")
    holder.conf.set(VERSION, "1")
    try:
        holder.sql("update f set id = slow(id)")
        outcome["holder"] = "committed"
    except Exception as exc:  # noqa: BLE001
        lines = str(exc).splitlines()
        outcome["holder"] = "failed: " + next((x for x in lines if "DELTA_" in x), lines[0])[:160]


running = threading.Thread(target=old_holder)
running.start()
time.sleep(3)  # the holder's UPDATE is running
taker.conf.set(APP, "holder")
taker.conf.set(VERSION, str(2**63 - 1))
try:
    taker.sql("merge into f using (select 1 as k) s on false when matched then delete")
    outcome["marker"] = "committed"
except Exception as exc:  # noqa: BLE001
    outcome["marker"] = f"failed: {str(exc).splitlines()[0][:160]}"
running.join()
print(outcome)
print([(r.version, r.operation) for r in spark.sql("describe history f").collect()])
print("max id", spark.sql("select max(id) from f").collect()[0][0], "(59: the UPDATE is not in)")
