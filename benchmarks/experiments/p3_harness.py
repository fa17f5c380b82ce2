"""What the discarding-run experiments share (discarding_run_designs.py,
discarding_side_output.py, iceberg_discarding_add_files.py): P3's query (a join to an aggregate),
its output with the contract's reason, the probe that counts the query's evaluations, and the
rounds that time each design against the plain load.

Each script takes `[rows] [rounds] [every]`: 5 M rows, 3 rounds and 1 row in `rows // 5`
discarded (5 rows) by default; `every` 5 for P3-heavy's 1 row in 5.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict

from pyspark.sql.functions import udf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
PROBED_ROWS = 100_000  # the run whose evaluations the probe counts

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
# the output with its reason (`{q}`: the query), as the pending table holds it
WITH_REASON = (
    "select id, h, cnt, max_h, try_cast(n_str as bigint) as n, n_str, "
    f"{REASON} as _contract_reason from ({{q}})"
)
KEPT = ["id", "h", "cnt", "max_h", "n"]
DISCARDED = ["id", "h", "cnt", "max_h", "n_str", "_contract_reason"]
KEPT_SCHEMA = "id bigint, h string, cnt bigint, max_h string, n bigint"
PLAIN = "select id, h, cnt, max_h, try_cast(n_str as bigint) from ({q})"


def every(rows: int) -> int:
    """One row in this many is discarded."""
    return int(sys.argv[3]) if len(sys.argv) > 3 else max(rows // 5, 1)


def discarded(rows: int) -> int:
    n = every(rows)
    return len(range(7 % n, rows, n))


class Harness:
    """A session of its own (Delta on spark_catalog, Iceberg as `iceberg`) with the probe."""

    def __init__(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="experiment_")
        self.spark = build_session(Path(self.tmp) / "wh")
        self.evaluations = self.spark.sparkContext.accumulator(0)
        counter = self.evaluations

        def probe(x):
            counter.add(1)
            return x

        self.spark.udf.register("probe", udf(probe, "bigint").asNondeterministic())

    @staticmethod
    def query(rows: int, probed: bool) -> str:
        n = every(rows)
        return QUERY.format(id="probe(id)" if probed else "id", every=n, hit=7 % n, rows=rows)

    def probed(self, design: Callable[[str], None]) -> int:
        """The query's evaluations in `design` over PROBED_ROWS rows."""
        self.evaluations.value = 0
        design(self.query(PROBED_ROWS, probed=True))
        return self.evaluations.value

    def reset_delta(self) -> None:
        """Empty Delta tables `t` and `quarantine`, no pending table."""
        for table in ("t", "quarantine", "pending"):
            self.spark.sql(f"drop table if exists {table}")
        self.spark.sql(f"create table t ({KEPT_SCHEMA}) using delta")
        self.spark.sql(
            "create table quarantine (id bigint, h string, cnt bigint, max_h string, "
            "n_str string, _contract_reason string) using delta"
        )

    def plain(self, query: str, table: str = "t") -> None:
        """The baseline: the query loaded as it is, with no contract."""
        self.spark.sql(f"insert into {table} {PLAIN.format(q=query)}")

    def pending(self, query: str, table: str = "t", quarantine: str = "quarantine") -> None:
        """The adapter's statements for a discarding run, without its bookkeeping: the output
        with its reasons into a Parquet pending table, then the kept rows into `table` and the
        discarded ones into `quarantine`, then the pending table dropped."""
        run = self.spark.sql
        run(f"create table pending using parquet as {WITH_REASON.format(q=query)}")
        run(
            f"insert into {table} select {', '.join(KEPT)} from pending where _contract_reason is null"
        )
        run(
            f"insert into {quarantine} select {', '.join(DISCARDED)} from pending "
            "where _contract_reason is not null"
        )
        run("drop table pending")

    def location(self, table: str) -> str:
        """The table's folder, as DESCRIBE TABLE EXTENDED names it."""
        rows = self.spark.sql(f"describe table extended {table}").collect()
        return next(r.data_type for r in rows if r.col_name == "Location")

    def contents(self, table: str, quarantine: str) -> tuple:
        """The table's count(*), sum(n), sum(cnt), max(max_h); the quarantine's count(*) and
        its raw values and reasons."""
        kept = self.spark.sql(f"select count(*), sum(n), sum(cnt), max(max_h) from {table}")
        gone = self.spark.sql(
            f"select count(*), count(n_str), count(_contract_reason) from {quarantine}"
        )
        return tuple(kept.first()), tuple(gone.first())

    def check(
        self,
        designs: Dict[str, Callable[[str], None]],
        reset: Callable[[], Any],
        table: str,
        quarantine: str,
        after: Callable[[str], Any] = lambda name: None,
    ) -> None:
        """Each design once over PROBED_ROWS rows from `reset`: its evaluations of the query and
        its tables' contents, compared with the pending table's (the plain load keeps every
        row, NULL for a bad n); `after(name)` with the design's tables in place."""
        hits, expected = discarded(PROBED_ROWS), None
        for name, design in designs.items():
            reset()
            evaluations = self.probed(design)
            found = self.contents(table, quarantine)
            if name == "pending":
                assert found[0][0] == PROBED_ROWS - hits and found[1] == (hits,) * 3, found
                expected = found
            same = "" if expected is None else ("as pending" if found == expected else "NOT")
            print(f"{name}: {evaluations} evaluations for {PROBED_ROWS:,} rows; {found} {same}")
            after(name)

    def time(self, designs: Dict[str, Callable[[str], None]], reset: Callable[[], Any]) -> None:
        """ROUNDS rounds of every design on ROWS rows, each from `reset`; the medians ÷ the
        first design's (the plain load)."""
        times: Dict[str, list] = {name: [] for name in designs}
        for round_ in range(ROUNDS):
            for name, design in designs.items():
                reset()
                began = time.monotonic()
                design(self.query(ROWS, probed=False))
                times[name].append(time.monotonic() - began)
                print(f"round {round_ + 1} {name}: {times[name][-1]:.1f} s", flush=True)
        base = statistics.median(next(iter(times.values())))
        for name, took in times.items():
            median = statistics.median(took)
            print(f"{name:<28} median {median:6.1f} s  ÷ plain {median / base:.2f}")
