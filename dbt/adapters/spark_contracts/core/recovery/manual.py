"""A pending table settled by hand, and whose rows the quarantine holds (core/recovery/
pending.py's protocol; its warnings and errors name these statements)."""

from __future__ import annotations

from dataclasses import dataclass

from dbt.adapters.spark_contracts.core.contracts.load_select import (
    BATCH_COLUMN,
    PENDING_DISCARDED,
    RUN_ID_COLUMN,
)
from dbt.adapters.spark_contracts.core.evolution.capabilities import drop_sql
from dbt.adapters.spark_contracts.core.recovery.pending import Pending, pending_name
from dbt.adapters.spark_contracts.core.schema.types import quote_identifier, sql_string


def manual_move(pending: str, quarantine: str, table_format: str, rows: RowsOf | None) -> str:
    """The statements that settle a pending table by hand (beside a model in `table_format`):
    its discarded rows appended (the pending table holds the kept rows too) unless the
    quarantine holds `rows` (that run's, that batch's) already, as it does where a move landed
    before its drop of the pending table; then dropped. `rows` None (the pending table names
    no run): unguarded."""
    drop = drop_sql(pending, table_format)
    guard = (
        ""
        if rows is None
        else (f" AND NOT EXISTS (SELECT 1 FROM {quarantine} WHERE {rows.where()})")
    )
    return (
        f"INSERT INTO {quarantine} BY NAME SELECT * FROM {pending} WHERE {PENDING_DISCARDED}"
        f"{guard}; {drop} "
        f"(if the model's load of that run is in its table), or {drop} (if not)"
    )


def rows_of_pending(pending: Pending, quarantine: str) -> RowsOf | None:
    """Whose rows `pending` holds, as the quarantine tells them (`RowsOf`): its run's, and a
    microbatch batch's own (its name carries the batch after the run: `pending_name`) by its
    commit tag. None where its properties name no run."""
    if pending.run is None:
        return None
    plain = pending_name(quarantine.rsplit(".", 1)[-1], pending.run).strip("`").lower()
    batch = pending.name.rsplit(".", 1)[-1].strip("`").lower() != plain
    return RowsOf(pending.run, pending.tag if batch else None)


@dataclass(frozen=True)
class RowsOf:
    """A dead run's rows in the quarantine: its invocation's (`_dbt_run_id`), and, for a
    microbatch batch, its own among them (`_dbt_batch_tag`, its commit tag)."""

    invocation_id: str
    tag: str | None = None

    def where(self) -> str:
        where = f"`{RUN_ID_COLUMN}` = {sql_string(self.invocation_id)}"
        if self.tag is not None:
            where += f" and {quote_identifier(BATCH_COLUMN)} = {sql_string(self.tag)}"
        return where
