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
[rows] [rounds] [every]` (p3_harness.py). Since 2026-12-04 on the shared harness, whose output
also carries the raw value (`n_str`) into the quarantine; the figures of 2026-11-29 are from
before.
"""

from p3_harness import DISCARDED, KEPT, WITH_REASON, Harness, discarded

harness = Harness()
spark = harness.spark


reset = harness.reset_delta


plain = harness.plain


pending = harness.pending


def cached(level: str):
    def run(query: str) -> None:
        spark.sql(
            f"cache table run_output options ('storageLevel' '{level}') as "
            f"{WITH_REASON.format(q=query)}"
        )
        spark.sql(
            f"create table pending using parquet as select {', '.join(DISCARDED)} "
            "from run_output where _contract_reason is not null"
        )
        spark.sql(
            f"insert into t select {', '.join(KEPT)} from run_output where _contract_reason is null"
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

if __name__ == "__main__":
    for name, design in DESIGNS.items():
        reset()
        evaluations = harness.probed(design)
        kept, gone = spark.table("t").count(), spark.table("quarantine").count()
        print(
            f"{name}: {evaluations} evaluations for 100,000 rows; {kept} kept, {gone} "
            f"discarded ({discarded(100_000)} expected unless plain)"
        )
    harness.time(DESIGNS, reset)
