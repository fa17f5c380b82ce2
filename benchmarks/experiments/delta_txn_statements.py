"""Which Delta statements a transaction id fences (docs/run-guarantees.md, the fence inside the
commit; 2026-11-29): with txnAppId set and txnVersion unset a write is refused; autoReset unsets
the version after a write; an empty `INSERT ... WHERE false` and `UPDATE ... WHERE false` commit
(and fence), `DELETE ... WHERE false` commits nothing; ALTER TABLE and RESTORE take no id;
MERGE WITH SCHEMA EVOLUTION and CREATE OR REPLACE ... AS SELECT under a fenced id are skipped;
the id's version survives a RESTORE. Prints one line per statement: its outcome, the table's
latest version and rows. A manual check, not a test: run with the project's venv from the
project root."""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

spark = build_session(Path(tempfile.mkdtemp(prefix="experiment_")) / "wh")
A, V, R = (
    "spark.databricks.delta.write.txnAppId",
    "spark.databricks.delta.write.txnVersion",
    "spark.databricks.delta.write.txnVersion.autoReset.enabled",
)


def ver(t="f"):
    r = spark.sql(f"describe history {t} limit 1").collect()[0]
    return f"v{r.version} {r.operation}"


def run(label, sql, app=None, v=None, t="f"):
    if app is not None:
        spark.conf.set(A, app)
    if v is not None:
        spark.conf.set(V, str(v))
    try:
        spark.sql(sql)
        res = "ok"
    except Exception as e:
        res = "ERR " + str(e).splitlines()[0][:160]
    print(
        f"{label:45} {res}; {ver(t)}; rows {spark.table(t).count()}; V now={spark.conf.get(V, None)}"
    )


spark.sql("create table f (id bigint) using delta")
spark.sql("insert into f values (1)")
# 1 appId set, version unset
spark.conf.set(A, "x1")
run("appId only insert", "insert into f values (2)")
spark.conf.unset(A)
# 2 autoReset
spark.conf.set(R, "true")
run("autoReset insert v=5", "insert into f values (3)", "x1", 5)
run("after autoReset, appId only insert", "insert into f values (4)")
# markers
run(
    "marker insert where false v=MAX",
    "insert into f select * from f where false",
    "m1",
    9223372036854775807,
)
run("marker delete where false v=MAX", "delete from f where false", "m2", 9223372036854775807)
run("marker update where false", "update f set id = id where false", "m3", 9223372036854775807)
run("skipped? insert m1 v=7", "insert into f values (99)", "m1", 7)
run("skipped? insert m2 v=7", "insert into f values (98)", "m2", 7)
run("skipped? insert m3 v=7", "insert into f values (97)", "m3", 7)
# DDL honors?
run("alter add col m1 v=8", "alter table f add columns (c string)", "m1", 8)
run(
    "merge schema evolution m1 v=9",
    "merge with schema evolution into f using (select 5 as id, 'a' as c, 1 as d) s on f.id = s.id when not matched then insert *",
    "m1",
    9,
)
# restore keeps txn?
h = spark.sql("describe history f").collect()
print([(r.version, r.operation) for r in h])
run("restore to v2, appId m1 v=10", "restore table f to version as of 2", "m1", 10)
run("after restore insert m1 v=11", "insert into f values (96)", "m1", 11)
run("after restore insert fresh app v=1", "insert into f values (95)", "z", 1)
# CTAS / replace
run(
    "create or replace as select m1 v=12",
    "create or replace table f using delta as select * from f",
    "m1",
    12,
)
run("rtas fresh app", "create or replace table f using delta as select * from f", "z2", 1)
spark.conf.unset(A)
spark.conf.unset(V)
spark.sql("create table q (id bigint) using delta")
run("plain insert q", "insert into q values (1)", t="q")
