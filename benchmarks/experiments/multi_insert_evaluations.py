"""Counts how often Spark evaluates a multi-insert's query (a non-deterministic Python UDF with an accumulator), on Iceberg tables (docs/benchmarks.md, 2026-11-29). A manual check, not a test: run with the project's venv from the project root."""

import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql.functions import udf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

TMP = tempfile.mkdtemp(prefix="experiment_")
spark = build_session(Path(TMP) / "wh")  # Delta on spark_catalog, Iceberg as `iceberg`
acc = spark.sparkContext.accumulator(0)


def probe(x):
    acc.add(1)
    return x


spark.udf.register("probe", udf(probe, "bigint").asNondeterministic())
for fmt, a, b in [("iceberg", "iceberg.db.a", "iceberg.db.b")]:
    if fmt == "iceberg":
        spark.sql("create namespace if not exists iceberg.db")
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
