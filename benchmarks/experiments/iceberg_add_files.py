"""Iceberg add_files from one Parquet write's per-route folders into a table and its quarantine (docs/benchmarks.md, 2026-11-29). A manual check, not a test: run with the project's venv from the project root."""

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

TMP = tempfile.mkdtemp(prefix="experiment_")
spark = build_session(Path(TMP) / "wh")  # Delta on spark_catalog, Iceberg as `iceberg`
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
for stmt in [
    "CALL iceberg.system.add_files(table => 'db.t', source_table => '`parquet`.`"
    + TMP
    + "/pend/route=t`')",
    "CALL iceberg.system.add_files(table => 'db.q', source_table => '`parquet`.`"
    + TMP
    + "/pend/route=q`')",
]:
    try:
        print(spark.sql(stmt).collect())
    except Exception as e:
        print("ERR", str(e)[:600])
print(spark.sql("select count(*), count(_contract_reason) from iceberg.db.q").collect())
try:
    print(spark.table("iceberg.db.t").count(), spark.table("iceberg.db.t").limit(2).collect())
except Exception as e:
    print("ERR read", str(e)[:400])
