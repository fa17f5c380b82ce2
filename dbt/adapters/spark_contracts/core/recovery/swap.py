"""A rebuild where no single statement replaces the relation: the new table is built beside the
old one and swapped in by two renames. Pure.

A format that cannot `create or replace` atomically (Parquet), or a relation that changes kind
or format (a view becoming a table, a Parquet table becoming Delta), was dropped and then
created: a query failing at run time, a cancel or a kill between the two left no relation. Here
the old relation stays under its name until the new table is complete:

1. `<relation>__dbt_rewrite` is created with the model's output (any stale one dropped first);
2. the old relation is marked (`SWAP_PROPERTY`), renamed to `<relation>__dbt_backup`;
3. the new table is renamed to `<relation>`; the backup is dropped.

A failure before step 3's first rename leaves the old relation as it was (the half-built table
is dropped). A kill between the two renames leaves the marked backup *and* the new table beside:
that pair, and only that pair, is the positive evidence on which the next run renames the backup
back (`recovery`), unless the run that marked it still holds its lease. A backup without the
table beside is a finished swap's leftover (its last drop did not run): never renamed back,
dropped by the next swap. A run builds and swaps while it holds the model's lease alone, so two
runs of one model never swap at once (the second fails naming the first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from dbt.adapters.spark_contracts.core.evolution.render import (
    BACKUP_SUFFIX,
    REWRITE_SUFFIX,
    suffixed,
)
from dbt.adapters.spark_contracts.core.evolution.steps import (
    DropTable,
    Inverse,
    Rename,
    Step,
    UnsetProperty,
    kind,
    undo,
)
from dbt.adapters.spark_contracts.core.recovery.intent import Intent, find_intent
from dbt.adapters.spark_contracts.core.schema.types import sql_string
from dbt.adapters.spark_contracts.core.settings.config import ConfigError

SWAP_PROPERTY = "dbt_spark_contracts.swap"


def refused(existing_format: str, file_format: str | None = None) -> ConfigError:
    """Why a rebuild of a table at a fixed path does not go ahead: Spark refuses a CTAS into
    the non-empty folder an external table's DROP leaves, so dropping first would lose the
    table and build nothing (and a table built beside it would be built at its path)."""
    return ConfigError(
        f"a {existing_format} table at a fixed path (`location_root` or a `path` option) "
        f"cannot be rebuilt{f' as {file_format}' if file_format else ''}: dropping it leaves "
        "its files, and Spark refuses "
        "to create a table over them; nothing was changed. Keep its format if that is Delta or "
        "Iceberg (replaced in one statement), or drop the table and its folder by hand first"
    )


@dataclass(frozen=True)
class Swap:
    """The swap of `relation` (rendered) for the table built beside it. `old_is_view`: the
    relation being replaced is a view; `stale_backup_is_view`: a finished swap's backup that
    dbt's cache shows is a view (any backup there is dropped first)."""

    relation: str
    old_is_view: bool = False
    stale_backup_is_view: bool = False

    @property
    def beside(self) -> str:
        return suffixed(self.relation, REWRITE_SUFFIX)

    @property
    def backup(self) -> str:
        return suffixed(self.relation, BACKUP_SUFFIX)

    def steps(self, marker: str) -> tuple[Step, ...]:
        """Steps 2 and 3, once the table beside is complete. `marker`: who swaps (the run's
        invocation id), kept on the old relation while it waits under the backup name."""
        old = kind(self.old_is_view)
        return (
            # first: fails, before anything is dropped, if the relation is gone (a run stopped
            # between its renames left it under the backup name: the next run recovers it)
            Step(
                f"ALTER {old} {self.relation} SET TBLPROPERTIES "
                f"({sql_string(SWAP_PROPERTY)} = {sql_string(marker)})",
                UnsetProperty(self.relation, SWAP_PROPERTY, self.old_is_view),
            ),
            # the relation is there, so a backup is a finished swap's leftover
            Step(f"DROP {kind(self.stale_backup_is_view)} IF EXISTS {self.backup}"),
            Step(
                f"ALTER {old} {self.relation} RENAME TO {self.backup}",
                Rename(self.backup, self.relation, self.old_is_view),
            ),
            Step(f"ALTER TABLE {self.beside} RENAME TO {self.relation}", stands=True),
            Step(f"DROP {old} {self.backup}"),
        )

    def undo(self, done: Iterable[Step]) -> tuple[Inverse, ...]:
        """What puts the old relation back after the swap stopped, given the steps that
        completed, and drops the table built beside. Empty once the new table holds the name
        (the swap then stands: a failed last drop leaves a backup the next swap drops)."""
        steps = list(done)
        if any(s.stands for s in steps):
            return ()
        return (*undo(steps), DropTable(self.beside))


class Recovery(Enum):
    """What the next run finds when the relation is missing and its backup is there."""

    SWAP = "a swap stopped between its renames: the marked backup, the new table beside it"
    REWRITE = "a Parquet rewrite stopped between its renames: the backup's intent names them"


def recovery(backup_properties: Mapping[str, str], beside_exists: bool) -> Recovery | None:
    """The relation is missing and `<relation>__dbt_backup` is there (its properties given):
    did a swap or a rewrite stop between its two renames? Only on the backup's own evidence: a
    swap's marker with the new table still beside it (after the second rename it no longer is),
    or a rewrite's intent naming its rename to the backup. Anything else (a backup without the
    table beside: a finished swap whose last drop did not run) is never renamed back."""
    if marker_of(backup_properties) is not None and beside_exists:
        return Recovery.SWAP
    intent = find_intent(backup_properties)
    if intent is not None and renames_to_backup(intent):
        return Recovery.REWRITE
    return None


def renames_to_backup(intent: Intent) -> bool:
    """The intent's run renames its table to the backup name (a Parquet rewrite's swap): a
    step whose inverse renames the backup back."""
    back = Rename(suffixed(intent.relation, BACKUP_SUFFIX), intent.relation)
    return any(step.inverse == back for step in intent.steps)


def marker_of(properties: Mapping[str, str]) -> str | None:
    """The invocation that marked a relation for its swap, if any (keys case-insensitive)."""
    for key, value in properties.items():
        if key.lower() == SWAP_PROPERTY:
            return value
    return None


def put_back(relation: str, backup_is_view: bool, recovered: Recovery) -> tuple[Inverse, ...]:
    """The inverses that put a relation back from its backup, in the order that keeps the
    evidence until the relation holds its name again: the rename back, the marker off (a swap),
    then the new table beside dropped."""
    steps: list[Inverse] = [Rename(suffixed(relation, BACKUP_SUFFIX), relation, backup_is_view)]
    if recovered is Recovery.SWAP:
        steps.append(UnsetProperty(relation, SWAP_PROPERTY, backup_is_view))
    steps.append(DropTable(suffixed(relation, REWRITE_SUFFIX)))
    return tuple(steps)
