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
back (`between_renames`). A backup without the table beside is a finished swap's leftover (its
last drop did not run): never renamed back, dropped by the next swap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .render import BACKUP_SUFFIX, REWRITE_SUFFIX, suffixed
from .types import sql_string

SWAP_PROPERTY = "dbt_spark_contracts.swap"


def _kind(is_view: bool) -> str:
    return "VIEW" if is_view else "TABLE"


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

    def statements(self, marker: str) -> tuple[str, ...]:
        """Steps 2 and 3, once the table beside is complete. `marker`: who swaps (the run's
        commit tag), kept on the old relation while it waits under the backup name."""
        kind = _kind(self.old_is_view)
        return (
            f"DROP {_kind(self.stale_backup_is_view)} IF EXISTS {self.backup}",
            f"ALTER {kind} {self.relation} SET TBLPROPERTIES "
            f"({sql_string(SWAP_PROPERTY)} = {sql_string(marker)})",
            f"ALTER {kind} {self.relation} RENAME TO {self.backup}",
            f"ALTER TABLE {self.beside} RENAME TO {self.relation}",
            f"DROP {kind} {self.backup}",
        )

    def undo(self, executed: Sequence[str]) -> tuple[str, ...]:
        """What puts the old relation back after the swap stopped, given the statements that
        completed. Empty once the new table holds the name (the swap then stands: a failed last
        drop leaves a backup the next swap drops)."""
        kind = _kind(self.old_is_view)
        if f"ALTER TABLE {self.beside} RENAME TO {self.relation}" in executed:
            return ()
        undo: list[str] = []
        if f"ALTER {kind} {self.relation} RENAME TO {self.backup}" in executed:
            undo.append(f"ALTER {kind} {self.backup} RENAME TO {self.relation}")
        if any(s.startswith(f"ALTER {kind} {self.relation} SET TBLPROPERTIES") for s in executed):
            undo.append(unmark(self.relation, self.old_is_view))
        undo.append(f"DROP TABLE IF EXISTS {self.beside}")
        return tuple(undo)


def unmark(relation: str, is_view: bool = False) -> str:
    return (
        f"ALTER {_kind(is_view)} {relation} UNSET TBLPROPERTIES IF EXISTS "
        f"({sql_string(SWAP_PROPERTY)})"
    )


def between_renames(backup_properties: Mapping[str, str] | None, beside_exists: bool) -> bool:
    """The relation is missing: did a swap stop between its two renames? Only when the backup
    carries the swap's marker and the new table still waits beside (after the second rename it
    no longer does)."""
    if backup_properties is None or not beside_exists:
        return False
    return any(key.lower() == SWAP_PROPERTY for key in backup_properties)
