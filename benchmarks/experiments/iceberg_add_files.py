"""Iceberg add_files from one Parquet write's per-route folders into a table and its quarantine
(docs/benchmarks.md, 2026-11-29 and 2026-12-04). A manual check, not a test: run with the
project's venv from the project root. It prints what a design built on it would rely on:

1. each route's folder imported as its own unpartitioned source (on 2026-11-29 the
   partitioned folder with `partition_filter` was refused; not tried here), the files' extra
   columns ignored by the name mapping;
2. whether add_files's commit carries the session's `spark.sql.iceberg.snapshot-property.*`
   (the adapter's commit tag) and what the table's own log shows of the files' folder;
3. whether a SQL script (`BEGIN ... END`, the adapter's fence) can run the CALL;
4. the route-partitioned write as one SQL CTAS at a location, unsorted;
5. timestamps: Spark's default INT96 and TIMESTAMP_MICROS files read back through Iceberg.
"""

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

TMP = tempfile.mkdtemp(prefix="experiment_")
spark = build_session(Path(TMP) / "wh")  # Delta on spark_catalog, Iceberg as `iceberg`
TAG = "spark.sql.iceberg.snapshot-property.dbt_run"


def attempt(label: str, sql: str) -> None:
    try:
        print(label, spark.sql(sql).collect())
    except Exception as exc:
        print(label, "ERR", str(exc).splitlines()[0][:400])


def add(table: str, folder: str) -> str:
    return (
        f"CALL iceberg.system.add_files(table => '{table}', source_table => '`parquet`.`{folder}`')"
    )


spark.sql("create namespace if not exists iceberg.db")
spark.sql("drop table if exists iceberg.db.t")
spark.sql("drop table if exists iceberg.db.q")
spark.sql("create table iceberg.db.t (id bigint, name string) using iceberg")
spark.sql(
    "create table iceberg.db.q (id bigint, name string, _contract_reason string) using iceberg"
)
shutil.rmtree(TMP + "/pend", ignore_errors=True)
spark.sql("""select id, cast(id as string) as name, if(id % 1000 = 0, 'bad', null) as _contract_reason,
         if(id % 1000 = 0, 'q', 't') as route from range(100000)""").write.partitionBy(
    "route"
).parquet(TMP + "/pend")

# 1. each route's folder into its table, the session tagged as the adapter tags a run
spark.conf.set(TAG, "run-1")
attempt("1. add_files t:", add("db.t", TMP + "/pend/route=t"))
attempt("1. add_files q:", add("db.q", TMP + "/pend/route=q"))
print("1. counts:", spark.sql("select count(*), count(_contract_reason) from iceberg.db.q").first())
print("1. t:", spark.table("iceberg.db.t").count(), spark.table("iceberg.db.t").limit(1).collect())

# 2. the tag and the files' folder in the table's own log
for row in spark.sql("select operation, summary from iceberg.db.t.snapshots").collect():
    print("2. snapshot:", row.operation, {k: v for k, v in row.summary.items() if "dbt" in k})
print(
    "2. files of the run's folder in the table's entries:",
    spark.sql(
        f"select count(*) from iceberg.db.t.all_entries where data_file.file_path like '%{TMP}/pend/route=t/%'"
    ).first()[0],
)
spark.conf.unset(TAG)

# 3. the CALL inside a SQL script, behind a condition as the adapter's fence puts a write
spark.sql("select id, cast(id as string) as name from range(10)").write.parquet(TMP + "/more")
attempt(
    "3. in a script:",
    f"BEGIN IF (select count(*) from iceberg.db.t) = 99900 THEN {add('db.t', TMP + '/more')}; "
    "END IF; END",
)
print("3. t:", spark.table("iceberg.db.t").count())

# 4. the routed write as one SQL CTAS at a location, unsorted (one open writer per route)
spark.conf.set("spark.sql.optimizer.plannedWrite.enabled", "false")
spark.conf.set("spark.sql.maxConcurrentOutputFileWriters", "2")
attempt(
    "4. CTAS:",
    f"create table routed using parquet partitioned by (route) location '{TMP}/routed' as "
    "select id, cast(id as string) as name, if(id % 7 = 0, 'q', 't') as route from range(1000)",
)
print("4. folders:", sorted(p.name for p in Path(TMP, "routed").iterdir()))
attempt("4. add_files from it:", add("db.t", f"{TMP}/routed/route=t"))
spark.conf.unset("spark.sql.optimizer.plannedWrite.enabled")
spark.conf.unset("spark.sql.maxConcurrentOutputFileWriters")

# 5. timestamps
spark.sql("create table iceberg.db.ts (id bigint, at timestamp) using iceberg")
for kind in ("INT96", "TIMESTAMP_MICROS"):
    spark.conf.set("spark.sql.parquet.outputTimestampType", kind)
    folder = f"{TMP}/ts_{kind}"
    spark.sql(
        "select id, timestamp'2026-12-04 01:02:03.456789' + make_interval(0, 0, 0, 0, 0, 0, id) "
        "as at from range(3)"
    ).write.parquet(folder)
    attempt(f"5. add_files {kind}:", add("db.ts", folder))
attempt("5. read back:", "select id, at from iceberg.db.ts order by at")
