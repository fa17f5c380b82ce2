"""Iceberg's log driver (run/table_log.py has the others and picks one per format): the current
snapshot and every snapshot with its parent from the table's metadata tables, a rollback by its
procedure with the columns the run added dropped first, and the check for a snapshot that raced
a rollback."""

from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.evolution.steps import DropAdded, Step, undo
from dbt.adapters.spark_contracts.core.recovery import history_guard
from dbt.adapters.spark_contracts.core.recovery.intent import (
    Commit,
    Intent,
    Snapshot,
    is_marker_commit,
    landed_last,
    rolled_back_with_the_run,
)
from dbt.adapters.spark_contracts.core.recovery.late import lineage
from dbt.adapters.spark_contracts.core.recovery.pending import LogEntry
from dbt.adapters.spark_contracts.core.schema.types import has_path
from dbt.adapters.spark_contracts.run.log_base import TableLog, forget
from dbt.adapters.spark_contracts.run.model_run import ICEBERG_TAG_KEY
from dbt.adapters.spark_contracts.run.run_errors import ForeignCommits


class IcebergLog(TableLog):
    def __init__(self, spark: Spark) -> None:
        super().__init__(spark)
        self._seen: Dict[str, List[int]] = {}  # per table, the snapshots commits_after listed

    def _fresh(self, table: str, sql: str) -> List[Any]:
        """`sql` read after a REFRESH (the catalog caches the table: see others' snapshots)."""
        self.spark.run(f"refresh table {table}")
        return self.spark.fetch(sql)

    def current_version(self, relation: str) -> Optional[int]:
        """The table's current snapshot, as its `main` ref names it (read fresh): never the
        history's order, whose times are each committer's clock."""
        rows = self._fresh(relation, f"select snapshot_id from {relation}.refs where name = 'main'")
        return int(rows[0]["snapshot_id"]) if rows else None

    def behind_history(self, relation: str, statement: str) -> str:
        """A script that sends `statement` only while `relation`'s history is the one read here
        (core/recovery/history_guard.py): a late ALTER (no snapshot) or replace (a snapshot off
        the lineage) could not be found and taken back; this one fails once a lease's taker
        committed its marker, or any other commit landed."""
        (row,) = self._fresh(relation, history_guard.read_sql(relation))
        # on by default in Spark 4.1.1; a server may have turned it off for its sessions
        self.spark.set_conf(history_guard.SCRIPTING_CONF, "true")
        return history_guard.guarded(statement, relation, str(row["fingerprint"]))

    def listed(self, relation: str) -> Tuple[Optional[int], List[Snapshot]]:
        """(the current snapshot, every snapshot of `relation` with its parent and whether it is
        on the current lineage), read fresh: the head first, so the listing after it holds it.
        The lineage is by parent ids (`lineage`): a snapshot a transaction committed in between
        has no history entry, but it has its parent."""
        head = self.current_version(relation)
        rows = self.spark.fetch(
            f"select snapshot_id, parent_id, operation, summary['{ICEBERG_TAG_KEY}'] as tag "
            f"from {relation}.snapshots"
        )
        found = [
            Snapshot(
                Commit(int(r["snapshot_id"]), str(r["operation"]), r.get("tag") or None),
                None if r.get("parent_id") is None else int(r["parent_id"]),
                False,
            )
            for r in rows
        ]
        on = {s.commit.version for s in lineage(found, head)}
        return head, [replace(s, current=s.commit.version in on) for s in found]

    def commits_after(self, intent: Intent) -> Tuple[Commit, ...]:
        """The commits on the current lineage after the intent's snapshot (all of it where that
        snapshot left the lineage): what a rollback to it takes back. Every snapshot listed is
        kept as seen by this check (`_raced`: one off the lineage then did not race)."""
        head, found = self.listed(intent.relation)
        self._seen[intent.relation] = [s.commit.version for s in found]
        chain = lineage(found, head)
        ids = [s.commit.version for s in chain]
        version = intent.restore_version
        start = ids.index(version) + 1 if version in ids else 0
        return tuple(s.commit for s in chain[start:])

    def put_back(
        self, intent: Intent, after: Tuple[Commit, ...], executed: Optional[Sequence[Step]]
    ) -> List[str]:
        """A rollback keeps the schema: the columns the run's own ADD COLUMNS added are dropped
        first, by their steps' inverses (another run of the model may have added the same
        ones); a dead run's (`executed` None: not known) are those its intent names. Then the
        table is rolled back to its snapshot."""
        relation, done = intent.relation, []
        if executed is None:
            added = intent.added_columns
        else:
            added = tuple(p for i in undo(executed) if isinstance(i, DropAdded) for p in i.paths)
        if added:
            schema = self.spark.relation_schema(relation, False)
            present = tuple(p for p in added if has_path(schema, p))
            if present:
                # behind the history read before the fence (the run's `spark` checks its lease
                # before each statement it sends): a repairer's late DROP fails
                drop = self.behind_history(relation, DropAdded(relation, present).sql)
                self.spark.run(drop)
                done.append("dropped the columns the run added")
        if (
            intent.restore_version is not None
            and not (after and all(is_marker_commit(c) for c in after))
            and self.current_version(relation) != intent.restore_version
        ):  # (only a fence's empty commits after it: the table is in its state already,
            # and the snapshot may be expired, run/rollback_fence.py)
            catalog, ident = relation.split(".", 1)
            self.spark.run(
                f"call {catalog}.system.rollback_to_snapshot('{ident}', {intent.restore_version})"
            )
            done.append(f"rolled back to Iceberg snapshot {intent.restore_version}")
            self._raced(intent, after)
        return done

    def landed_last(self, intent: Intent) -> bool:
        """The columns the run removes after its load are all gone from the table, and its
        tagged commit (its load) is on the current lineage after its restore point: the table's
        own metadata says its last step landed (core/recovery/intent.landed_last)."""
        if not intent.removed_after_load:
            return False
        schema = self.spark.relation_schema(intent.relation, False)
        if not landed_last(intent, (has_path(schema, p) for p in intent.removed_after_load)):
            return False
        current, snapshots = self.listed(intent.relation)
        ours = [s for s in lineage(snapshots, current) if s.commit.tag == intent.commit_tag]
        return any(s.commit.version != intent.restore_version for s in ours)

    def take_back(
        self, relation: str, back_to: int, listed: Sequence[int], tag: str, unique_id: str
    ) -> None:
        """Rolled back to `back_to`; a snapshot committed between the listing and the rollback
        is named (`raced`)."""
        catalog, ident = relation.split(".", 1)
        self.spark.run(f"call {catalog}.system.rollback_to_snapshot('{ident}', {back_to})")
        self.raced(relation, back_to, listed, tag)

    def snapshots(self, relation: str) -> List[Snapshot]:
        """Every snapshot of `relation` with its parent, and whether it is an ancestor of the
        current one, read fresh."""
        return self.listed(relation)[1]

    def _raced(self, intent: Intent, checked: Tuple[Commit, ...]) -> None:
        point = int(intent.restore_version or 0)
        seen = self._seen.get(intent.relation, [])
        checked_ids = [point, *seen, *(c.version for c in checked)]
        self.raced(intent.relation, point, checked_ids, intent.commit_tag)

    def raced(self, relation: str, point: int, checked: Sequence[int], tag: str) -> None:
        """A rollback to `point` sets the current snapshot without comparing it with the one
        checked: a writer's snapshot committed between the check (`checked`: the snapshots it
        read from `point` on) and the rollback is taken back with those tagged `tag`. Found in
        the table's metadata after it (`rolled_back_with_the_run`) and named, with the repair by
        hand (its files stay until its snapshot expires: nothing lost)."""
        snapshots = self.snapshots(relation)
        raced = rolled_back_with_the_run(snapshots, point, checked, tag)
        if raced:
            catalog, ident = relation.split(".", 1)
            leaves = [c.version for c in raced if all(s.parent != c.version for s in snapshots)]
            raise ForeignCommits(
                relation,
                point,
                raced,
                "They committed while the run was rolling back and left the table's current "
                "lineage with the run's changes (their data files stay until the snapshots "
                f"expire). CALL {catalog}.system.set_current_snapshot('{ident}', "
                f"{(leaves or [raced[-1].version])[0]}) brings them back, with the run's "
                "changes under them: decide by hand.",
            )

    def manual_repair(self, intent: Intent) -> str:
        catalog, ident = intent.relation.split(".", 1)
        return (
            f"CALL {catalog}.system.rollback_to_snapshot('{ident}', {intent.restore_version}), "
            f"then {forget(intent)}"
        )

    def entries(self, table: str) -> Optional[List[LogEntry]]:
        """The current lineage, oldest first, then every other snapshot as "rolled back": a
        snapshot rolled back, no longer in the current lineage, is no load."""
        head, found = self.listed(table)
        chain = lineage(found, head)
        on = {s.commit.version for s in chain}
        return [
            LogEntry(s.commit.tag, s.commit.operation, s.commit.version, first=s.parent is None)
            for s in chain
        ] + [
            LogEntry(None, "rolled back", s.commit.version, first=s.parent is None)
            for s in found
            if s.commit.version not in on
        ]
