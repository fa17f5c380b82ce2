"""A taken-over run's late commit on Iceberg, decided from the table's snapshots
(core/recovery/late.py): found by its tag after the watch's snapshot on the current lineage,
ordered by parent ids; rolled back only where nothing of another writer lies over it."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.recovery.intent import Commit, Snapshot
from dbt.adapters.spark_contracts.core.recovery.late import (
    Late,
    LateWatch,
    late_commits,
    lineage,
    linear,
    no_op_restores,
)
from dbt.adapters.spark_contracts.core.recovery.record import LATE_PROPERTY, RunRecord

TAG = "dbt-spark-contracts:inv-a:model.p.m"
MARKER = "dbt-spark-contracts-fence:db.t__dbt_lease_inv-b"  # a lease taker's marker's tag


def chain(tags: list, start: int = 10, shuffle: int = 0) -> list[Snapshot]:
    """Snapshots start, start+1, ... each the parent of the next, all current; listed in a
    shuffled order (the metadata table's order is no promise)."""
    snaps = [
        Snapshot(Commit(start + i, "append", tag), start + i - 1 if i else None, True)
        for i, tag in enumerate(tags)
    ]
    random.Random(shuffle).shuffle(snaps)
    return snaps


def watched_chain(after_watch: list, shuffle: int) -> tuple[list[Snapshot], int]:
    """10, 11 (the watch's snapshot, after the repair), then one snapshot per entry of
    `after_watch` (True: the watched run's own), listed shuffled; and the head."""
    tags = ["b", "taker", *(TAG if own else "other" for own in after_watch)]
    return chain(tags, shuffle=shuffle), 11 + len(after_watch)


def test_a_late_snapshot_at_the_head_is_rolled_back_to_its_parent():
    snaps = chain(["b", "taker", TAG])  # 10, 11 (after the repair), 12 the late one
    found = late_commits(snaps, 12, LateWatch(11, TAG))
    assert found == Late((Commit(12, "append", TAG),), (), 11)


def test_nothing_of_the_run_after_the_watch_is_nothing_to_do():
    # its own snapshots before the watch point are the repaired change's, not late ones
    snaps = chain([TAG, "taker", "other"])
    assert late_commits(snaps, 12, LateWatch(11, TAG)) == Late()


def test_a_late_snapshot_under_another_writers_is_named_not_rolled_back():
    snaps = chain(["taker", TAG, "streaming-job"])
    found = late_commits(snaps, 12, LateWatch(10, TAG))
    assert found.theirs == (Commit(11, "append", TAG),)
    assert found.under == (Commit(12, "append", "streaming-job"),)
    assert found.back_to is None


def test_a_watch_point_off_the_current_lineage_finds_nothing():
    # the table was rolled back past the watch's snapshot: nothing current descends from it
    snaps = chain(["taker", TAG]) + [Snapshot(Commit(50, "append", "x"), 10, False)]
    assert late_commits(snaps, 11, LateWatch(50, TAG)) == Late()


def test_snapshots_rolled_back_before_are_not_on_the_lineage():
    # 12 (the run's) was rolled back already: a later snapshot 13 hangs off 11
    snaps = chain(["b", "taker"]) + [
        Snapshot(Commit(12, "append", TAG), 11, False),
        Snapshot(Commit(13, "append", "c"), 11, True),
    ]
    assert [s.commit.version for s in lineage(snaps, 13)] == [10, 11, 13]
    assert late_commits(snaps, 13, LateWatch(11, TAG)) == Late()


def test_a_snapshot_without_a_history_entry_is_on_the_lineage_by_its_parent():
    # a transaction's snapshot in between (12, another writer's) has no history entry (not
    # marked current), yet it lies under the late one: nothing may be rolled back
    snaps = chain(["b", "taker", "other", TAG, "other"])
    snaps = [replace(s, current=s.commit.version != 12) for s in snaps]
    assert [s.commit.version for s in lineage(snaps, 14)] == [10, 11, 12, 13, 14]
    found = late_commits(snaps, 14, LateWatch(11, TAG))
    assert [c.version for c in found.under] == [14] and found.back_to is None


def test_a_cycle_in_the_parents_ends():
    snaps = [
        Snapshot(Commit(1, "append", TAG), 2, True),
        Snapshot(Commit(2, "append", "x"), 1, True),
    ]
    assert len(lineage(snaps, 1)) <= 3


def test_a_table_without_a_snapshot_at_the_watch_and_the_late_one_first_cannot_go_back():
    found = late_commits(chain([TAG]), 10, LateWatch(None, TAG))
    assert found.theirs and found.back_to is None  # the caller raises: nothing to go back to


@given(
    st.lists(st.booleans(), max_size=8),  # each snapshot after the watch: the run's own?
    st.integers(min_value=0, max_value=10_000),
)
def test_decided_by_parents_whatever_the_listing_order(after_watch, shuffle):
    listed, head = watched_chain(after_watch, shuffle)
    found = late_commits(listed, head, LateWatch(11, TAG))
    ids = list(range(12, 12 + len(after_watch)))
    own = [i for i, mine in zip(ids, after_watch, strict=True) if mine]
    assert [c.version for c in found.theirs] == own
    if not own:
        assert found == Late()
        return
    others_after = [i for i, mine in zip(ids, after_watch, strict=True) if not mine and i > own[0]]
    assert [c.version for c in found.under] == others_after
    # rolled back only where nothing of another writer lies over the first late snapshot
    assert found.back_to == (None if others_after else own[0] - 1)


def test_a_watch_whose_snapshot_expired_watches_from_its_child():
    # the repair's fence against a late rollback expired 11, the watch's snapshot (and 10)
    snaps = [s for s in chain(["b", "taker", "fence", TAG]) if s.commit.version > 11]
    found = late_commits(snaps, 13, LateWatch(11, TAG))
    assert found == Late((Commit(13, "append", TAG),), (), 12)


def test_an_expired_snapshot_that_is_not_the_watchs_still_finds_nothing():
    # the lineage listed starts below a snapshot whose parent is not the watch's: off it
    snaps = [s for s in chain(["b", "taker", "x", TAG]) if s.commit.version > 12]
    assert late_commits(snaps, 13, LateWatch(11, TAG)) == Late()


@given(
    st.lists(st.booleans(), max_size=8),  # each snapshot after the watch: the run's own?
    st.integers(min_value=0, max_value=10_000),
)
def test_expiring_the_watchs_snapshot_and_those_before_it_changes_no_decision(after, shuffle):
    listed, head = watched_chain(after, shuffle)
    expired = [s for s in listed if s.commit.version > 11]
    watch = LateWatch(11, TAG)
    assert late_commits(expired, head, watch) == late_commits(listed, head, watch)


@given(st.one_of(st.none(), st.integers(min_value=0, max_value=2**62)))
def test_the_watch_round_trips_through_its_record(after):
    watch = LateWatch(after, TAG)
    record = RunRecord.from_properties(
        "s.m__dbt_lease_x", {LATE_PROPERTY.upper(): watch.to_property(), "other": "1"}
    )
    assert record.late == watch
    assert record.holds_work  # neither its holder's fence nor a takeover drops it


def test_an_unreadable_watch_is_none():
    for value in ("", "12", "x tag", " "):
        assert LateWatch.from_property(value) is None, value


class Listed:
    """An Iceberg table's metadata as IcebergLog reads it: the `main` ref and the snapshots
    table (in the order given: no promise), nothing from the history's commit times."""

    def __init__(self, head: int, rows: list[tuple]) -> None:
        self.head, self.rows, self.sent = head, rows, []

    def run(self, sql: str) -> None:
        self.sent.append(sql)

    def fetch(self, sql: str) -> list[dict]:
        self.sent.append(sql)
        assert ".history" not in sql, sql  # made_current_at: each committer's clock
        if "refs where name = 'main'" in sql:
            return [{"snapshot_id": self.head}]
        assert sql.endswith(".snapshots"), sql
        return [
            {"snapshot_id": i, "parent_id": p, "operation": "append", "tag": t}
            for i, p, t in self.rows
        ]


@given(st.integers(min_value=0, max_value=5), st.integers(min_value=0, max_value=10**6))
def test_the_iceberg_log_reads_its_lineage_by_parents_whatever_the_listing_order(cut, seed):
    """0 <- 1 <- ... <- 6 is the current lineage (5 a transaction's snapshot, with no history
    entry); 7 and 8 hang off 3, rolled back. The commits after snapshot `cut` are the lineage's
    after it, oldest first; the log's entries are the lineage then the rolled-back ones."""
    from dbt.adapters.spark_contracts.core.recovery.intent import Intent
    from dbt.adapters.spark_contracts.run.table_log import IcebergLog

    rows = [(i, i - 1 if i else None, f"t{i}") for i in range(7)] + [(7, 3, "x"), (8, 7, "y")]
    random.Random(seed).shuffle(rows)
    log = IcebergLog(Listed(6, rows))  # type: ignore[arg-type]
    intent = Intent("inv", "model.p.m", "ice.s.t", "iceberg", cut, TAG)
    assert [c.version for c in log.commits_after(intent)] == list(range(cut + 1, 7))
    entries = log.entries("ice.s.t") or []
    assert [e.version for e in entries[:7]] == list(range(7))
    assert entries[0].first and not any(e.first for e in entries[1:])
    assert {e.version: e.operation for e in entries[7:]} == {7: "rolled back", 8: "rolled back"}
    assert log.current_version("ice.s.t") == 6
    gone = replace(intent, restore_version=7)  # off the lineage: all of it is after
    assert [c.version for c in log.commits_after(gone)] == list(range(7))


# -- Delta: a late statement that takes no transaction id (an ALTER), found by its version


def test_a_delta_log_is_a_lineage_by_its_versions():
    from dbt.adapters.spark_contracts.core.recovery.late import linear

    commits = [Commit(v, "WRITE", None) for v in (3, 1, 2, 0)]
    head, snapshots = linear(commits)
    assert head == 3
    assert [(s.commit.version, s.parent) for s in snapshots] == [(0, None), (1, 0), (2, 1), (3, 2)]
    assert lineage(snapshots, head) == snapshots
    assert linear([]) == (None, ())


def test_a_late_alter_at_the_head_of_a_delta_log_goes_back_to_the_version_before_it():
    """The repair's RESTORE is version 5 (watched from), the run that took over loaded (6),
    then the dead run's late DROP COLUMNS landed (7): back to 6, the load kept."""
    from dbt.adapters.spark_contracts.core.recovery.late import linear

    commits = [
        Commit(2, "WRITE", None),  # the restore point
        Commit(3, "ADD COLUMNS", TAG),  # the dead run's, undone by the RESTORE
        Commit(4, "MERGE", "dbt-spark-contracts-fence:t__dbt_lease_inv-a"),  # the taker's marker
        Commit(5, "RESTORE", "dbt-spark-contracts:inv-b:model.p.m"),
        Commit(6, "WRITE", "dbt-spark-contracts:inv-b:model.p.m"),
        Commit(7, "DROP COLUMNS", TAG),
    ]
    head, snapshots = linear(commits)
    found = late_commits(snapshots, head, LateWatch(5, TAG))
    assert [c.version for c in found.theirs] == [7] and found.under == () and found.back_to == 6
    # watched from the restore point, the commit the RESTORE undid would be found, with the
    # RESTORE over it: so a Delta watch starts at the RESTORE (`watched_from`)
    assert [c.version for c in late_commits(snapshots, head, LateWatch(2, TAG)).under] == [5, 6]


def test_a_takers_marker_over_a_late_commit_is_no_other_writers():
    """A marker commits nothing of its own (core/recovery/txn_fence.py): a late commit under
    one is still at the head, and goes back with it (Delta's RESTORE keeps the marker's id)."""
    from dbt.adapters.spark_contracts.core.recovery.late import linear

    marker = "dbt-spark-contracts-fence:t__dbt_lease_inv-c"
    head, snapshots = linear(
        [Commit(5, "RESTORE", "x"), Commit(6, "DROP COLUMNS", TAG), Commit(7, "MERGE", marker)]
    )
    found = late_commits(snapshots, head, LateWatch(5, TAG))
    assert found.under == () and found.back_to == 5


def test_a_delta_watch_starts_at_the_repairs_own_restore():
    from dbt.adapters.spark_contracts.core.recovery.late import watched_from

    mine, theirs = "dbt-spark-contracts:inv-b:model.p.m", TAG
    after = [Commit(3, "ADD COLUMNS", theirs), Commit(4, "RESTORE", mine)]
    assert watched_from(after, 2, mine) == 4
    # another run's RESTORE is not this repair's; nothing restored: from the restore point
    assert watched_from([Commit(3, "RESTORE", "someone")], 2, mine) == 2
    assert watched_from([], 2, mine) == 2
    assert watched_from(after, 2, None) == 2
    # an earlier repair's RESTORE back to the point (killed before it dropped the record) left
    # this one nothing to restore: the watch starts after it, not at the point
    earlier = Commit(4, "RESTORE", "dbt-spark-contracts:inv-x:model.p.m", restored_to=2)
    assert watched_from([Commit(3, "ADD COLUMNS", theirs), earlier], 2, mine) == 4
    assert watched_from([Commit(4, "RESTORE", "x", restored_to=3)], 2, mine) == 2


def test_a_marker_tag_on_a_commit_that_changed_something_is_another_writers():
    """The same rule as a restore's (`foreign_commits`): only a MERGE under a marker's tag is
    a taker's empty marker."""
    from dbt.adapters.spark_contracts.core.recovery.late import linear

    marker = "dbt-spark-contracts-fence:t__dbt_lease_inv-c"
    head, snapshots = linear(
        [Commit(5, "RESTORE", "x"), Commit(6, "DROP COLUMNS", TAG), Commit(7, "WRITE", marker)]
    )
    assert [c.version for c in late_commits(snapshots, head, LateWatch(5, TAG)).under] == [7]


def test_an_iceberg_repairs_empty_commit_under_a_marker_tag_is_nobodys():
    """The fence's empty commit (run/rollback_fence.py: an Iceberg append with a marker's tag)
    between the watch and a late commit is no other writer's: the late one is taken back to
    it; an overwrite under that tag changed something, and is another writer's."""
    from dbt.adapters.spark_contracts.core.recovery.intent import foreign_commits, is_marker_commit

    marker = "dbt-spark-contracts-fence:t__dbt_lease_inv-c"
    assert is_marker_commit(Commit(12, "append", marker))
    assert not is_marker_commit(Commit(12, "overwrite", marker))
    assert not is_marker_commit(Commit(12, "append", "dbt-spark-contracts:inv-c:model.p.m"))
    snaps = chain(["b", "taker", marker, TAG])  # 12 the fence's commit, 13 the late one
    assert late_commits(snaps, 13, LateWatch(11, TAG)) == Late((Commit(13, "append", TAG),), (), 12)
    assert foreign_commits([Commit(12, "append", marker)], TAG) == ()


def test_a_delta_commit_a_restore_undid_is_no_late_one():
    """A take-back already made (its RESTORE to the version before the late commit is on top)
    finds nothing more, and the dead run's own commits a repair's RESTORE undid are never late:
    no false `LateCommits` from the RESTOREs over them."""
    from dbt.adapters.spark_contracts.core.recovery.late import linear, undone_by_restores

    mine = "dbt-spark-contracts:inv-b:model.p.m"
    commits = [
        Commit(2, "WRITE", None),
        Commit(3, "WRITE", "streaming-job"),  # another writer's, before the dead run's change
        Commit(4, "ADD COLUMNS", TAG),  # the dead run's, undone by 5
        Commit(5, "RESTORE", mine, restored_to=3),
        Commit(6, "WRITE", mine),  # the taker's load
        Commit(7, "DROP COLUMNS", TAG),  # the late one
    ]
    assert undone_by_restores(commits) == {4}
    head, snapshots = linear(commits)
    # watched from the dead run's recorded version (2), before the writer's commit at 3
    found = late_commits(snapshots, head, LateWatch(2, TAG))
    assert [c.version for c in found.theirs] == [7] and found.under == () and found.back_to == 6
    taken_back = Commit(8, "RESTORE", "dbt-spark-contracts:inv-c:model.p.m", restored_to=6)
    head, snapshots = linear([*commits, taken_back])
    assert late_commits(snapshots, head, LateWatch(2, TAG)) == Late()


def test_a_late_restore_of_the_dead_runs_own_undo_is_taken_back_to_the_version_before_it():
    """The dead run's undo RESTORE (to its restore point 3) landing after the taker's load (6)
    undoes that load: taken back to version 6, not to the RESTORE's own target."""
    from dbt.adapters.spark_contracts.core.recovery.late import linear

    mine = "dbt-spark-contracts:inv-b:model.p.m"
    head, snapshots = linear(
        [
            Commit(3, "WRITE", None),
            Commit(4, "RESTORE", mine),  # the repair (nothing of the dead run's to undo)
            Commit(5, "WRITE", mine),
            Commit(6, "WRITE", mine),
            Commit(7, "RESTORE", TAG, restored_to=3),
        ]
    )
    found = late_commits(snapshots, head, LateWatch(4, TAG))
    assert [c.version for c in found.theirs] == [7] and found.back_to == 6


@st.composite
def delta_logs(draw) -> list[Commit]:
    """A Delta log of 2 to 12 versions: writes, and RESTOREs to an earlier version."""
    commits = [Commit(0, "CREATE TABLE", None)]
    for version in range(1, draw(st.integers(1, 11)) + 1):
        kind = draw(st.sampled_from(["RESTORE", "WRITE", "marker"]))
        if kind == "RESTORE":
            target = draw(st.integers(0, version - 1))
            commits.append(Commit(version, "RESTORE", "r", target))
        elif kind == "marker":  # a lease taker's empty MERGE: it changes nothing
            commits.append(Commit(version, "MERGE", MARKER))
        else:
            commits.append(Commit(version, "WRITE", "w"))
    return commits


@given(delta_logs())
def test_a_restore_is_a_no_op_exactly_where_the_table_was_at_its_target_already(log):
    """Against a model of the table: a write makes a content of its own; a RESTORE to t makes
    the content at t; a marker keeps the content before it. A RESTORE at r is a no-op where
    the content at r - 1 is the one at t."""
    content: dict[int, int] = {}
    for c in log:
        if c.restored_to is not None:
            content[c.version] = content[c.restored_to]
        elif c.tag == MARKER:
            content[c.version] = content[c.version - 1]
        else:
            content[c.version] = c.version
    expected = {
        c.version
        for c in log
        if c.restored_to is not None and content[c.version - 1] == content[c.restored_to]
    }
    assert no_op_restores(random.Random(len(log)).sample(log, len(log))) == expected


def test_a_late_restore_to_where_the_table_was_already_is_passed_not_taken_back():
    """A repairer's late RESTORE (version 7, to 4) after its taker's RESTORE to 4 (version 6)
    and under the taker's load (version 8): it changed nothing, so it is no late commit to
    take back nor under another writer's; found, it ends the watch."""
    late_tag = "dbt-spark-contracts:inv-b:model.p.m"
    commits = [Commit(v, "WRITE", "w") for v in range(5)]
    commits += [
        Commit(5, "WRITE", "dead"),
        Commit(6, "RESTORE", "taker", 4),
        Commit(7, "RESTORE", late_tag, 4),
        Commit(8, "WRITE", "taker"),
    ]
    head, snapshots = linear(commits)
    found = late_commits(snapshots, head, LateWatch(6, late_tag))
    assert found == Late(passed=(Commit(7, "RESTORE", late_tag, 4),))
    # over the load instead (version 9, to 4): it undid the load; back to 8
    commits = [*commits[:7], Commit(7, "WRITE", "taker"), Commit(8, "RESTORE", late_tag, 4)]
    head, snapshots = linear(commits)
    found = late_commits(snapshots, head, LateWatch(6, late_tag))
    assert found.theirs == (Commit(8, "RESTORE", late_tag, 4),) and found.back_to == 7
