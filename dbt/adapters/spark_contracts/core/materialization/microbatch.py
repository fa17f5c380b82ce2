"""Microbatch incremental models: how one batch replaces exactly its time window (pure).

dbt runs a microbatch model once per batch, its refs filtered to the batch's window
`[event_time_start, event_time_end)`. Each batch then replaces that window of the table, in one
commit, whatever the format writes:

- Delta: `INSERT INTO t REPLACE WHERE <window> SELECT ...` (Delta's replaceWhere): one commit,
  rows outside the window kept (files holding both are rewritten).
- Iceberg: Spark's `REPLACE WHERE` (and `writeTo(...).overwrite(expr)`, the same DSv2
  overwrite by expression) is a metadata-only delete in Iceberg 1.12: it fails with "Cannot
  delete file where some, but not all, rows match filter" unless every data file lies wholly
  inside or outside the window. So the batch is one `MERGE` instead: the batch's rows are
  inserted and one marker row, matching every target row inside the window, deletes them; the
  copy-on-write rewrite touches only files holding rows of the window, in one snapshot.
- Other formats (parquet, ...): no row-level replace. dbt-spark's behaviour is kept: the batch
  overwrites the partitions it writes (dynamic `INSERT OVERWRITE`), so `partition_by` is
  required, refused at parse time without it.

A batch's rows must lie inside its window (also a null `event_time`): the load fails otherwise,
before anything is written, since such rows would never be replaced by a later run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from dbt.adapters.spark_contracts.core.evolution.capabilities import row_of
from dbt.adapters.spark_contracts.core.evolution.operations import Plan
from dbt.adapters.spark_contracts.core.schema.types import Struct, quote_identifier, sql_string
from dbt.adapters.spark_contracts.core.settings.config import ConfigError

MICROBATCH = "microbatch"
WINDOW_FORMATS = ("delta", "iceberg")
MARKER = "__dbt_batch_delete"  # the Iceberg MERGE's marker column (true: the deleting row)


class BatchLoad(Enum):
    REPLACE_WHERE = "INSERT INTO ... REPLACE WHERE <window> (Delta replaceWhere)"
    MERGE_WINDOW = "MERGE deleting the window and inserting the batch (Iceberg)"
    PARTITION_OVERWRITE = "dynamic partition INSERT OVERWRITE (dbt-spark's microbatch)"

    @property
    def replaces_window(self) -> bool:
        return self is not BatchLoad.PARTITION_OVERWRITE


def load_for(table_format: str) -> BatchLoad:
    """How a batch of a `table_format` table replaces its window (the capability row's)."""
    return BatchLoad[row_of(table_format).batch_load]


@dataclass(frozen=True)
class BatchWindow:
    """One batch's window on `event_time`: `start <= event_time < end`. The bounds render as
    dbt renders the refs' event-time filter (`col >= '<start>'`), so the window the batch
    replaces is the window its inputs were read from."""

    event_time: str
    start: datetime
    end: datetime

    def predicate(self, qualifier: str = "") -> str:
        column = (qualifier + "." if qualifier else "") + quote_identifier(self.event_time)
        return (
            f"{column} >= {sql_string(str(self.start))} and {column} < {sql_string(str(self.end))}"
        )

    def describe(self) -> str:
        return f"{self.event_time} in [{self.start}, {self.end})"


@dataclass(frozen=True)
class Microbatch:
    """What one batch's load does: the window it replaces and how the table's format does it."""

    unique_id: str
    window: BatchWindow
    load: BatchLoad

    @property
    def replaces_window(self) -> bool:
        return self.load.replaces_window

    def guard(self, qualifier: str = "") -> str:
        """True for a row inside the window; fails the statement for any other row."""
        column = (qualifier + "." if qualifier else "") + quote_identifier(self.window.event_time)
        message = (
            f"{self.unique_id}: microbatch output row outside its batch window "
            f"[{self.window.start}, {self.window.end}) of {self.window.event_time}: "
        )
        return (
            f"case when {self.window.predicate(qualifier)} then true else raise_error(concat("
            f"{sql_string(message)}, coalesce(cast({column} as string), 'null'))) end"
        )

    def load_sql(self, target: str, source: str, columns: Sequence[SelectColumn]) -> str:
        """The batch's one write of `source` into `target`; `columns`: the select list in the
        table's column order (see `select_list`)."""
        select = ", ".join(c.sql for c in columns)
        if self.load is BatchLoad.REPLACE_WHERE:
            return (
                f"insert into {target} replace where {self.window.predicate()}\n"
                f"select {select} from {source} where {self.guard()}"
            )
        if self.load is BatchLoad.MERGE_WINDOW:
            names = [c.name for c in columns]
            nulls = ", ".join("null" for _ in columns)
            marker = quote_identifier(MARKER)
            insert = ", ".join(names)
            values = ", ".join(f"s.{n}" for n in names)
            return (
                f"merge into {target} as t using (\n"
                f"  select {select}, not ({self.guard()}) as {marker} from {source}\n"
                f"  union all select {nulls}, true\n"
                f") as s on s.{marker} and {self.window.predicate('t')}\n"
                f"when matched then delete\n"
                f"when not matched and not s.{marker} then insert ({insert}) values ({values})"
            )
        raise ValueError(f"{self.load.name} is rendered by dbt-spark's microbatch macro")


@dataclass(frozen=True)
class SelectColumn:
    name: str  # quoted
    sql: str  # the select-list entry

    @classmethod
    def of(cls, name: str, written: bool) -> SelectColumn:
        quoted = quote_identifier(name)
        return cls(quoted, quoted if written else f"null as {quoted}")


def select_list(table_columns: Sequence[str], written: Struct) -> tuple[SelectColumn, ...]:
    """The batch's columns in the table's order (a `REPLACE WHERE` insert is positional): each
    table column the model writes, null for a column the model no longer outputs."""
    out = []
    for name in table_columns:
        field = written.field(name)
        out.append(SelectColumn.of(field.name if field is not None else name, field is not None))
    return tuple(out)


def plan_microbatch(
    unique_id: str,
    table_format: str,
    config: Mapping[str, Any],
    batch: Mapping[str, Any] | None,
    compiled: Struct,
) -> Microbatch:
    """The batch's load, or `ConfigError` (before anything is written) when the model has no
    batch window to replace or its `event_time` is not a column of its output."""
    event_time = config.get("event_time")
    if not isinstance(event_time, str) or not event_time.strip():
        raise ConfigError(
            f"{unique_id}: incremental_strategy microbatch needs `event_time` (the output column "
            f"each batch's window is on); got {event_time!r}"
        )
    start = (batch or {}).get("event_time_start")
    end = (batch or {}).get("event_time_end")
    if not isinstance(start, datetime) or not isinstance(end, datetime):
        raise ConfigError(
            f"{unique_id}: incremental_strategy microbatch runs one batch at a time, and this "
            f"run has no batch window (batch: {batch!r}); nothing was written"
        )
    field = compiled.field(event_time.strip())
    if field is None:
        raise ConfigError(
            f"{unique_id}: `event_time: {event_time}` is not a column of the model's output; "
            f"its columns are {', '.join(compiled.names)}"
        )
    load = load_for(table_format)
    if load is BatchLoad.PARTITION_OVERWRITE and not config.get("partition_by"):
        raise ConfigError(_partition_refusal(unique_id, table_format, config))
    return Microbatch(unique_id, BatchWindow(field.name, start, end), load)


def check_batch_plan(batch: Microbatch, plan: Plan) -> None:
    """A batch holds the rows of one window: a plan that rebuilds the table from the model's
    output (a full refresh) would drop every other window, so the batch refuses it."""
    refresh = plan.full_refresh
    if refresh is None:
        return
    raise ConfigError(
        f"{batch.unique_id}: this batch's schema change needs a full refresh ({refresh.reason}), "
        f"but a microbatch batch holds only the rows of {batch.window.describe()}: rebuilding "
        "the table from it would drop every other window; nothing was changed. Rebuild with "
        "`dbt run --full-refresh --select <model>` (dbt then runs every batch from `begin`)."
    )


def check_microbatch_config(model: str, config: Mapping[str, Any] | Any) -> None:
    """Parse time: a microbatch model on a format without row-level replace (parquet, ...)
    overwrites partitions, so it needs `partition_by`."""
    if config.get("materialized") != "incremental":
        return
    if config.get("incremental_strategy") != MICROBATCH:
        return
    file_format = str(config.get("file_format") or "delta").lower()
    if file_format in WINDOW_FORMATS or config.get("partition_by"):
        return
    raise ConfigError(_partition_refusal(model, file_format, config))


def _partition_refusal(model: str, file_format: str, config: Mapping[str, Any] | Any) -> str:
    return (
        f"{model}: incremental_strategy microbatch on file_format {file_format} overwrites the "
        "partitions each batch writes, so it needs `partition_by` (a column of the batch's "
        f"grain, batch_size {config.get('batch_size')}); allowed without it: file_format "
        f"{' or '.join(WINDOW_FORMATS)}, whose batches replace exactly their event_time window"
    )
