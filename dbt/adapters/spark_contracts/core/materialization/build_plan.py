"""What a `table` or `incremental` build does with the relation dbt found, decided before anything
is read from it. Pure. `plan_build(facts) -> BuildPlan`: create the table, replace it in one
atomic statement, build it beside the relation and swap, drop then create, or evolve (plan the
run against the deployed table: core/materialization/run_plan.py). "Can this format replace
atomically" is `FormatCapabilities.atomic_rewrite`, asked here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dbt.adapters.spark_contracts.core.evolution.capabilities import CAPABILITIES, row_of
from dbt.adapters.spark_contracts.core.evolution.render import suffixed
from dbt.adapters.spark_contracts.core.materialization.flags import Is
from dbt.adapters.spark_contracts.core.recovery.pending import run_key
from dbt.adapters.spark_contracts.core.recovery.swap import refused

TABLE = "table"
INCREMENTAL = "incremental"
SNAPSHOT = "snapshot"  # a snapshot's run: its schema change, then dbt's merge (snapshot.py)


class Build(Enum):
    CREATE = "create the table"
    REPLACE = "replace the table in one atomic statement"
    SWAP = (
        "build the table beside the relation, then swap them by two renames (core/recovery/swap.py)"
    )
    REFUSE = "refused: a table at a fixed path cannot be dropped and built over its files"
    DROP_AND_CREATE = "drop the relation, then create the table (a fixed path, Iceberg's catalog)"
    EVOLVE = "plan the run against the deployed table"


@dataclass(frozen=True)
class Existing:
    """The relation dbt found for the model: a view, or a table of `table_format`."""

    is_view: bool
    table_format: str  # delta, iceberg, or parquet for any file-source table


# the name a managed table of a format whose killed CTAS blocks its name is created under: its
# run's own (`created_name`), renamed to the table's name in the CTAS's own script
CREATED_SUFFIX = "__dbt_new_"


@dataclass(frozen=True)
class BuildPlan:
    action: Build
    file_format: str  # the model's configured format
    load_strategy: str  # the strategy the load runs (EVOLVE)
    result_format: str  # the table format of the relation once built
    # the table statement's CTAS creates the table under its run's own name and renames it
    # (`created_by_rename`): a managed table of a format whose killed CTAS blocks its name
    creates_by_rename: bool = False

    evolves = Is("action", Build.EVOLVE)

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


def replacement(existing: Existing | None, file_format: str, external: bool = False) -> Build:
    """How a rebuild as `file_format` replaces `existing`: in one statement where the format
    can; else built beside it and swapped in by two renames (a failed or killed build leaves
    the old relation); at a `location_root` (`external`: the new table's path is the old one's)
    or in a format's own catalog (Iceberg's Hadoop catalog cannot rename), dropped first."""
    if replaces_atomically(existing, file_format):
        return Build.REPLACE
    if external and existing is not None and not existing.is_view:
        return Build.REFUSE  # its table is external: DROP would leave its files (`refused`)
    if external or row_of(file_format).in_own_catalog:
        return Build.DROP_AND_CREATE
    return Build.SWAP


def creates_with_replace(file_format: str) -> bool:
    """The CTAS of a `file_format` table is `create or replace` (atomic over an existing table of
    the same format); other formats are created with a plain `create table`."""
    caps = CAPABILITIES.get(file_format.lower())
    return caps is not None and caps.atomic_rewrite


def creates_by_rename(result_format: str, external: bool) -> bool:
    """A CTAS of a `result_format` table goes to a name of its run's own first: a CTAS killed
    while it writes leaves its uncommitted files (`_temporary/`) in the folder of the name it
    creates, where Spark then refuses to create a managed table (LOCATION_ALREADY_EXISTS) until
    someone deletes them (Parquet). A run's own name is never created again, so a retry at once
    builds the table. Not at a fixed path (`external`): a rename would not move its files."""
    return row_of(result_format).ctas_killed_blocks_its_name and not external


def created_name(relation: str, invocation_id: str) -> str:
    """The name `relation`'s CTAS creates it under where it `creates_by_rename`: the run's own."""
    return suffixed(relation, CREATED_SUFFIX + run_key(invocation_id))


def created_by_rename(ctas: str, created: str, relation: str) -> str:
    """The table statement `ctas`, which creates `created`, and the rename of `created` to
    `relation`, as one script (SQL scripting, on by default in Spark 4.1): one statement for the
    executor that sends it. A kill inside it leaves no table or folder under `relation`: the
    CTAS's leftover (its `_temporary/`, or its whole table if the kill fell between the two) is
    under the run's own name, harmless, for a person to drop; a failed CTAS leaves nothing."""
    return f"BEGIN\n{ctas.strip().rstrip(';')};\nALTER TABLE {created} RENAME TO {relation};\nEND"


def load_strategy(strategy: str, file_format: str, unique_key: object) -> str:
    """A `merge` without a key only appends (dbt-spark joins `FALSE`, to its predicates if any:
    nothing matches): on Delta and Iceberg it is written as an append (a `MERGE ... ON FALSE`
    would scan the whole target; Iceberg 1.12 on Spark 4.1 fails planning one whose predicates
    fold to false, `NoSuchElementException: None.get`). Predicates do not change that: they
    only narrow what a key matches."""
    if strategy == "merge" and not unique_key and row_of(file_format).update:
        return "append"
    return strategy


@dataclass(frozen=True)
class BuildFacts:
    """What a `table` or `incremental` build is decided from before anything is read from the
    relation: the materialization, the model's format and config, and the relation dbt found
    (None: no relation)."""

    materialization: str
    file_format: str
    existing: Existing | None
    full_refresh: bool = False
    strategy: str = ""
    unique_key: object = None
    binds_contract: bool = False  # a schema contract or schema_evolution binds the model
    external: bool = False  # the model sets a location_root: the table's path is its name's

    @property
    def evolves(self) -> bool:
        """The build is planned against the deployed table (the run's facts are read):
        incremental or snapshot over a table, or a table that binds a contract, without
        `--full-refresh` (a snapshot has none)."""
        e = self.existing
        return (
            e is not None
            and not e.is_view
            and not self.full_refresh
            and (
                self.materialization in (INCREMENTAL, SNAPSHOT)
                or (self.materialization == TABLE and self.binds_contract)
            )
        )

    @property
    def load_strategy(self) -> str:
        """The strategy an evolving build loads with (`table`: a rebuild planned like a run;
        `snapshot`: dbt's snapshot merge)."""
        if self.materialization in (TABLE, SNAPSHOT):
            return self.materialization
        return load_strategy(self.strategy, self.file_format.lower(), self.unique_key)


def plan_build(facts: BuildFacts) -> BuildPlan:
    """What a `table`, `incremental` or `snapshot` build does with the relation dbt found.

    - no relation: create it;
    - incremental over a table, no `--full-refresh`: evolve (plan against the deployed table,
      load with `load_strategy`); the relation keeps its own format;
    - table over a table that binds a schema contract / schema_evolution, no `--full-refresh`:
      evolve with the `table` strategy (a rebuild planned like an incremental run);
    - snapshot over a table: evolve with the `snapshot` strategy (its schema change, then dbt's
      merge; core/materialization/snapshot.py);
    - anything else rebuilds: replace atomically where the format can, else build beside and
      swap, else (a location_root, a format's own catalog) drop first (`replacement`)."""
    file_format = facts.file_format.lower()
    existing = facts.existing
    renames = creates_by_rename(file_format, facts.external)
    if existing is None:
        return BuildPlan(Build.CREATE, file_format, facts.strategy, file_format, renames)
    if facts.evolves:
        result = file_format if facts.materialization == TABLE else existing.table_format
        renames = creates_by_rename(result, facts.external)
        return BuildPlan(Build.EVOLVE, file_format, facts.load_strategy, result, renames)
    action = replacement(existing, file_format, facts.external)
    if action is Build.REFUSE:
        raise refused(existing.table_format, file_format)
    return BuildPlan(action, file_format, facts.strategy, file_format, renames)
