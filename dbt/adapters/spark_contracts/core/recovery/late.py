"""A fenced-off run's late commit, on a table whose log shows it. Pure.

A run that stalls between its fence (core/recovery/lease.py) and its statement reaching the table,
or whose statement a server goes on running after its client died, can commit once more after a
later run took its lease over and repaired the table. Delta refuses such a commit of rows (the
taker's marker, core/recovery/txn_fence.py), but not a statement that takes no transaction id: an
`ALTER TABLE` (a late `DROP COLUMNS` would take a column's values out of the current version) or
the RESTORE of the holder's own undo (it would undo the taker's repair and load). Iceberg has no
transaction id at all. At most one lands per run: the holder checks its lease
before each statement it sends, and its process beats its lease while a statement runs (a lease
is taken over only from a stopped or dead process), so only the statement already past its fence
is left.

So the taker, where the holder's statements may still run (a server; a process still alive),
keeps the holder's run record after the repair, its intent cleared, with a `LateWatch`:
the holder's commit tag and the version the repair left the table at. Every later repair step of
the model reads the table's own log for commits with that tag after that version on the current
lineage (positive evidence in the table's own log, ordered by parent ids or Delta's versions,
never by commit times):

- none: nothing landed (yet); the watch stays until the holder is provably gone;
- at the head of the lineage (only the holder's own after the first of them, and takers'
  markers, which change nothing): put back to the version before them (Iceberg's rollback,
  Delta's RESTORE, which brings a dropped column's values back), and the watch ends (that was
  the statement past the fence);
- under another writer's commit: nothing is undone (that would undo the other commit); the run
  fails naming both and the repair by hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dbt.adapters.spark_contracts.core.recovery.intent import Commit, Snapshot, is_marker_commit

# "<snapshot id or none> <commit tag>": kept on a taken-over run record
LATE_PROPERTY = "dbt_spark_contracts.late_after"
# "<snapshot id>": written on a watched record before the rollback that takes its late commit
# back, where a run whose lease the repair took over may still roll back to the same snapshot
# (Iceberg, run/rollback_fence.py); the fence of that snapshot is then due, and every repair
# step builds it (the taker killed between its rollback and its fence leaves it to the next run)
FENCE_DUE_PROPERTY = "dbt_spark_contracts.fence_due"


def fence_due(value: str | None) -> int | None:
    """The snapshot a record's `FENCE_DUE_PROPERTY` names; None where it names none."""
    try:
        return int((value or "").strip())
    except ValueError:
        return None


@dataclass(frozen=True)
class LateWatch:
    """What a repair of a run that may still commit once watches for: `tag`, the run's commit
    tag, on a commit descending from `after` (an Iceberg snapshot or a Delta version; None: the
    table had no snapshot then)."""

    after: int | None
    tag: str
    # False: given to a taken-over repairer's record at the takeover, before the taker's repair
    # read the table; the repair that ends (the taker's, or a later run's) arms it from the
    # version it left, and until then nothing is taken back for it
    armed: bool = True

    def to_property(self) -> str:
        after = "unarmed" if not self.armed else "none" if self.after is None else self.after
        return f"{after} {self.tag}"

    @classmethod
    def from_property(cls, value: str | None) -> LateWatch | None:
        after, _, tag = (value or "").strip().partition(" ")
        if not after or not tag.strip():
            return None
        if after == "unarmed":
            return cls(None, tag.strip(), armed=False)
        try:
            return cls(None if after == "none" else int(after), tag.strip())
        except ValueError:
            return None


@dataclass(frozen=True)
class Late:
    """What a watch found on the current lineage after its commit: the watched run's commits
    (`theirs`, oldest first), other writers' after the first of them (`under`; a taker's
    marker is no one's), and the commit to go back to (`back_to`, where `under` is empty and
    `theirs` is not)."""

    theirs: tuple[Commit, ...] = ()
    under: tuple[Commit, ...] = ()
    back_to: int | None = None
    # the watched run's commits found that changed nothing (a Delta RESTORE to the state the
    # table was in already: its late undo of what its taker had put back the same way); one
    # found ends the watch all the same (it was the statement past the fence)
    passed: tuple[Commit, ...] = ()


def lineage(snapshots: Iterable[Snapshot], head: int | None) -> tuple[Snapshot, ...]:
    """The snapshot `head` (the table's current one, as its `main` ref names it) and its
    ancestors, oldest first, by parent ids over every snapshot listed (a snapshot a
    transaction committed in between has no history entry, but it has its parent)."""
    by_id = {s.commit.version: s for s in snapshots}
    chain: list[Snapshot] = []
    at = by_id.get(head) if head is not None else None
    while at is not None and len(chain) <= len(by_id):  # never round a cycle
        chain.append(at)
        at = by_id.get(at.parent) if at.parent is not None else None
    return tuple(reversed(chain))


def late_commits(snapshots: Iterable[Snapshot], head: int | None, watch: LateWatch) -> Late:
    """The watched run's commits after the watch's on the lineage of `head` (the current
    snapshot or version), and what may be done with them (see the module's text); on Delta, a
    commit a later RESTORE undid is passed over (its run's commits a repair undid; a late one
    taken back already). A watch whose snapshot left that lineage (the table was rolled back
    past it) finds nothing: no snapshot there descends from it (a late commit there stays
    unseen). One whose snapshot expired while it was on the lineage (its child is the oldest
    snapshot listed there) watches all of the lineage."""
    chain = lineage(snapshots, head)
    ids = [s.commit.version for s in chain]
    if watch.after is None:
        after = chain
    elif watch.after in ids:
        after = chain[ids.index(watch.after) + 1 :]
    elif chain and chain[0].parent == watch.after:
        # the watch's snapshot expired (a repair's fence against a late rollback to it,
        # run/rollback_fence.py): the listed lineage starts at its child, all after it
        after = chain
    else:
        return Late()
    undone = undone_by_restores(s.commit for s in chain)  # a take-back already made, say
    after = tuple(s for s in after if s.commit.version not in undone)
    same = no_op_restores(s.commit for s in chain)
    passed = tuple(
        s.commit for s in after if s.commit.version in same and s.commit.tag == watch.tag
    )
    after = tuple(s for s in after if s.commit.version not in same)
    first = next((i for i, s in enumerate(after) if s.commit.tag == watch.tag), None)
    if first is None:
        return Late(passed=passed)
    theirs = tuple(s.commit for s in after[first:] if s.commit.tag == watch.tag)
    under = tuple(
        s.commit
        for s in after[first:]
        if s.commit.tag != watch.tag and not is_marker_commit(s.commit)
    )
    if under:
        return Late(theirs, under)
    return Late(theirs, (), after[first].parent)


def undone_by_restores(commits: Iterable[Commit]) -> frozenset[int]:
    """The versions of a Delta log that a later RESTORE undid: each RESTORE to version t at
    version r undoes t+1 .. r-1 (the table at r is the table at t). An Iceberg rollback takes
    its snapshots off the lineage instead (no `restored_to`): nothing here."""
    undone: set[int] = set()
    for c in commits:
        if c.restored_to is not None:
            undone.update(range(c.restored_to + 1, c.version))
    return frozenset(undone)


def no_op_restores(commits: Iterable[Commit]) -> frozenset[int]:
    """The versions of a Delta log that are a RESTORE to the state the table was in already
    (version r restores to t, and the table at t is the table at r - 1): they changed nothing.
    A version's state is the state of the version a RESTORE at it restored to, that of the
    version before it for a lease taker's marker (it changes nothing), else its own; two
    versions whose states differ may still hold the same rows (then the RESTORE counts as a
    change: the watch stays on the safe side)."""
    by_version = {c.version: c for c in commits}

    def state(version: int) -> int:
        seen: set[int] = set()
        while version not in seen:
            seen.add(version)
            at = by_version.get(version)
            if at is not None and at.restored_to is not None:
                version = at.restored_to
            elif at is not None and is_marker_commit(at) and version - 1 in by_version:
                version -= 1
            else:
                break
        return version

    return frozenset(
        c.version
        for c in by_version.values()
        if c.restored_to is not None
        and c.version - 1 in by_version
        and state(c.restored_to) == state(c.version - 1)
    )


def linear(commits: Iterable[Commit]) -> tuple[int | None, tuple[Snapshot, ...]]:
    """A log whose versions follow one another (Delta's) as a lineage: (the newest version,
    each commit with the one before it as its parent)."""
    ordered = sorted(commits, key=lambda c: c.version)
    snapshots = tuple(
        Snapshot(c, ordered[i - 1].version if i else None, True) for i, c in enumerate(ordered)
    )
    return (ordered[-1].version if ordered else None), snapshots


def watched_from(commits: Iterable[Commit], point: int | None, own_tag: str | None) -> int | None:
    """Where a Delta watch starts, from the commits after the repair's restore point `point`:
    the newest RESTORE that undid the dead run's commits before it (the repair's own, tagged
    `own_tag`, or an earlier repair's back to the point or before it, which left this one
    nothing to put back), else `point` itself (nothing was restored: every commit of the dead
    run after it is late)."""
    restores = [
        c.version
        for c in commits
        if c.operation.upper() == "RESTORE"
        and (
            (own_tag is not None and c.tag == own_tag)
            or (c.restored_to is not None and point is not None and c.restored_to <= point)
        )
    ]
    return max(restores) if restores else point
