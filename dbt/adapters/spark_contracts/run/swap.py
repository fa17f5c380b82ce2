"""Carries a swap (core/recovery/swap.py) out on one connection, while the run holds the model's lease
alone: the old relation back on any failure before the new table holds its name, and the next
run's recovery of a swap (or a Parquet rewrite) a dead run left between its renames."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, List, Optional, Sequence

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.evolution.steps import Inverse, Step
from dbt.adapters.spark_contracts.core.recovery.intent import find_intent
from dbt.adapters.spark_contracts.core.recovery.swap import Recovery, Swap, marker_of, put_back
from dbt.adapters.spark_contracts.run.lease import Leases, ModelKey, table_listed
from dbt.adapters.spark_contracts.run.run_errors import SwapFailed, SwapUndone

logger = AdapterLogger("SparkContracts")


@contextmanager
def alone(spark: Spark, key: ModelKey) -> Iterator[None]:
    """The model's lease held alone for the block (`RunInProgress`, naming the other run, if
    another run of the model holds one), let go whatever happens."""
    leases = Leases(spark)
    leases.alone(key)
    try:
        yield
    finally:
        leases.let_go(key)


@contextmanager
def building(spark: Spark, key: ModelKey, swap: Swap) -> Iterator[None]:
    """The block that builds `swap.beside` and swaps it in, under the model's lease: the relation
    checked to be still there first (never a dead run's evidence dropped on a stale cache), then
    any table a dead build left beside dropped."""
    with alone(spark, key):
        if not table_listed(spark, swap.relation):
            # gone since dbt's cache was read: a run stopped between its renames left it under
            # the backup name, with its build beside it (the evidence the next run recovers by)
            raise SwapUndone(
                swap.relation,
                "finding it",
                DbtRuntimeError(
                    f"it is gone; if {swap.backup} is there, a run stopped between its "
                    "renames: run again, and the next run puts it back first"
                ),
            )
        spark.run(f"DROP TABLE IF EXISTS {swap.beside}")
        yield


def build_and_swap(spark: Spark, key: ModelKey, swap: Swap, create_sql: str) -> Any:
    """A rebuild built beside the relation by `create_sql` and swapped in (`building`).
    Returns the create's response."""
    with building(spark, key, swap):
        try:
            response = spark.run(create_sql)
        except Exception as exc:
            try:  # a failed CTAS may leave its table; the next build drops it anyway
                spark.run(f"DROP TABLE IF EXISTS {swap.beside}")
            except Exception as cleanup:
                logger.warning(f"{swap.relation}: could not drop {swap.beside} ({cleanup})")
            raise SwapUndone(swap.relation, f"building {swap.beside}", exc) from exc
        swap_in(spark, swap, key.invocation_id)
        return response


def swap_in(spark: Spark, swap: Swap, marker: str) -> None:
    """The table built at `swap.beside` takes `swap.relation`'s name. A failure before it does
    puts the old relation back and raises `SwapUndone` (`SwapFailed` when putting it back fails
    too, with the statements left); a failed last drop only warns (the backup is a finished
    swap's leftover, which the next swap drops)."""
    executed: List[Step] = []
    for step in swap.steps(marker):
        try:
            spark.run(step.sql)
        except Exception as exc:
            undo = swap.undo(executed)
            if not undo:  # the new table holds the name: only the backup's drop failed
                logger.warning(f"{swap.relation}: could not drop {swap.backup} ({exc})")
                return
            run_in_order(spark, swap.relation, undo, f"the swap failed ({exc})")
            raise SwapUndone(swap.relation, "the swap", exc) from exc
        executed.append(step)


def run_in_order(spark: Spark, relation: str, undo: Sequence[Inverse], cause: str) -> None:
    """Run the inverses `undo` in order; on a failure, `SwapFailed` names it and the
    statements left."""
    for i, inverse in enumerate(undo):
        try:
            spark.run(inverse.sql)
        except Exception as undo_exc:
            left = tuple(u.sql for u in undo[i:])
            raise SwapFailed(relation, cause, undo_exc, left) from undo_exc


def recover(
    spark: Spark,
    key: ModelKey,
    backup_properties: dict,
    backup_is_view: bool,
    recovered: Recovery,
) -> None:
    """Put `key.relation` back from its backup (the next run, before anything else), under the
    model's lease (of two runs recovering at once, one does; the other finds it done), taken
    over from the run that left it (its process gone, or its lease run out while watched; a run
    that renews its lease is alive: `RunInProgress`, and nothing is renamed)."""
    with alone(spark, key):
        if table_listed(spark, key.relation):
            return  # another run put it back meanwhile
        _recover(spark, key.relation, backup_properties, backup_is_view, recovered, key.unique_id)


def _recover(
    spark: Spark,
    relation: str,
    backup_properties: dict,
    backup_is_view: bool,
    recovered: Recovery,
    unique_id: str,
) -> None:
    invocation: Optional[str] = marker_of(backup_properties)
    if recovered is Recovery.REWRITE:
        intent = find_intent(backup_properties)
        invocation = intent.invocation_id if intent else None
    logger.warning(
        f"{relation} is missing and its backup holds it: a rebuild of run {invocation} stopped "
        "between its two renames; renaming it back"
    )
    run_in_order(
        spark,
        relation,
        put_back(relation, backup_is_view, recovered),
        f"run {invocation} stopped between its renames",
    )
