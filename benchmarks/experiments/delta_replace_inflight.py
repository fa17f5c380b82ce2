"""What a Delta rebuild does to a commit that lands while its query runs (docs/run-guarantees.md,
"The late replace"; 2026-12-02, Spark 4.1.1 with Delta 4.3.1). A manual check, not a test: run
with the project's venv from the project root. Prints, for a slow `create or replace ... as
select` and a slow `insert overwrite` (one task, 2 s per row) during which another session
inserts a row or merges one: each fails at its commit (ConcurrentAppendException) and the
table keeps the other session's commit. Delta's own conflict check fences a replace against
any commit that landed while it ran."""

import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

spark = build_session(Path(tempfile.mkdtemp(prefix="experiment_")) / "wh")
SLOW = (
    "select id, concat('d', cast(reflect('java.lang.Thread', 'sleep', cast(2000 as bigint)) "
    "as string)) as v from range(0, 4, 1, 1)"
)
INSERT = "insert into t values (100, 'inserted meanwhile')"
MERGE = (
    "merge into t using (select 1 as id, 'merged meanwhile' as v) s on t.id = s.id "
    "when matched then update set * when not matched then insert *"
)
CASES = [
    (
        "create or replace, an insert meanwhile",
        "create or replace table t using delta as " + SLOW,
        INSERT,
    ),
    ("insert overwrite, an insert meanwhile", "insert overwrite t " + SLOW, INSERT),
    (
        "create or replace, a merge meanwhile",
        "create or replace table t using delta as " + SLOW,
        MERGE,
    ),
]

for label, statement, other in CASES:
    spark.sql("drop table if exists t")
    spark.sql("create table t using delta as select id, 'a' as v from range(3)")
    errors: List[str] = []

    def rebuild(sql: str = statement, errors: List[str] = errors) -> None:
        try:
            spark.newSession().sql(sql).collect()
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[1][:120]}")

    thread = threading.Thread(target=rebuild)
    thread.start()
    time.sleep(3)
    spark.newSession().sql(other)
    thread.join()
    rows = [tuple(r) for r in spark.sql("select id, v from t order by id").collect()]
    print(f"{label}: error {errors or 'none'}; rows {rows}")
