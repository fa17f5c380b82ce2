"""Benchmark: the Delta schema-evolution DDL the planner emits for safe changes, on real Spark.

Run from the repository root: `python benchmarks/bench_delta_evolution.py`.

Two Delta tables (10,000 and 10,000,000 rows, `delta.enableTypeWidening=true`) get the
statements that `plan_schema_change` + `render_plan` produce for

  (a) adding a top-level nullable column and a nullable struct field (ADD COLUMNS), and
  (b) widening an int column to bigint (ALTER COLUMN ... TYPE, metadata-only type widening).

Each measurement is repeated; the table is put back with `RESTORE TABLE ... TO VERSION AS OF`
between repetitions and the statements are re-planned from the restored table's schema. Target:
the median at 10M rows is at most 1.5x the median at 10k rows (metadata-only DDL does not scale
with the data). The script prints PASS/FAIL per operation but always exits 0: it is a
benchmark, not a test. Set DBT_SPARK_CONTRACTS_JARS to the folder holding the Delta/Iceberg
jars (default /work/main/.jars).
"""

from __future__ import annotations

import copy
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_session import build_session  # noqa: E402  (benchmarks/spark_session.py)

from dbt.adapters.spark_contracts.core.evolution.plan import Policy, plan_schema_change  # noqa: E402
from dbt.adapters.spark_contracts.core.evolution.render import render_plan  # noqa: E402
from dbt.adapters.spark_contracts.core.schema.diff import diff_schemas  # noqa: E402
from dbt.adapters.spark_contracts.core.schema.parse import from_spark_json  # noqa: E402
from dbt.adapters.spark_contracts.core.schema.types import Struct  # noqa: E402

SIZES = (10_000, 10_000_000)
REPETITIONS = 5
WARMUPS = 1
TARGET_RATIO = 1.5
SCHEMA = "bench_evolution"

SchemaJson = Dict[str, Any]


# --- the compiled schemas: the deployed schema plus the model's changes ---------------------


def _field(schema: SchemaJson, name: str) -> SchemaJson:
    return next(f for f in schema["fields"] if f["name"] == name)


def with_added_columns(deployed: SchemaJson) -> SchemaJson:
    """(a) a new nullable top-level column `new_col` and a new nullable struct field `s.new_field`."""
    compiled = copy.deepcopy(deployed)
    compiled["fields"].append(
        {"name": "new_col", "type": "string", "nullable": True, "metadata": {}}
    )
    _field(compiled, "s")["type"]["fields"].append(
        {"name": "new_field", "type": "string", "nullable": True, "metadata": {}}
    )
    return compiled


def with_widened_int(deployed: SchemaJson) -> SchemaJson:
    """(b) `n` int -> bigint."""
    compiled = copy.deepcopy(deployed)
    _field(compiled, "n")["type"] = "long"
    return compiled


OPERATIONS: Tuple[Tuple[str, Callable[[SchemaJson], SchemaJson]], ...] = (
    ("add column + nested field", with_added_columns),
    ("widen int -> bigint", with_widened_int),
)


# --- Spark helpers ---------------------------------------------------------------------------


def create_table(spark: Any, name: str, rows: int) -> float:
    start = time.perf_counter()
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    df = spark.range(rows).selectExpr(
        "id",
        "CAST(id % 100000 AS INT) AS n",
        "CAST(id % 997 AS DOUBLE) AS amount",
        "NAMED_STRUCT('a', CAST(id % 7 AS INT), 'b', CAST(id % 13 AS STRING)) AS s",
    )
    df.createOrReplaceTempView("bench_source")
    spark.sql(
        f"CREATE TABLE {name} USING DELTA "
        "TBLPROPERTIES ('delta.enableTypeWidening' = 'true') "
        "AS SELECT * FROM bench_source"
    )
    return time.perf_counter() - start


def plan_statements(
    spark: Any, table: str, change: Callable[[SchemaJson], SchemaJson]
) -> List[str]:
    """What the adapter would run: diff deployed vs compiled, plan for Delta, render."""
    deployed_json = json.loads(spark.table(table).schema.json())
    deployed = from_spark_json(deployed_json)
    compiled = from_spark_json(change(deployed_json))
    assert isinstance(deployed, Struct) and isinstance(compiled, Struct)
    properties = {str(r[0]): str(r[1]) for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    diff = diff_schemas(deployed, compiled)
    plan = plan_schema_change(diff, "delta", properties, Policy(), deployed, compiled)
    if plan.is_blocked:
        raise RuntimeError(f"the planner blocked a safe change on {table}: {plan}")
    return [step.sql for step in render_plan(plan, table, "delta")]


def run_statements(spark: Any, statements: List[str]) -> float:
    start = time.perf_counter()
    for statement in statements:
        spark.sql(statement).collect()
    return time.perf_counter() - start


def current_version(spark: Any, table: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").collect()[0]["version"])


def table_location(spark: Any, table: str) -> Path:
    location = spark.sql(f"DESCRIBE DETAIL {table}").collect()[0]["location"]
    return Path(urlparse(location).path)


def commit_actions(location: Path, version: int) -> Dict[str, int]:
    """Count the actions of one Delta commit file (`add` / `remove` are data files)."""
    counts: Dict[str, int] = {}
    with open(location / "_delta_log" / f"{version:020d}.json", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                for action in json.loads(line):
                    counts[action] = counts.get(action, 0) + 1
    return counts


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text(encoding="utf-8").split()[:3])
    except OSError:
        return "n/a"


# --- the benchmark ---------------------------------------------------------------------------


def measure(
    spark: Any, table: str, change: Callable[[SchemaJson], SchemaJson], base_version: int
) -> Tuple[float, List[str], int]:
    """Plan, run (timed), note the version written, then restore the table to `base_version`."""
    statements = plan_statements(spark, table, change)
    elapsed = run_statements(spark, statements)
    version = current_version(spark, table)
    spark.sql(f"RESTORE TABLE {table} TO VERSION AS OF {base_version}").collect()
    return elapsed, statements, version


def main() -> None:
    warehouse = Path(tempfile.mkdtemp(prefix="bench_delta_evolution_"))
    try:
        spark = build_session(warehouse)
        print(f"Spark {spark.version}, warehouse {warehouse}, load average {load_average()}")
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")

        tables: Dict[int, str] = {}
        base_versions: Dict[int, int] = {}
        for rows in SIZES:
            table = f"{SCHEMA}.t_{rows}"
            seconds = create_table(spark, table, rows)
            detail = spark.sql(f"DESCRIBE DETAIL {table}").collect()[0]
            tables[rows], base_versions[rows] = table, current_version(spark, table)
            print(
                f"created {table}: {rows:,} rows, {detail['numFiles']} files, "
                f"{detail['sizeInBytes'] / 1e6:.1f} MB in {seconds:.1f} s"
            )
        print()

        results: Dict[str, Dict[int, float]] = {}
        alter_versions: Dict[int, List[Tuple[str, int]]] = {rows: [] for rows in SIZES}
        for label, change in OPERATIONS:
            timings: Dict[int, List[float]] = {rows: [] for rows in SIZES}
            shown: List[str] = []
            for rep in range(WARMUPS + REPETITIONS):
                for rows in SIZES:  # interleave the sizes so background load hits both
                    elapsed, statements, version = measure(
                        spark, tables[rows], change, base_versions[rows]
                    )
                    if rep >= WARMUPS:
                        timings[rows].append(elapsed)
                    if rep == WARMUPS:
                        alter_versions[rows].append((label, version))
                    if not shown:
                        shown = [s.replace(tables[rows], "t") for s in statements]
            print(f"({label}) statements from the planner:")
            for statement in shown:
                print(f"    {statement}")
            results[label] = {rows: statistics.median(timings[rows]) for rows in SIZES}
            for rows in SIZES:
                runs = ", ".join(f"{t * 1000:.0f}" for t in timings[rows])
                print(f"    {rows:>12,} rows: runs ms [{runs}]")
        print()

        small, large = SIZES
        print(
            f"{'operation':28} {'10k median ms':>14} {'10M median ms':>14} "
            f"{'10M / 10k':>10}  target <= {TARGET_RATIO}"
        )
        for label, medians in results.items():
            ratio = medians[large] / medians[small]
            verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
            print(
                f"{label:28} {medians[small] * 1000:14.1f} {medians[large] * 1000:14.1f} "
                f"{ratio:10.2f}  {verdict}"
            )
        print(
            f"(median of {REPETITIONS} runs each, after {WARMUPS} warm-up run; "
            f"load average now {load_average()})"
        )
        print()

        print("DESCRIBE HISTORY of the ALTER commits (and the data-file actions in each commit):")
        for rows in SIZES:
            table = tables[rows]
            location = table_location(spark, table)
            history = {
                int(r["version"]): r for r in spark.sql(f"DESCRIBE HISTORY {table}").collect()
            }
            for label, version in alter_versions[rows]:
                entry = history[version]
                actions = commit_actions(location, version)
                written = actions.get("add", 0)
                removed = actions.get("remove", 0)
                print(
                    f"  {table} v{version} {entry['operation']} ({label}): "
                    f"operationMetrics={dict(entry['operationMetrics'] or {})}, "
                    f"commit actions={sorted(actions)}, data files added={written}, "
                    f"removed={removed}"
                )
            detail = spark.sql(f"DESCRIBE DETAIL {table}").collect()[0]
            print(f"  {table}: {detail['numFiles']} data files after all runs")
        spark.stop()
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


if __name__ == "__main__":
    main()
