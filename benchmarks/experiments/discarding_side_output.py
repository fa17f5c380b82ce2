"""Times two designs of a discarding quarantine run on Delta that write the kept rows once, with
the discarded rows written from the executors by Python beside the load (docs/benchmarks.md,
2026-12-04), against the plain load and the pending table (what the adapter does):

- side: the output with its reasons through `mapInArrow`, whose function writes each batch's
  discarded rows to a Parquet file of its task and passes the kept rows on to the Delta append;
- udf-null: a pandas UDF in the load's filter whose argument is the row as a struct for a
  discarded row and NULL for a kept one, writing the discarded rows as a side effect;
- passthrough: `mapInArrow` passing every row on unchanged (what the Python round trip costs).

P3's query (a join to an aggregate, 5 M rows), 5 discarded by default; `[rows] [rounds]
[every]` (every: 1 row in `every` discarded; 5 for P3-heavy). The evaluations are counted by a
non-deterministic probe on a 100,000-row run. Python on the executors writes to the local
filesystem here: a manual check of cost, not a design that reaches a cluster's storage. Run
from the project root with the venv, `PYSPARK_PYTHON=.venv/bin/python`.
"""

import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql.functions import pandas_udf, udf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
TMP = tempfile.mkdtemp(prefix="experiment_")
spark = build_session(Path(TMP) / "wh")
acc = spark.sparkContext.accumulator(0)


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
WITH_REASON = (
    "select id, h, cnt, max_h, try_cast(n_str as bigint) as n, n_str, "
    "case when n_str is not null and try_cast(n_str as bigint) is null "
    "then 'n: not a bigint' end as _contract_reason from ({q})"
)
KEPT = ["id", "h", "cnt", "max_h", "n"]
DISCARDED = ["id", "h", "cnt", "max_h", "n_str", "_contract_reason"]
KEPT_SCHEMA = "id bigint, h string, cnt bigint, max_h string, n bigint"


def q(rows: int, probed: bool) -> str:
    n = every(rows)
    return QUERY.format(id="probe(id)" if probed else "id", every=n, hit=7 % n, rows=rows)


def reset() -> None:
    for t in ("t", "quarantine", "pending"):
        spark.sql(f"drop table if exists {t}")
    spark.sql(f"create table t ({KEPT_SCHEMA}) using delta")
    spark.sql(
        "create table quarantine (id bigint, h string, cnt bigint, max_h string, n_str string, "
        "_contract_reason string) using delta"
    )


def to_quarantine(folder: str) -> None:
    if os.path.isdir(folder):
        spark.sql(f"insert into quarantine select {', '.join(DISCARDED)} from parquet.`{folder}`")


def plain(query: str) -> None:
    spark.sql(f"insert into t select id, h, cnt, max_h, try_cast(n_str as bigint) from ({query})")


def pending(query: str) -> None:
    spark.sql(f"create table pending using parquet as {WITH_REASON.format(q=query)}")
    spark.sql(f"insert into t select {', '.join(KEPT)} from pending where _contract_reason is null")
    spark.sql(
        f"insert into quarantine select {', '.join(DISCARDED)} from pending "
        "where _contract_reason is not null"
    )
    spark.sql("drop table pending")


def side(query: str) -> None:
    folder = os.path.join(TMP, "side", uuid.uuid4().hex)

    def route(batches):
        ctx, writer = TaskContext.get(), None
        for batch in batches:
            bad = pc.is_valid(batch.column("_contract_reason"))
            if pc.any(bad).as_py():
                rows = batch.filter(bad).select(DISCARDED)
                if writer is None:
                    os.makedirs(folder, exist_ok=True)
                    name = f"part-{ctx.partitionId()}-{ctx.attemptNumber()}.parquet"
                    writer = pq.ParquetWriter(os.path.join(folder, name), rows.schema)
                writer.write_batch(rows)
                batch = batch.filter(pc.invert(bad))
            yield batch.select(KEPT)
        if writer is not None:
            writer.close()

    out = spark.sql(WITH_REASON.format(q=query)).mapInArrow(route, KEPT_SCHEMA)
    out.write.format("delta").mode("append").insertInto("t")
    to_quarantine(folder)


def udf_null(query: str) -> None:
    folder = os.path.join(TMP, "side", uuid.uuid4().hex)

    @pandas_udf("boolean")
    def side_write(rows: pd.DataFrame) -> pd.Series:
        discarded = rows[rows["_contract_reason"].notna()]
        if len(discarded):
            ctx = TaskContext.get()
            os.makedirs(folder, exist_ok=True)
            name = f"part-{ctx.partitionId()}-{ctx.attemptNumber()}-{uuid.uuid4().hex}.parquet"
            discarded.to_parquet(os.path.join(folder, name))
        return pd.Series([None] * len(rows), dtype="boolean")

    spark.udf.register("side_write", side_write.asNondeterministic())
    spark.sql(
        f"insert into t select {', '.join(KEPT)} from ({WITH_REASON.format(q=query)}) "
        "where side_write(case when _contract_reason is not null "
        f"then struct({', '.join(DISCARDED)}) end) is null and _contract_reason is null"
    )
    to_quarantine(folder)


def passthrough(query: str) -> None:
    def route(batches):
        for batch in batches:
            yield batch.select(KEPT)

    out = spark.sql(WITH_REASON.format(q=query)).mapInArrow(route, KEPT_SCHEMA)
    out.write.format("delta").mode("append").insertInto("t")


DESIGNS = {
    "plain": plain,
    "pending": pending,
    "side": side,
    "udf-null": udf_null,
    "passthrough": passthrough,
}

for name, design in DESIGNS.items():
    reset()
    acc.value = 0
    design(q(100_000, probed=True))
    kept, discarded = spark.table("t").count(), spark.table("quarantine").count()
    print(f"{name}: {acc.value} evaluations for 100,000 rows; {kept} kept, {discarded} discarded")

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
    print(f"{name:<12} median {median:6.1f} s  ÷ plain {median / base:.2f}")
