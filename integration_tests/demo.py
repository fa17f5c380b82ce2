"""`make demo`: what dbt-spark-contracts does, in three acts, on the embedded Spark.

1. Build the project (seeds, Delta / Iceberg / parquet models, a snapshot, contract models).
2. Evolve a model: its v2 adds a column, a struct field, widens an int and adds a column with a
   default and a backfill. The dry run writes the plan for review; the real run applies it.
3. Break a contract: a frozen model fails naming the change and its table stays as it was; a
   `discard_row` model keeps the good rows and sends the bad ones to quarantine with a reason;
   a model whose own dbt tests gate its load turns away the rows they fail, named by the test.

Every dbt command runs in this one process (dbt's `dbtRunner`), so Spark starts once.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

from dbt.cli.main import dbtRunner
from summarize import summarize

HERE = Path(__file__).resolve().parent
SCHEMA = "analytics"


def dbt(*args: str, expect_ok: bool = True) -> Any:
    result = dbtRunner().invoke([*args, "--profiles-dir", str(HERE), "--project-dir", str(HERE)])
    if result.success != expect_ok:
        sys.exit(f"demo: `dbt {' '.join(args)}` {'failed' if expect_ok else 'passed'} unexpectedly")
    return result


def rows(sql: str) -> list[tuple]:
    result = dbt("show", "--inline", sql, "--limit", "50", "--log-level", "none")
    table = result.result.results[0].agate_table
    return [tuple(row.values()) for row in table.rows]


def act(number: int, title: str, text: str) -> None:
    print(f"\n{'=' * 78}\nAct {number}: {title}\n{'=' * 78}\n{text.strip()}\n", flush=True)


def main() -> None:
    started = time.monotonic()
    shutil.rmtree(HERE / "spark-warehouse", ignore_errors=True)  # every demo starts fresh
    shutil.rmtree(HERE / "target", ignore_errors=True)

    act(1, "build v1", "`dbt build`: seeds, models in three table formats, a snapshot, tests.")
    dbt("build", "--quiet")
    print(summarize(HERE / "target"))

    act(
        2,
        "evolve a model",
        """
models/evolution/orders_evolving_schema.sql, v2 (`--vars '{act: 2}'`): a new column `channel`,
a new struct field `ship_to.zip`, `quantity` widened int -> bigint, and `priority` with a
default and a backfill for the rows already there. First the dry run: it changes nothing and
writes the plan to target/schema_plan.md, ready to post on a pull request.""",
    )
    dbt(
        "run",
        "--select",
        "orders_evolving_schema",
        "--vars",
        "{act: 2, schema_evolution_dry_run: true}",
    )
    print((HERE / "target" / "schema_plan.md").read_text())
    print("Now the run itself (one line says what changed):\n", flush=True)
    dbt("run", "--select", "orders_evolving_schema", "--vars", "{act: 2}")
    print("\nThe table's schema after v2:")
    dbt("run-operation", "demo_schema", "--args", "{model: orders_evolving_schema}", "--quiet")
    print("\nOld rows got the backfill, new rows their values:")
    for row in rows(
        f"select order_id, quantity, ship_to, channel, priority from {SCHEMA}.orders_evolving_schema order by order_id"
    ):
        print("   ", row)

    act(
        3,
        "break a contract",
        """
models/contracts/, v2 (`--vars '{contracts_v2: true}'`): the models add a column and one amount
becomes 'n/a'. orders_frozen inherits the folder's `columns: freeze` and must fail before it
changes anything; orders_discard_row keeps what fits and quarantines the rest. orders_gated's
own dbt tests gate its load (`data_tests: discard_row`): order 103's status 'lost' fails
accepted_values, order 104's customer 9 fails relationships to `customers`.""",
    )
    frozen = f"{SCHEMA}.orders_frozen"
    before = rows(f"select * from {frozen} order by order_id")
    dbt("run", "--select", "contracts", "--vars", "{contracts_v2: true}", expect_ok=False)
    after = rows(f"select * from {frozen} order by order_id")
    verdict = "unchanged" if after == before else "CHANGED (this is a bug)"
    print(
        f"\norders_frozen: {len(before)} rows before, {len(after)} after: the table is {verdict}."
    )
    print("\norders_discard_row__quarantine (the rows the contract turned away, and why):")
    quarantine = f"{SCHEMA}.orders_discard_row__quarantine"
    for row in rows(
        f"select order_id, amount, note, _contract_reason from {quarantine} order by order_id"
    ):
        print("   ", row)
    print("\norders_gated__quarantine (the rows its dbt tests turned away, named by the test):")
    gated = rows(
        f"select order_id, customer_id, status, _contract_reason "
        f"from {SCHEMA}.orders_gated__quarantine order by order_id"
    )
    for row in gated:
        print("   ", row)
    print("\nIts tests after the load (they pass: the rows they would return were turned away):")
    tested = dbt("test", "--select", "orders_gated", "--quiet")
    passed = sum(1 for r in tested.result.results if str(r.status) == "pass")
    print(f"    {passed} of {len(tested.result.results)} tests pass")
    print("\nThe schema history of orders_evolving_schema:")
    dbt("run-operation", "schema_history", "--args", "{model: orders_evolving_schema}", "--quiet")

    print(
        f"""
{"=" * 78}
Done in {time.monotonic() - started:.0f} s. Where to look next:
  integration_tests/target/schema_changes.json  what each model's last run planned and did
  integration_tests/target/schema_plan.md       the dry run's plan (act 2)
  {SCHEMA}.dbt_schema_history                    every applied change, discard and repair
  README.md: "Schema evolution" and "Data contracts" for every setting used here
"""
    )
    if verdict != "unchanged" or len(gated) != 2 or passed != len(tested.result.results):
        sys.exit(1)


if __name__ == "__main__":
    main()
