"""What an Iceberg rebuild does to a commit that lands while its query runs, and what would fence
it inside the commit (docs/run-guarantees.md, "The late replace", what is left; 2026-12-02,
Spark 4.1.1 with Iceberg 1.12.0). A manual check, not a test: run with the project's venv from
the project root. Prints, for a slow rebuild (one task, 2 s per row) during which another
session inserts a row:

- `create or replace ... as select`: no error, the row gone, and the insert's snapshot gone
  from the table's own metadata too (not in `.history` nor `.snapshots`): the replace's commit
  re-bases onto the table's metadata as it was when the replace began. No repair can find it.
- `insert overwrite` with no options: the same (no error, the row gone).
- `insert overwrite <t> WITH ('isolation-level' = 'serializable', 'validate-from-snapshot-id' =
  <the snapshot read before>, 'overwrite-mode' = 'static')`: fails at its commit
  (ValidationException, "Found conflicting files"), the inserted row kept: a fence inside the
  commit, on the table's lineage (the snapshot has a parent)."""

import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

spark = build_session(Path(tempfile.mkdtemp(prefix="experiment_")) / "wh")
spark.sql("create namespace if not exists iceberg.db")
SLOW = (
    "select id, concat('d', cast(reflect('java.lang.Thread', 'sleep', cast(2000 as bigint)) "
    "as string)) as v from range(0, 4, 1, 1)"
)
OPTIONS = (
    "WITH ('isolation-level' = 'serializable', 'validate-from-snapshot-id' = '{s}', "
    "'overwrite-mode' = 'static') "
)
CASES = [
    ("create or replace", "create or replace table iceberg.db.t using iceberg as " + SLOW),
    ("insert overwrite", "insert overwrite iceberg.db.t " + SLOW),
    ("insert overwrite, validated", "insert overwrite iceberg.db.t " + OPTIONS + SLOW),
]


def fresh(sql: str) -> List[tuple]:
    spark.sql("refresh table iceberg.db.t")
    return [tuple(r) for r in spark.sql(sql).collect()]


for label, statement in CASES:
    spark.sql("drop table if exists iceberg.db.t")
    spark.sql("create table iceberg.db.t using iceberg as select id, 'a' as v from range(3)")
    (head,) = fresh("select snapshot_id from iceberg.db.t.refs where name = 'main'")
    errors: List[str] = []

    def rebuild(sql: str = statement.format(s=head[0]), errors: List[str] = errors) -> None:
        try:
            spark.newSession().sql(sql).collect()
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[1][:160]}")

    thread = threading.Thread(target=rebuild)
    thread.start()
    time.sleep(3)
    spark.newSession().sql("insert into iceberg.db.t values (100, 'inserted meanwhile')")
    thread.join()
    rows = fresh("select id, v from iceberg.db.t order by id")
    snapshots = fresh("select snapshot_id, parent_id, operation from iceberg.db.t.snapshots")
    print(f"{label}: error {errors or 'none'}; rows {rows}")
    print(f"  snapshots (id, parent, operation): {snapshots}")
