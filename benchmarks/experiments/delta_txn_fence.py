"""Delta's idempotent writes as a fence: after a higher txnVersion commits, an older one's INSERT, MERGE and UPDATE are skipped (docs/run-guarantees.md, 2026-11-29). A manual check, not a test: run with the project's venv from the project root."""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

TMP = tempfile.mkdtemp(prefix="experiment_")
spark = build_session(Path(TMP) / "wh")  # Delta on spark_catalog, Iceberg as `iceberg`
spark.sql("drop table if exists f")
spark.sql("create table f (id bigint) using delta")


def w(sql, app, ver):
    spark.conf.set("spark.databricks.delta.write.txnAppId", app)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(ver))
    try:
        spark.sql(sql)
        r = "ok"
    except Exception as e:
        r = "ERR " + str(e)[:200]
    spark.conf.unset("spark.databricks.delta.write.txnAppId")
    spark.conf.unset("spark.databricks.delta.write.txnVersion")
    v = spark.sql("describe history f limit 1").collect()[0]
    print(
        f"{sql[:40]:40} app={app} ver={ver}: {r}; table version {v.version} {v.operation}; rows {spark.table('f').count()}"
    )


w("insert into f values (1)", "lease", 1000001)
w("insert into f select * from f where false", "lease", 2000000)  # the taker's marker, epoch 2
w("insert into f values (2)", "lease", 1000002)  # the old holder, epoch 1
w(
    "merge into f using (select 3 as id) s on f.id = s.id when not matched then insert *",
    "lease",
    1000003,
)
w("update f set id = id + 10 where id = 1", "lease", 1000004)
w("insert into f values (4)", "lease", 2000001)
