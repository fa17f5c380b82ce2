"""Times the design issue 41 left for a discarding quarantine run on Iceberg (docs/benchmarks.md,
2026-12-04): the model's output, with its reasons and a route column, written once as Parquet
partitioned by the route under the table's location, then Iceberg's `add_files` of each
route's folder into the table and into the quarantine (two metadata-only commits). Against the
plain load and the pending table (what the adapter does).

P3's query (a join to an aggregate, 5 M rows), 5 discarded by default; `[rows] [rounds]
[every]` (every: 1 row in `every` discarded; 5 for P3-heavy). The evaluations are counted by a
non-deterministic probe on a 100,000-row run, and each design's tables are compared with the
plain load's. A manual check of cost, not a test: run from the project root with the venv.
"""

import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from pyspark.sql.functions import udf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
TMP = tempfile.mkdtemp(prefix="experiment_")
spark = build_session(Path(TMP) / "wh")  # Delta on spark_catalog, Iceberg as `iceberg`
acc = spark.sparkContext.accumulator(0)
T, Q = "iceberg.db.t", "iceberg.db.quarantine"


def every(rows: int) -> int:
    return int(sys.argv[3]) if len(sys.argv) > 3 else max(rows // 5, 1)


def probe(x):
    acc.add(1)
    return x


spark.udf.register("probe", udf(probe, "bigint").asNondeterministic())

QUERY = """
with base as (
    select {id} as id,
        sha2(concat('key-', cast(id as string), '-', cast(id * 7 as string)), 256) as h,
        id % 1000 as grp,
        case when id % {every} = {hit} then concat('n/a-', cast(id as string))
             else cast(id % 100000 as string) end as n_str
    from range(0, {rows})
),
agg as (select grp, count(*) as cnt, max(h) as max_h from base group by grp)
select b.id, b.h, a.cnt, a.max_h, b.n_str from base b join agg a on b.grp = a.grp
"""
REASON = (
    "case when n_str is not null and try_cast(n_str as bigint) is null then 'n: not a bigint' end"
)
WITH_REASON = (
    "select id, h, cnt, max_h, try_cast(n_str as bigint) as n, n_str, "
    f"{REASON} as _contract_reason from ({{q}})"
)
# one file schema for both routes: the quarantine's raw value only where a row is discarded
ROUTED = (
    "select id, h, cnt, max_h, n, if(_contract_reason is null, null, n_str) as n_str, "
    "_contract_reason, if(_contract_reason is null, 't', 'q') as route from ({q})"
)
KEPT = ["id", "h", "cnt", "max_h", "n"]
DISCARDED = ["id", "h", "cnt", "max_h", "n_str", "_contract_reason"]


def q(rows: int, probed: bool) -> str:
    n = every(rows)
    return QUERY.format(id="probe(id)" if probed else "id", every=n, hit=7 % n, rows=rows)


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


def location(table: str) -> str:
    rows = spark.sql(f"describe table extended {table}").collect()
    return next(r.data_type for r in rows if r.col_name == "Location")


def plain(query: str) -> None:
    spark.sql(f"insert into {T} select id, h, cnt, max_h, try_cast(n_str as bigint) from ({query})")


def pending(query: str) -> None:
    spark.sql(f"create table pending using parquet as {WITH_REASON.format(q=query)}")
    spark.sql(
        f"insert into {T} select {', '.join(KEPT)} from pending where _contract_reason is null"
    )
    spark.sql(
        f"insert into {Q} select {', '.join(DISCARDED)} from pending "
        "where _contract_reason is not null"
    )
    spark.sql("drop table pending")


def add_files(query: str, check_duplicates: bool = False, sort: bool = True) -> None:
    folder = f"{location(T)}/data/_dbt_{uuid.uuid4().hex}"
    routed = spark.sql(ROUTED.format(q=WITH_REASON.format(q=query)))
    # unsorted: each task keeps one writer per route open instead of sorting its rows by route
    spark.conf.set("spark.sql.optimizer.plannedWrite.enabled", str(sort).lower())
    spark.conf.set("spark.sql.maxConcurrentOutputFileWriters", "0" if sort else "2")
    routed.write.partitionBy("route").parquet(folder)
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


def contents() -> tuple:
    kept = spark.sql(f"select count(*), sum(n), sum(cnt), max(max_h) from {T}").first()
    discarded = spark.sql(
        f"select count(*), count(n_str), count(_contract_reason) from {Q}"
    ).first()
    return tuple(kept), tuple(discarded)


n = every(100_000)
hits = len(range(7 % n, 100_000, n))
expected = None  # the pending table's (the plain load keeps every row, with NULL for a bad n)
for name, design in DESIGNS.items():
    reset()
    acc.value = 0
    design(q(100_000, probed=True))
    found = contents()
    if name == "pending":
        assert found[0][0] == 100_000 - hits and found[1] == (hits, hits, hits), found
        expected = found
    same = "" if expected is None else ("as pending" if found == expected else "NOT as pending")
    print(f"{name}: {acc.value} evaluations for 100,000 rows; {found} {same}")
    props = {r[0]: r[1] for r in spark.sql(f"show tblproperties {T}").collect()}
    print(f"  name mapping set: {'schema.name-mapping.default' in props}")

times: dict = {name: [] for name in DESIGNS}
for round_ in range(ROUNDS):
    for name, design in DESIGNS.items():
        reset()
        began = time.monotonic()
        design(q(ROWS, probed=False))
        times[name].append(time.monotonic() - began)
        print(f"round {round_ + 1} {name}: {times[name][-1]:.1f} s", flush=True)

base = statistics.median(times["plain"])
for name, took in times.items():
    median = statistics.median(took)
    print(f"{name:<20} median {median:6.1f} s  ÷ plain {median / base:.2f}")
