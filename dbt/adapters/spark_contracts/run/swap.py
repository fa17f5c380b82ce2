"""Carries a swap (core/swap.py) out on one connection: the old relation back on any failure
before the new table holds its name."""

from __future__ import annotations

from typing import List

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.swap import Swap
from dbt.adapters.spark_contracts.run.run_errors import SwapFailed

logger = AdapterLogger("SparkContracts")


def swap_in(spark: Spark, swap: Swap, marker: str) -> None:
    """The table built at `swap.beside` takes `swap.relation`'s name. Raises the first failure
    once the old relation is back (`SwapFailed` when that fails too); a failed last drop only
    warns (the backup is a finished swap's leftover, dropped by the next swap)."""
    statements = swap.statements(marker)
    executed: List[str] = []
    for sql in statements:
        try:
            spark.run(sql)
        except Exception as exc:
            undo = swap.undo(executed)
            if not undo:  # the new table holds the name: only the backup's drop failed
                logger.warning(f"{swap.relation}: could not drop {swap.backup} ({exc})")
                return
            try:
                for step in undo:
                    spark.run(step)
            except Exception as undo_exc:
                raise SwapFailed(swap.relation, exc, undo_exc, undo) from exc
            raise
        executed.append(sql)
