"""How one model build goes, decided once before its first statement. Pure.

The table and incremental materializations ask `plan_build` what to do with the relation dbt
found (or did not find) and carry out the one `BuildPlan` they are handed: create the table,
replace it in one atomic statement, drop it first where its format cannot replace, or plan the
run against the deployed table (the incremental run path: `ModelRun`). Jinja holds no format or
strategy decision of its own: "can this format replace atomically" is
`FormatCapabilities.atomic_rewrite`, asked here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from .capabilities import CAPABILITIES

TABLE = "table"
INCREMENTAL = "incremental"


class Build(Enum):
    CREATE = "create the table"
    REPLACE = "replace the table in one atomic statement"
    DROP_AND_CREATE = "drop the relation, then create the table (no atomic replace)"
    EVOLVE = "plan the run against the deployed table"


@dataclass(frozen=True)
class Existing:
    """The relation dbt found for the model: a view, or a table of `table_format`."""

    is_view: bool
    table_format: str  # delta, iceberg, or parquet for any file-source table


@dataclass(frozen=True)
class BuildPlan:
    action: Build
    file_format: str  # the model's configured format
    load_strategy: str  # the strategy the load runs (EVOLVE)
    result_format: str  # the table format of the relation once built

    @property
    def creates(self) -> bool:
        return self.action is not Build.EVOLVE

    @property
    def drop_first(self) -> bool:
        return self.action is Build.DROP_AND_CREATE

    @property
    def evolves(self) -> bool:
        return self.action is Build.EVOLVE

    @property
    def is_delta(self) -> bool:
        return self.result_format == "delta"

    @property
    def is_iceberg(self) -> bool:
        return self.result_format == "iceberg"


def replaces_atomically(existing: Existing | None, file_format: str) -> bool:
    """A `create or replace` of `existing` as `file_format` is one atomic statement: the table
    is of that format already and the format replaces atomically (Delta, Iceberg)."""
    if existing is None or existing.is_view or existing.table_format != file_format.lower():
        return False
    caps = CAPABILITIES.get(file_format.lower())
    return caps is not None and caps.atomic_rewrite


def creates_with_replace(file_format: str) -> bool:
    """The CTAS of a `file_format` table is `create or replace` (atomic over an existing table of
    the same format); other formats are created with a plain `create table`."""
    caps = CAPABILITIES.get(file_format.lower())
    return caps is not None and caps.atomic_rewrite


def load_strategy(
    strategy: str, file_format: str, unique_key: object, predicates: Sequence[str] | None
) -> str:
    """A `merge` without a key or predicates only appends: on Delta it is written as an append
    (a `MERGE ... ON FALSE` would scan the whole target)."""
    if strategy == "merge" and not unique_key and not predicates and file_format == "delta":
        return "append"
    return strategy


def plan_build(
    materialization: str,
    file_format: str,
    existing: Existing | None,
    full_refresh: bool,
    strategy: str = "",
    unique_key: object = None,
    predicates: Sequence[str] | None = None,
    binds_contract: bool = False,
) -> BuildPlan:
    """What a `table` or `incremental` build does with `existing` (None: no relation).

    - no relation: create it;
    - incremental over a table, no `--full-refresh`: evolve (plan against the deployed table,
      load with `load_strategy`); the relation keeps its own format;
    - table over a table that binds a schema contract / schema_evolution, no `--full-refresh`:
      evolve with the `table` strategy (a rebuild planned like an incremental run);
    - anything else rebuilds: replace atomically where the format can, else drop first."""
    file_format = file_format.lower()
    if existing is None:
        return BuildPlan(Build.CREATE, file_format, strategy, file_format)
    evolves = (
        not existing.is_view
        and not full_refresh
        and (materialization == INCREMENTAL or (materialization == TABLE and binds_contract))
    )
    if evolves:
        if materialization == TABLE:
            return BuildPlan(Build.EVOLVE, file_format, TABLE, file_format)
        load = load_strategy(strategy, file_format, unique_key, predicates)
        return BuildPlan(Build.EVOLVE, file_format, load, existing.table_format)
    action = Build.REPLACE if replaces_atomically(existing, file_format) else Build.DROP_AND_CREATE
    return BuildPlan(action, file_format, strategy, file_format)
