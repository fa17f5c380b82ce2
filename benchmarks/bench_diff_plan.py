"""Benchmark: diff + plan of a 1,000-column, 3-level nested schema against a mutated copy.

Run from the repository root: `python benchmarks/bench_diff_plan.py`. Target: 50 ms.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dbt.adapters.spark_contracts.core.evolution.plan import Policy, plan_schema_change
from dbt.adapters.spark_contracts.core.evolution.render import render_plan
from dbt.adapters.spark_contracts.core.schema.diff import diff_schemas
from dbt.adapters.spark_contracts.core.schema.types import Array, Field, Map, Primitive, Struct

TARGET_SECONDS = 0.050
COLUMNS = 1_000
RUNS = 9
INT, BIGINT, STRING = Primitive("int"), Primitive("bigint"), Primitive("string")


def nested_column(i: int, extra: bool) -> Struct:
    """struct<id, inner: struct<v, items: array<struct<score ...>>>, tags: map<string, struct>>."""
    leaf = [Field("score", INT), Field("label", STRING)]
    if extra:
        leaf.append(Field("weight", Primitive("double")))
    inner = Struct((Field("v", INT), Field("items", Array(Struct(tuple(leaf))))))
    tags = Map(STRING, Struct((Field("k", INT),)))
    return Struct((Field("id", INT), Field("inner", inner), Field("tags", tags)))


def build(mutated: bool) -> Struct:
    fields = []
    for i in range(COLUMNS):
        if i % 10 == 0:
            fields.append(Field(f"s_{i}", nested_column(i, extra=mutated and i % 20 == 0)))
        elif i % 3 == 0:
            fields.append(Field(f"n_{i}", BIGINT if mutated and i % 9 == 0 else INT))
        else:
            fields.append(Field(f"c_{i}", STRING))
    if mutated:
        fields += [Field(f"added_{i}", STRING) for i in range(50)]
    return Struct(tuple(fields))


def run_once(deployed: Struct, compiled: Struct, fmt: str) -> tuple[float, int, int]:
    policy = Policy(allow_full_refresh=True)  # parquet: nested adds and widenings are a rewrite
    start = time.perf_counter()
    diff = diff_schemas(deployed, compiled)
    plan = plan_schema_change(diff, fmt, {}, policy, deployed, compiled)
    elapsed = time.perf_counter() - start
    return elapsed, len(diff), len(render_plan(plan, "`db`.`wide`", fmt))


def main() -> None:
    deployed, compiled = build(mutated=False), build(mutated=True)
    worst = 0.0
    for fmt in ("delta", "iceberg", "parquet"):
        runs = [run_once(deployed, compiled, fmt) for _ in range(RUNS)]
        median = statistics.median(elapsed for elapsed, _, _ in runs)
        worst = max(worst, median)
        _, changes, statements = runs[-1]
        print(
            f"{fmt:8} diff+plan {len(deployed.fields)} -> {len(compiled.fields)} columns, "
            f"{changes} changes, {statements} statements: median {median * 1000:.2f} ms "
            f"over {RUNS} runs"
        )
    ratio = worst / TARGET_SECONDS
    print(
        f"worst median {worst * 1000:.2f} ms = {ratio:.2f}x the {TARGET_SECONDS * 1000:.0f} ms target"
    )


if __name__ == "__main__":
    main()
