"""Carries a swap (core/recovery/swap.py) out on one connection, while the run holds the model's lease
alone: the old relation back on any failure before the new table holds its name, and the next
run's recovery of a swap (or a Parquet rewrite) a dead run left between its renames."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.evolution.render import REWRITE_SUFFIX, suffixed
from dbt.adapters.spark_contracts.core.evolution.steps import Inverse, Step
from dbt.adapters.spark_contracts.core.recovery.record import SWAP_PROPERTY, RunRecord
from dbt.adapters.spark_contracts.core.recovery.swap import Recovery, Swap, put_back, recovery
from dbt.adapters.spark_contracts.run.lease import Leases, ModelKey
from dbt.adapters.spark_contracts.run.record_io import Fenced, drop_record, table_listed
from dbt.adapters.spark_contracts.run.run_errors import LeaseLost, SwapFailed, SwapUndone

logger = AdapterLogger("SparkContracts")


@contextmanager
def alone(
    spark: Spark, key: ModelKey, leases: Optional[Leases] = None
) -> Iterator[Tuple[Leases, List[RunRecord]]]:
    """The model's lease held alone for the block (`RunInProgress`, naming the other run, if
    another run of the model holds one), let go whatever happens. Yields the leases and the
    other runs' records that still say what their run was changing (`Leases.alone`).
    `leases`: the run's own (its record then also says what its runner writes into it)."""
    leases = leases if leases is not None else Leases(spark)
    records = leases.alone(key)
    try:
        yield leases, records
    finally:
        leases.let_go(key)


@contextmanager
def building(
    spark: Spark, key: ModelKey, swap: Swap, leases: Optional[Leases] = None
) -> Iterator[Callable[[], None]]:
    """The block that builds `swap.beside` and swaps it in, under the model's lease: the relation
    checked to be still there first (never a dead run's evidence dropped on a stale cache), then
    any table a dead build left beside dropped, and any dead run's record of a swap of it (the
    relation holds its name: that swap never renamed it, or finished). Yields what swaps the
    built table in (`swap_in`, its statements behind the lease's fence, the run's record told
    before the first rename). A failure once the record was told, other than `SwapUndone` (the old relation as it was), keeps the
    record (`SwapFailed`: the old relation could not be put back), released. `leases`: the
    runner's, whose record holds the run's pending rows too (one record per run)."""
    with alone(spark, key, leases) as (leases, records):
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
        for record in records:  # one that names pending rows is its settler's
            if record.swap is not None and record.intent is None and record.pending is None:
                drop_record(spark, record.table, key.table_format)
        spark.run(f"DROP TABLE IF EXISTS {swap.beside}")
        told: List[bool] = []

        def under_way() -> None:
            leases.write(key, {SWAP_PROPERTY: swap.relation})
            told.append(True)

        # each statement of the swap (its renames, its undo) behind the lease's fence: a run
        # that stalled past its lease renames nothing after another run took it over
        fenced = Fenced(spark, lambda: leases.check(key))
        try:
            yield lambda: swap_in(fenced, swap, under_way)
        except SwapUndone:  # the old relation is as it was: the record has nothing to say
            raise
        except BaseException:  # e.g. `SwapFailed`: a swap stopped half way keeps its record
            if told:  # released, for the next run's recovery to read
                leases.release(key, keep=True)
            raise


def build_and_swap(spark: Spark, key: ModelKey, swap: Swap, create_sql: str) -> Any:
    """A rebuild built beside the relation by `create_sql` and swapped in (`building`).
    Returns the create's response."""
    with building(spark, key, swap) as swap_now:
        try:
            response = spark.run(create_sql)
        except Exception as exc:
            try:  # a failed CTAS may leave its table; the next build drops it anyway
                spark.run(f"DROP TABLE IF EXISTS {swap.beside}")
            except Exception as cleanup:
                logger.warning(f"{swap.relation}: could not drop {swap.beside} ({cleanup})")
            raise SwapUndone(swap.relation, f"building {swap.beside}", exc) from exc
        swap_now()
        return response


def swap_in(spark: Spark, swap: Swap, under_way: Callable[[], None]) -> None:
    """The table built at `swap.beside` takes `swap.relation`'s name, once the relation is seen
    still there and `under_way()` has told the run's record. A failure before it does puts the
    old relation back and raises `SwapUndone` (`SwapFailed` when putting it back fails too, with
    the statements left); a failed last drop only warns (the backup is a finished swap's
    leftover, which the next swap drops)."""
    try:
        if not table_listed(spark, swap.relation):  # never a stale backup dropped in its stead
            raise DbtRuntimeError(f"{swap.relation} is gone")
        under_way()
    except LeaseLost:  # another run took the model over: it puts back what is to be put back
        raise
    except Exception as exc:
        run_in_order(spark, swap.relation, swap.undo(()), f"the swap failed ({exc})")
        raise SwapUndone(swap.relation, "the swap", exc) from exc
    executed: List[Step] = []
    for step in swap.steps():
        try:
            spark.run(step.sql)
        except LeaseLost:
            raise
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
    backup_properties: Dict[str, str],
    backup_is_view: bool,
) -> bool:
    """`key.relation` is missing and its backup is there: if a swap or a Parquet rewrite
    stopped between its renames (core/recovery/swap.recovery), put it back from its backup (the
    next run, before anything else), under the model's lease (of two runs recovering at once,
    one does; the other finds it done), taken over from the run that left it (its process gone,
    or its lease run out while watched; a run that renews its lease is alive: `RunInProgress`,
    and nothing is renamed). A swap's record then goes; a rewrite's stays, for the repair of
    its intent. False: nothing proves a swap stopped half way (nothing done)."""
    with alone(spark, key) as (leases, records):
        if table_listed(spark, key.relation):
            return True  # another run put it back meanwhile
        beside = table_listed(spark, suffixed(key.relation, REWRITE_SUFFIX))
        found = recovery(key.relation, records, backup_properties, beside)
        if found is None:
            return False
        recovered, run = found
        _put_back(spark, key.relation, backup_is_view, recovered, run)
        if recovered is Recovery.SWAP:  # its record has said all it had to
            for record in (r for r in records if r.swap == key.relation):
                drop_record(spark, record.table, key.table_format)
        return True


def _put_back(
    spark: Spark, relation: str, backup_is_view: bool, recovered: Recovery, run: Optional[str]
) -> None:
    logger.warning(
        f"{relation} is missing and its backup holds it: a rebuild of run {run} stopped "
        "between its two renames; renaming it back"
    )
    run_in_order(
        spark,
        relation,
        put_back(relation, backup_is_view, recovered),
        f"run {run} stopped between its renames",
    )
