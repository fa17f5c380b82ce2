"""An Iceberg `create or replace ... as select` sent behind the table's history
(core/recovery/history_guard.guarded), and what the guard leaves (docs/run-guarantees.md, "The
late replace", 2026-12-02). A manual check, not a test: run with the project's venv from the
project root. Prints: the guarded replace runs while the history is the one read; it is refused
after another session's empty commit; a replace whose query is still running when another
session's insert commits ends with that insert gone, and no error (the gap the guard leaves)."""

import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

from dbt.adapters.spark_contracts.core.recovery import history_guard  # noqa: E402

TMP = tempfile.mkdtemp(prefix="experiment_")
spark = build_session(Path(TMP) / "wh")  # Delta on spark_catalog, Iceberg as `iceberg`
spark.sql("create namespace if not exists iceberg.db")
spark.sql("create table iceberg.db.t using iceberg as select id, 'a' as v from range(3)")


def fingerprint() -> str:
    spark.sql("refresh table iceberg.db.t")
    return str(spark.sql(history_guard.read_sql("iceberg.db.t")).collect()[0][0])


def values() -> list:
    spark.sql("refresh table iceberg.db.t")
    return [tuple(r) for r in spark.sql("select id, v from iceberg.db.t order by id").collect()]


# ends in a `--` comment: the script's own `;` is on a line of its own
replace = (
    "create or replace table iceberg.db.t using iceberg as\n"
    "select id, '{v}' as v from range(5) -- the model's last line"
)
read = fingerprint()
spark.sql(history_guard.guarded(replace.format(v="b"), "iceberg.db.t", read)).collect()
print("guarded replace, history unchanged:", values())

read = fingerprint()
spark.newSession().sql("insert into iceberg.db.t select * from iceberg.db.t limit 0")
try:
    spark.sql(history_guard.guarded(replace.format(v="c"), "iceberg.db.t", read)).collect()
    print("NOT REFUSED after another session's commit:", values())
except Exception as exc:
    print("refused after another session's commit:", type(exc).__name__, str(exc)[:160])
    print("  the table:", values())

# the gap: the check passed, the replace's query runs, another session's insert commits
slow = (
    "create or replace table iceberg.db.t using iceberg as select id, "
    "concat('d', cast(reflect('java.lang.Thread', 'sleep', cast(2000 as bigint)) as string)) as v "
    "from range(0, 4, 1, 1)"
)
read = fingerprint()
errors: list = []


def run_slow() -> None:
    try:
        spark.newSession().sql(history_guard.guarded(slow, "iceberg.db.t", read)).collect()
    except Exception as exc:  # noqa: BLE001
        errors.append(str(exc)[:200])


thread = threading.Thread(target=run_slow)
thread.start()
time.sleep(3)
spark.newSession().sql("insert into iceberg.db.t values (100, 'inserted meanwhile')")
thread.join()
print("replace running while an insert committed; its error:", errors, "the table:", values())
