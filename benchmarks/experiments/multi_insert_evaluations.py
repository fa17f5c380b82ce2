"""Counts how often Spark evaluates a multi-insert's query (a non-deterministic Python UDF with an accumulator), on Iceberg tables (docs/benchmarks.md, 2026-11-29). A manual check, not a test: run with the project's venv from the project root."""

import glob
import os
import tempfile
import time

from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

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
acc = spark.sparkContext.accumulator(0)


def probe(x):
    acc.add(1)
    return x


spark.udf.register("probe", udf(probe, "bigint").asNondeterministic())
for fmt, a, b in [("iceberg", "ice.db.a", "ice.db.b")]:
    if fmt == "iceberg":
        spark.sql("create namespace if not exists ice.db")
    spark.sql(f"drop table if exists {a}")
    spark.sql(f"drop table if exists {b}")
    spark.sql(f"create table {a} (id bigint) using {fmt}")
    spark.sql(f"create table {b} (id bigint, reason string) using {fmt}")
    acc.value = 0
    t = time.time()
    spark.sql(f"""from (select probe(id) as id from range(100000) distribute by id) q
      insert into {a} select id where id % 1000 <> 0
      insert into {b} select id, 'bad' where id % 1000 = 0""")
    print(
        fmt,
        "evaluations",
        acc.value,
        "a",
        spark.table(a).count(),
        "b",
        spark.table(b).count(),
        f"{time.time() - t:.1f}s",
    )
    if fmt == "iceberg":
        print(spark.sql(f"select snapshot_id, operation from {a}.snapshots").collect())
