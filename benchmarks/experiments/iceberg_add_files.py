"""Iceberg add_files from one Parquet write's per-route folders into a table and its quarantine (docs/benchmarks.md, 2026-11-29). A manual check, not a test: run with the project's venv from the project root."""

import glob
import os
import shutil
import tempfile

from pyspark.sql import SparkSession

jars = ",".join(
    glob.glob(os.path.join(os.environ.get("DBT_SPARK_CONTRACTS_JARS", ".jars"), "*.jar"))
)
TMP = tempfile.mkdtemp(prefix="experiment_")
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.jars", jars)
    .config(
        "spark.sql.extensions",
        "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,io.delta.sql.DeltaSparkSessionExtension",
    )
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    .config("spark.sql.catalog.ice", "org.apache.iceberg.spark.SparkCatalog")
    .config("spark.sql.catalog.ice.type", "hadoop")
    .config("spark.sql.catalog.ice.warehouse", TMP + "/wh")
    .config("spark.sql.warehouse.dir", TMP + "/sw")
    .getOrCreate()
)
spark.sql("create namespace if not exists ice.db")
spark.sql("drop table if exists ice.db.t")
spark.sql("drop table if exists ice.db.q")
spark.sql("create table ice.db.t (id bigint, name string) using iceberg")
spark.sql("create table ice.db.q (id bigint, name string, _contract_reason string) using iceberg")
shutil.rmtree(TMP + "/pend", ignore_errors=True)
spark.sql("""select id, cast(id as string) as name, if(id % 1000 = 0, 'bad', null) as _contract_reason,
         if(id % 1000 = 0, 'q', 't') as route from range(100000)""").write.partitionBy(
    "route"
).parquet(TMP + "/pend")
for stmt in [
    "CALL ice.system.add_files(table => 'db.t', source_table => '`parquet`.`"
    + TMP
    + "/pend/route=t`')",
    "CALL ice.system.add_files(table => 'db.q', source_table => '`parquet`.`"
    + TMP
    + "/pend/route=q`')",
]:
    try:
        print(spark.sql(stmt).collect())
    except Exception as e:
        print("ERR", str(e)[:600])
print(spark.sql("select count(*), count(_contract_reason) from ice.db.q").collect())
try:
    print(spark.table("ice.db.t").count(), spark.table("ice.db.t").limit(2).collect())
except Exception as e:
    print("ERR read", str(e)[:400])
