"""Times the design issue 41 left for a discarding quarantine run on Iceberg (docs/benchmarks.md,
2026-12-04): the model's output, with its reasons and a route column, written once as Parquet
partitioned by the route under the table's location, then Iceberg's `add_files` of each
route's folder into the table and into the quarantine (two metadata-only commits). Against the
plain load and the pending table (what the adapter does).

P3's query (a join to an aggregate, 5 M rows), 5 discarded by default; `[rows] [rounds]
[every]` (every: 1 row in `every` discarded; 5 for P3-heavy). The evaluations are counted by a
non-deterministic probe on a 100,000-row run, and each design's tables are compared with the
pending table's (the plain load keeps every row). A manual check of cost, not a test: run from the project root with the venv.
"""

import uuid
from functools import partial

from p3_harness import WITH_REASON, Harness

harness = Harness()  # Delta on spark_catalog, Iceberg as `iceberg`
spark = harness.spark
T, Q = "iceberg.db.t", "iceberg.db.quarantine"

# one file schema for both routes: the quarantine's raw value only where a row is discarded
ROUTED = (
    "select id, h, cnt, max_h, n, if(_contract_reason is null, null, n_str) as n_str, "
    "_contract_reason, if(_contract_reason is null, 't', 'q') as route from ({q})"
)


def reset() -> None:
    spark.sql("create namespace if not exists iceberg.db")
    for table in (T, Q):
        spark.sql(f"drop table if exists {table} purge")
    spark.sql("drop table if exists pending")
    spark.sql(
        f"create table {T} (id bigint, h string, cnt bigint, max_h string, n bigint) using iceberg"
    )
    spark.sql(
        f"create table {Q} (id bigint, h string, cnt bigint, max_h string, n_str string, "
        "_contract_reason string) using iceberg"
    )


location = harness.location
plain = partial(harness.plain, table=T)
pending = partial(harness.pending, table=T, quarantine=Q)


def add_files(query: str, check_duplicates: bool = False, sort: bool = True) -> None:
    folder = f"{location(T)}/data/_dbt_{uuid.uuid4().hex}"
    routed = spark.sql(ROUTED.format(q=WITH_REASON.format(q=query)))
    # unsorted: each task keeps one writer per route open instead of sorting its rows by route
    spark.conf.set("spark.sql.optimizer.plannedWrite.enabled", str(sort).lower())
    spark.conf.set("spark.sql.maxConcurrentOutputFileWriters", "0" if sort else "2")
    try:
        routed.write.partitionBy("route").parquet(folder)
    finally:  # the other designs run with Spark's defaults
        spark.conf.unset("spark.sql.optimizer.plannedWrite.enabled")
        spark.conf.unset("spark.sql.maxConcurrentOutputFileWriters")
    check = "true" if check_duplicates else "false"
    for table, route in ((T, "t"), (Q, "q")):
        source = f"{folder}/route={route}"
        if not spark._jvm.java.io.File(source.removeprefix("file:")).isDirectory():
            continue  # a clean day writes no `route=q/`
        name = table.removeprefix("iceberg.")
        spark.sql(
            f"CALL iceberg.system.add_files(table => '{name}', source_table => "
            f"'`parquet`.`{source}`', check_duplicate_files => {check})"
        )


DESIGNS = {
    "plain": plain,
    "pending": pending,
    "add_files": add_files,
    "add_files+dup-check": lambda query: add_files(query, check_duplicates=True),
    "add_files-unsorted": lambda query: add_files(query, sort=False),
}


def name_mapping(name: str) -> None:
    props = {r[0]: r[1] for r in spark.sql(f"show tblproperties {T}").collect()}
    print(f"  name mapping set: {'schema.name-mapping.default' in props}")


if __name__ == "__main__":
    harness.check(DESIGNS, reset, T, Q, after=name_mapping)
    harness.time(DESIGNS, reset)
