"""A rebuild where no single statement replaces the relation: the new table is built beside the
old one and swapped in by two renames. Pure.

A format that cannot `create or replace` atomically (Parquet), or a relation that changes kind
or format (a view becoming a table, a Parquet table becoming Delta), was dropped and then
created: a query failing at run time, a cancel or a kill between the two left no relation. Here
the old relation stays under its name until the new table is complete:

1. `<relation>__dbt_rewrite` is created with the model's output (any stale one dropped first;
   a Parquet CTAS creates it under its run's own name and renames it in the same script,
   core/materialization/build_plan.created_by_rename);
2. the run's record (core/recovery/record.py) says the swap is under way (`swap`); the old
   relation is renamed to `<relation>__dbt_backup`;
3. the new table is renamed to `<relation>`; the backup is dropped; the record goes.

A failure before step 3's first rename leaves the old relation as it was (the half-built table
is dropped). A kill between the two renames leaves the backup *and* the new table beside, with
the run's record saying the swap was under way: those together, and only those, are the positive
evidence on which the next run renames the backup back (`recovery`), once it has taken the
run's lease over. A backup without the table beside is a finished swap's leftover (its last drop
did not run): never renamed back, dropped by the next swap. A run builds and swaps while it
holds the model's lease alone, so two runs of one model never swap at once (the second fails
naming the first). A Parquet rewrite (a multi-step change of a table that keeps no log) renames
the same way, its intent in the run's record naming the rename to the backup.

Earlier builds (before the run record) marked the old relation itself (`SWAP_PROPERTY` on the backup) and wrote a
rewrite's intent into the table's properties: both are still read, so a swap they left half way
is put back too.
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
from dbt.adapters.spark_contracts.core.recovery.record import SWAP_PROPERTY, RunRecord
from dbt.adapters.spark_contracts.core.settings.config import ConfigError


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

    def steps(self) -> tuple[Step, ...]:
        """Steps 2 and 3, once the table beside is complete and the run's record says the swap
        is under way (`SWAP_PROPERTY`)."""
        old = kind(self.old_is_view)
        return (
            # the relation is there (checked under the lease), so a backup is a finished swap's
            # leftover
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

    SWAP = "a swap stopped between its renames: its run's record, the backup, the new table"
    REWRITE = "a Parquet rewrite stopped between its renames: its run's intent names them"
    MARKED = "a swap an older version stopped between its renames: the marked backup"


def recovery(
    relation: str,
    records: Iterable[RunRecord],
    backup_properties: Mapping[str, str],
    beside_exists: bool,
) -> tuple[Recovery, str | None] | None:
    """`relation` is missing and `<relation>__dbt_backup` is there: did a swap or a rewrite
    stop between its two renames? The kind, and the run that left it. Only on positive
    evidence: a run's record (`records`: the model's) saying its swap of `relation` was under
    way, with the new table still beside (after the second rename it no longer is); a record
    whose intent renames the table to the backup; or, from an older version, the backup's own
    marker (with the table beside) or intent. Anything else (a backup without the table beside:
    a finished swap whose last drop did not run) is never renamed back."""
    for record in records:
        if record.swap == relation and beside_exists:
            return Recovery.SWAP, record.run
        if record.intent is not None and renames_to_backup(record.intent):
            return Recovery.REWRITE, record.run
    marker = marker_of(backup_properties)
    if marker is not None and beside_exists:
        return Recovery.MARKED, marker
    intent = find_intent(backup_properties)
    if intent is not None and renames_to_backup(intent):
        return Recovery.REWRITE, intent.invocation_id
    return None


def renames_to_backup(intent: Intent) -> bool:
    """The intent's run renames its table to the backup name (a Parquet rewrite's swap): a
    step whose inverse renames the backup back."""
    back = Rename(suffixed(intent.relation, BACKUP_SUFFIX), intent.relation)
    return any(step.inverse == back for step in intent.steps)


def marker_of(properties: Mapping[str, str]) -> str | None:
    """The invocation that marked a relation for its swap (earlier builds (before the run record)), if any (keys
    case-insensitive)."""
    for key, value in properties.items():
        if key.lower() == SWAP_PROPERTY:
            return value
    return None


def put_back(relation: str, backup_is_view: bool, recovered: Recovery) -> tuple[Inverse, ...]:
    """The inverses that put a relation back from its backup, in the order that keeps the
    evidence until the relation holds its name again: the rename back, an older version's
    marker off, then the new table beside dropped."""
    steps: list[Inverse] = [Rename(suffixed(relation, BACKUP_SUFFIX), relation, backup_is_view)]
    if recovered is Recovery.MARKED:
        steps.append(UnsetProperty(relation, SWAP_PROPERTY, backup_is_view))
    steps.append(DropTable(suffixed(relation, REWRITE_SUFFIX)))
    return tuple(steps)
