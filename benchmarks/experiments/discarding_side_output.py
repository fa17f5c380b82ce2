"""Times two designs of a discarding quarantine run on Delta that write the kept rows once, with
the discarded rows written from the executors by Python beside the load (docs/benchmarks.md,
2026-12-03), against the plain load and the pending table (what the adapter does):

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
import uuid

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
from p3_harness import DISCARDED, KEPT, KEPT_SCHEMA, WITH_REASON, Harness
from pyspark import TaskContext
from pyspark.sql.functions import pandas_udf

harness = Harness()
spark, TMP = harness.spark, harness.tmp
reset = harness.reset_delta


def to_quarantine(folder: str) -> None:
    if os.path.isdir(folder):
        spark.sql(f"insert into quarantine select {', '.join(DISCARDED)} from parquet.`{folder}`")


plain = harness.plain


pending = harness.pending


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

if __name__ == "__main__":
    for name, design in DESIGNS.items():
        reset()
        evaluations = harness.probed(design)
        kept, gone = spark.table("t").count(), spark.table("quarantine").count()
        print(f"{name}: {evaluations} evaluations for 100,000 rows; {kept} kept, {gone} discarded")
    harness.time(DESIGNS, reset)
