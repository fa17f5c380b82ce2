"""Benchmark: loading 10M rows into Delta under a `discard_row` schema contract vs a plain load.

Run from the repository root: `python benchmarks/bench_contract_load.py`.

The source is a temp view `src` over `spark.range(10_000_000)` with generated columns, cached and
materialized before anything is timed, so every load reads the same in-memory data and the
timings cover only the write plus the per-value work. Each load goes into a fresh, empty Delta
table (dropped and re-created, untimed) and is timed as one `INSERT INTO t ...` statement:

  (1) plain:                 INSERT INTO t SELECT id, note FROM src
  (2) columns discard_row:   the source has a new column `extra` (non-NULL in 1% of rows) the
                             deployed table (id, note) lacks; the SELECT comes from the
                             project's core (`resolve_contract` -> `decide` ->
                             `render_load_select`) and drops the rows where `extra` is set
  (3) data_type discard_row: the source column `n` is a string (1% non-numeric) and the
                             deployed column `n` is int; the rendered SELECT try_casts and drops
                             the rows that do not coerce (reading, as the adapter does, the
                             view `src_types__coerced` that adds the try_cast as a column once)
  (3p) plain, with n:        INSERT INTO t SELECT id, note, n FROM src (int `n`): the plain load
                             writing the same columns as (3), for a like-for-like ratio

Each load runs once as a warm-up and then REPETITIONS times, interleaved; the medians and the
ratios contract / plain are printed against the target (<= 1.3). The decision's
`discard_count_sql` (a separate scan of the source, for `rows_discarded`) is what the adapter
runs only where its write cannot observe the counts (it observes them on the session); it is
timed apart and shown for information. PASS/FAIL is printed but the script always exits 0: it is
a benchmark, not a test. Set DBT_SPARK_CONTRACTS_JARS to the folder holding the Delta/Iceberg
jars (default /work/main/.jars).
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

from dbt.adapters.spark_contracts.core.contracts.contract import resolve_contract  # noqa: E402
from dbt.adapters.spark_contracts.core.contracts.enforce import decide  # noqa: E402
from dbt.adapters.spark_contracts.core.contracts.load_select import (  # noqa: E402
    LoadSql,
    render_load_select,
)
from dbt.adapters.spark_contracts.core.schema.diff import diff_schemas
from dbt.adapters.spark_contracts.core.schema.parse import from_spark_json
from dbt.adapters.spark_contracts.core.schema.types import Struct

ROWS = 10_000_000
DISCARD_EVERY = 100  # 1% of the rows carry `extra` / a non-numeric `n`
REPETITIONS = 3
WARMUPS = 1
TARGET_RATIO = 1.3
SCHEMA = "bench_contract"
RUN_ID = "bench_contract_load"
EXPECTED_DISCARDS = ROWS // DISCARD_EVERY


@dataclass(frozen=True)
class Variant:
    """One load: the deployed table's columns and either a plain SELECT or a contract to render."""

    key: str
    label: str
    table_columns: str
    source_view: str
    plain_select: Optional[str] = None  # None: render the SELECT under `contract`
    contract: Optional[Dict[str, str]] = None
    expected_rows: int = ROWS


VARIANTS: Tuple[Variant, ...] = (
    Variant(
        "plain",
        "(1) plain INSERT SELECT id, note",
        "id BIGINT, note STRING",
        "src",
        plain_select="SELECT id, note FROM src",
    ),
    Variant(
        "columns",
        "(2) columns: discard_row",
        "id BIGINT, note STRING",
        "src_columns",
        contract={"columns": "discard_row"},
        expected_rows=ROWS - EXPECTED_DISCARDS,
    ),
    Variant(
        "plain_n",
        "(3p) plain INSERT SELECT id, note, n",
        "id BIGINT, note STRING, n INT",
        "src",
        plain_select="SELECT id, note, n FROM src",
    ),
    Variant(
        "plain_cast",
        "(3c) plain INSERT SELECT id, note, try_cast(n AS INT) (same string source)",
        "id BIGINT, note STRING, n INT",
        "src_types",
        plain_select="SELECT id, note, try_cast(n AS INT) FROM src_types",
    ),
    Variant(
        "data_type",
        "(3) data_type: discard_row",
        "id BIGINT, note STRING, n INT",
        "src_types",
        contract={"data_type": "discard_row"},
        expected_rows=ROWS - EXPECTED_DISCARDS,
    ),
)

# (contract variant, plain variant it is compared with, note)
RATIOS: Tuple[Tuple[str, str, str], ...] = (
    ("columns", "plain", "same columns written"),
    ("data_type", "plain", "(3) writes one more column than (1)"),
    ("data_type", "plain_n", "same columns written, int source"),
    ("data_type", "plain_cast", "same rows: the plain load must cast the string source too"),
)


# --- Spark helpers ---------------------------------------------------------------------------


def create_source(spark: Any) -> float:
    """Cache and materialize `src`; `src_columns` / `src_types` are projections of the cache."""
    start = time.perf_counter()
    source = spark.range(ROWS).selectExpr(
        "id",
        "concat('note-', CAST(id AS STRING)) AS note",
        f"CASE WHEN id % {DISCARD_EVERY} = 0 THEN concat('extra-', CAST(id AS STRING)) END "
        "AS extra",
        "CAST(id % 100000 AS INT) AS n",
        f"CASE WHEN id % {DISCARD_EVERY} = 50 THEN concat('n/a-', CAST(id AS STRING)) "
        "ELSE CAST(id % 100000 AS STRING) END AS n_str",
    )
    source.cache()
    source.count()  # builds every cached column batch
    source.createOrReplaceTempView("src")
    # The model's output as the adapter sees it: (2) a new column, (3) a string `n`.
    spark.sql("CREATE OR REPLACE TEMP VIEW src_columns AS SELECT id, note, extra FROM src")
    spark.sql("CREATE OR REPLACE TEMP VIEW src_types AS SELECT id, note, n_str AS n FROM src")
    return time.perf_counter() - start


def cache_report(spark: Any) -> str:
    infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
    parts = [
        f"{info.numCachedPartitions()}/{info.numPartitions()} partitions cached, "
        f"{info.memSize() / 1e6:.0f} MB in memory, {info.diskSize() / 1e6:.0f} MB on disk"
        for info in infos
    ]
    return "; ".join(parts) or "nothing cached"


def reads_cache(spark: Any, select: str) -> bool:
    plan = spark.sql(select)._jdf.queryExecution().executedPlan().toString()
    return "InMemoryTableScan" in plan


def fresh_table(spark: Any, variant: Variant) -> str:
    table = f"{SCHEMA}.t_{variant.key}"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} ({variant.table_columns}) USING DELTA")
    return table


def schema_of(spark: Any, relation: str) -> Struct:
    parsed = from_spark_json(json.loads(spark.table(relation).schema.json()))
    assert isinstance(parsed, Struct)
    return parsed


def render_contract_load(spark: Any, variant: Variant, table: str) -> LoadSql:
    """What the adapter runs: resolve the contract, decide from metadata, render the SELECT.

    A cast the load reads more than once (the value and its discard predicate) is hoisted into a
    column `__dbt_coerced_N` of `load.coerced_select(view)`: as the adapter does (run_plan.py,
    runner.py), that view is created over the model's output and the SELECT is rendered against
    it. Read from the model's view alone, the SELECT fails with UNRESOLVED_COLUMN."""
    contract = resolve_contract(f"model.bench.{variant.key}", variant.contract, None)
    assert contract is not None
    deployed = schema_of(spark, table)
    compiled = schema_of(spark, variant.source_view)
    decision = decide(contract, deployed, compiled, diff_schemas(deployed, compiled), "delta")
    if decision.table_action != "load" or decision.evolve_diff.changes:
        raise RuntimeError(f"unexpected contract decision for {variant.key}:\n{decision.summary()}")
    print(decision.summary())
    load = render_load_select(decision, variant.source_view, deployed, compiled, RUN_ID)
    coerced = load.coerced_select(variant.source_view)
    if coerced is None:
        return load
    source = load.coerced_view(variant.source_view)
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {source} AS {coerced}")
    print(f"    (reads {source}: {coerced})")
    return render_load_select(decision, source, deployed, compiled, RUN_ID)


def timed(spark: Any, statement: str) -> Tuple[float, List[Any]]:
    start = time.perf_counter()
    rows = spark.sql(statement).collect()
    return time.perf_counter() - start, rows


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text(encoding="utf-8").split()[:3])
    except OSError:
        return "n/a"


# --- the benchmark ---------------------------------------------------------------------------


def main() -> None:
    warehouse = Path(tempfile.mkdtemp(prefix="bench_contract_load_"))
    try:
        spark = build_session(warehouse)
        print(f"Spark {spark.version}, warehouse {warehouse}, load average {load_average()}")
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        seconds = create_source(spark)
        print(f"source `src`: {ROWS:,} rows cached in {seconds:.1f} s ({cache_report(spark)})")
        print()

        selects: Dict[str, str] = {}
        count_sql: Dict[str, str] = {}
        for variant in VARIANTS:
            table = fresh_table(spark, variant)
            if variant.plain_select is not None:
                selects[variant.key] = variant.plain_select
            else:
                load = render_contract_load(spark, variant, table)
                selects[variant.key] = load.select
                if load.discard_count_sql:
                    count_sql[variant.key] = load.discard_count_sql
            cached = "reads the cache" if reads_cache(spark, selects[variant.key]) else "NO CACHE"
            print(f"{variant.label} ({cached}):")
            print(f"    INSERT INTO {table} {selects[variant.key]}")
        print()

        timings: Dict[str, List[float]] = {v.key: [] for v in VARIANTS}
        count_timings: Dict[str, List[float]] = {k: [] for k in count_sql}
        written: Dict[str, List[int]] = {v.key: [] for v in VARIANTS}
        discarded: Dict[str, Tuple[int, int]] = {}
        for rep in range(WARMUPS + REPETITIONS):
            for variant in VARIANTS:  # interleaved so background load hits every variant
                table = fresh_table(spark, variant)
                elapsed, _ = timed(spark, f"INSERT INTO {table} {selects[variant.key]}")
                rows = int(spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0])
                if variant.key in count_sql:
                    count_elapsed, result = timed(spark, count_sql[variant.key])
                    discarded[variant.key] = (int(result[0][0]), int(result[0][1]))
                if rep >= WARMUPS:
                    timings[variant.key].append(elapsed)
                    written[variant.key].append(rows)
                    if variant.key in count_sql:
                        count_timings[variant.key].append(count_elapsed)
            print(f"repetition {rep + 1}/{WARMUPS + REPETITIONS} done ({load_average()})")
        print()

        medians = {key: statistics.median(values) for key, values in timings.items()}
        print(f"{'load':38} {'runs s':>22} {'median s':>9} {'rows written':>13} {'expected':>11}")
        for variant in VARIANTS:
            runs = ", ".join(f"{t:.2f}" for t in timings[variant.key])
            counts = set(written[variant.key])
            shown = f"{counts.pop():,}" if len(counts) == 1 else str(sorted(counts))
            ok = "" if set(written[variant.key]) == {variant.expected_rows} else "  MISMATCH"
            print(
                f"{variant.label:38} {runs:>22} {medians[variant.key]:9.2f} {shown:>13} "
                f"{variant.expected_rows:>11,}{ok}"
            )
        print(
            f"(median of {REPETITIONS} runs each, after {WARMUPS} warm-up run; "
            f"load average now {load_average()})"
        )
        print()

        print(f"ratio (median contract / median plain), target <= {TARGET_RATIO}:")
        for contract_key, plain_key, note in RATIOS:
            ratio = medians[contract_key] / medians[plain_key]
            verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
            print(f"  {contract_key:>9} / {plain_key:<7} = {ratio:5.2f}  {verdict}  ({note})")
        print()

        print(
            "for information: the decision's discard_count_sql, a separate scan of the "
            "source, which the adapter runs only where its write cannot observe the counts:"
        )
        for key, values in count_timings.items():
            count_median = statistics.median(values)
            rows_discarded, values_discarded = discarded[key]
            total = (medians[key] + count_median) / medians["plain"]
            print(
                f"  {key:>9}: median {count_median:.2f} s, rows_discarded={rows_discarded:,} "
                f"values_discarded={values_discarded:,}; (insert + count) / plain = {total:.2f}"
            )
        spark.stop()
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


if __name__ == "__main__":
    main()
