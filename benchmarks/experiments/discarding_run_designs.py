"""Times a discarding quarantine run's designs on Delta against the plain load of the same query
(docs/benchmarks.md, 2026-11-29): P3's 5 M-row query (a join to an aggregate), 5 rows discarded.

- plain: `INSERT INTO t SELECT ...` (the query without a contract);
- pending: the whole output with its reasons into a Parquet pending table, then the kept rows
  from it into `t` and the discarded ones into the quarantine (what the adapter does today);
- cached: the output with its reasons cached on the executors (`CACHE TABLE ... OPTIONS
  ('storageLevel' ...)`), the discarded rows into a Parquet pending table, the kept rows from
  the cache into `t`, then the cache dropped;

each evaluation counted by a non-deterministic probe (a Scala-free SQL `rand()` cannot count, so
the counts come from a second, small run with a Python UDF). A manual check, not a test: run with
the project's venv from the project root: `python benchmarks/experiments/discarding_run_designs.py
[rows] [rounds]`.
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql.functions import udf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
TMP = tempfile.mkdtemp(prefix="experiment_")
spark = build_session(Path(TMP) / "wh")
acc = spark.sparkContext.accumulator(0)


def probe(x):
    acc.add(1)
    return x


spark.udf.register("probe", udf(probe, "bigint").asNondeterministic())

QUERY = """
with base as (
    select {id} as id,
        sha2(concat('key-', cast(id as string), '-', cast(id * 7 as string)), 256) as h,
        id % 1000 as grp,
        case when id % {every} = 7 then concat('n/a-', cast(id as string))
             else cast(id % 100000 as string) end as n_str
    from range(0, {rows})
),
agg as (select grp, count(*) as cnt, max(h) as max_h from base group by grp)
select b.id, b.h, a.cnt, a.max_h, b.n_str from base b join agg a on b.grp = a.grp
"""
WITH_REASON = (
    "select id, h, cnt, max_h, try_cast(n_str as bigint) as n, "
    "case when n_str is not null and try_cast(n_str as bigint) is null "
    "then 'n: not a bigint' end as _contract_reason from ({q})"
)


def q(rows: int, probed: bool) -> str:
    return QUERY.format(id="probe(id)" if probed else "id", every=rows // 5, rows=rows)


def reset() -> None:
    for t in ("t", "quarantine", "pending"):
        spark.sql(f"drop table if exists {t}")
    spark.sql(
        "create table t (id bigint, h string, cnt bigint, max_h string, n bigint) using delta"
    )
    spark.sql(
        "create table quarantine (id bigint, h string, cnt bigint, max_h string, n bigint, "
        "_contract_reason string) using delta"
    )


def plain(query: str) -> None:
    spark.sql(f"insert into t select id, h, cnt, max_h, try_cast(n_str as bigint) from ({query})")


def pending(query: str) -> None:
    spark.sql(f"create table pending using parquet as {WITH_REASON.format(q=query)}")
    spark.sql(
        "insert into t select id, h, cnt, max_h, n from pending where _contract_reason is null"
    )
    spark.sql("insert into quarantine select * from pending where _contract_reason is not null")
    spark.sql("drop table pending")


def cached(level: str):
    def run(query: str) -> None:
        spark.sql(
            f"cache table run_output options ('storageLevel' '{level}') as "
            f"{WITH_REASON.format(q=query)}"
        )
        spark.sql(
            "create table pending using parquet as "
            "select * from run_output where _contract_reason is not null"
        )
        spark.sql(
            "insert into t select id, h, cnt, max_h, n from run_output "
            "where _contract_reason is null"
        )
        spark.sql("insert into quarantine select * from pending")
        spark.sql("drop table pending")
        spark.sql("uncache table run_output")
        spark.sql("drop view run_output")

    return run


DESIGNS = {
    "plain": plain,
    "pending": pending,
    "cached DISK_ONLY": cached("DISK_ONLY"),
    "cached MEMORY_AND_DISK": cached("MEMORY_AND_DISK"),
    "cached MEMORY_AND_DISK_SER": cached("MEMORY_AND_DISK_SER"),
}

# evaluations, on a small run with the probe
for name, design in DESIGNS.items():
    reset()
    acc.value = 0
    design(q(100_000, probed=True))
    kept = spark.table("t").count()
    discarded = spark.table("quarantine").count()
    print(f"{name}: {acc.value} evaluations for 100,000 rows; {kept} kept, {discarded} discarded")

times = {name: [] for name in DESIGNS}
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
    print(f"{name:<28} median {median:6.1f} s  ÷ plain {median / base:.2f}")
