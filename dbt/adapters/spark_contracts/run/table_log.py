"""Each format's log, one driver per format: the version a run starts from, the commits after
it and who made them, putting a table back, the statement that does it by hand, and the log a
pending table is settled from (core/recovery/pending.py). Delta through `DESCRIBE HISTORY` and
`RESTORE`, Iceberg through its metadata tables and procedures; Parquet keeps no log. Every
per-format choice of the restore path lives here. Beside the log a run's own steps are taken
back by their typed inverses (core/evolution/steps.py): Delta's RESTORE needs none, Iceberg's
rollback keeps the schema (the added columns are dropped by theirs), Parquet has only them."""

import re
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from dbt_common.exceptions import DbtDatabaseError, DbtRuntimeError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.evolution.capabilities import drop_sql
from dbt.adapters.spark_contracts.core.evolution.steps import DropAdded, Step, undo
from dbt.adapters.spark_contracts.core.recovery.intent import (
    INTENT_PROPERTY,
    Commit,
    Intent,
    Snapshot,
    describe_commits,
    foreign_commits,
    rolled_back_with_the_run,
)
from dbt.adapters.spark_contracts.core.recovery.late import lineage, linear
from dbt.adapters.spark_contracts.core.recovery.pending import LogEntry, lease_name
from dbt.adapters.spark_contracts.core.schema.types import has_path
from dbt.adapters.spark_contracts.run.model_run import DELTA_USER_METADATA, ICEBERG_TAG_KEY
from dbt.adapters.spark_contracts.run.run_errors import ForeignCommits, RestoreFailed


class TableLog:
    """A table that keeps no log (a file source: Parquet). The base of the drivers."""

    # a restore brings the table's properties back (an older version's intent on them too)
    restores_properties = False
    # every change is a commit in the log (Iceberg's schema changes are not snapshots)
    logs_every_change = False

    def __init__(self, spark: Spark) -> None:
        self.spark = spark

    def current_version(self, relation: str) -> Optional[int]:
        return None

    def restore_point(self, intent: Intent) -> Intent:
        return intent

    def commits_after(self, intent: Intent) -> Tuple[Commit, ...]:
        return ()

    def put_back(
        self, intent: Intent, after: Tuple[Commit, ...], executed: Optional[Sequence[Step]]
    ) -> List[str]:
        """No history to go back to: the inverses of the steps this process saw complete (a
        rewrite stopped midway: the old table renamed back, the half-built one dropped)."""
        inverses = undo(executed or ())
        for inverse in inverses:
            self.spark.run(inverse.sql)
        return ["took the unfinished rewrite back (the old table is in place)"] if inverses else []

    def manual_repair(self, intent: Intent) -> str:
        return f"check {intent.relation} by hand, then {forget(intent)}"

    def listed(self, relation: str) -> Tuple[Optional[int], List[Snapshot]]:
        """(the current version, every commit with its parent): a late commit's watch reads
        it (core/recovery/late.py). Nothing where the format keeps no log."""
        return None, []

    def take_back(
        self, relation: str, back_to: int, listed: Sequence[int], tag: str, unique_id: str
    ) -> None:
        """A late commit of the run tagged `tag` put back: the table to `back_to`, never over a
        commit another writer made after the listing (`listed`) that found it."""
        raise NotImplementedError(f"{relation}: its format keeps no log to go back in")

    def entries(self, table: str) -> Optional[List[LogEntry]]:
        """The table's commits, oldest first; None: it keeps no log."""
        return None

    def data_files(self, relation: str) -> Optional[int]:
        """How many data files the table holds (a rewrite's cost in the plan file: only a file
        source rewrites its files to change a schema), from Spark's file metadata column; None
        where Spark cannot tell. Read only when a rewrite is planned, which reads them all."""
        try:
            rows = self.spark.fetch(
                f"select count(distinct _metadata.file_path) as files from {relation}"
            )
        except DbtDatabaseError:
            return None
        return int(rows[0]["files"]) if rows else None


class DeltaLog(TableLog):
    restores_properties = True
    logs_every_change = True

    def current_version(self, relation: str) -> Optional[int]:
        rows = self.spark.fetch(f"describe history {relation} limit 1")
        return int(rows[0]["version"]) if rows else None

    def restore_point(self, intent: Intent) -> Intent:
        """An intent that earlier builds (before the run record) wrote into the table's properties records none:
        it is the version before the commit that wrote it, the run's first SET TBLPROPERTIES
        carrying its tag (a repair the run made before it is a RESTORE and stays). Without that
        commit in the history no version is safe: it fails. A run record's intent always
        records its version (the table's before the run's first change)."""
        if intent.restore_version is not None:
            # the version before the run's first own change: a writer's commit between the
            # version the run read and its first change is kept, not counted against it
            own = [
                c.version
                for c in self._commits_after(intent.relation, intent.restore_version)
                if c.tag == intent.commit_tag and c.operation != "RESTORE"
            ]
            return replace(intent, restore_version=min(own) - 1) if own else intent
        rows = self.spark.fetch(f"describe history {intent.relation}")
        written = [
            int(r["version"])
            for r in rows
            if r.get("userMetadata") == intent.commit_tag
            and str(r.get("operation")) == "SET TBLPROPERTIES"
        ]
        if not written:  # past the log's retention, or written by hand: no safe version
            raise DbtRuntimeError(
                f"{intent.relation}: the commit that wrote run {intent.invocation_id}'s intent "
                f"(tag {intent.commit_tag}) is not in the table's history"
            )
        return replace(intent, restore_version=min(written) - 1)

    def commits_after(self, intent: Intent) -> Tuple[Commit, ...]:
        if intent.restore_version is None:
            return ()
        return self._commits_after(intent.relation, intent.restore_version)

    def _commits_after(self, relation: str, version: int) -> Tuple[Commit, ...]:
        rows = self.spark.fetch(f"describe history {relation}")
        return tuple(
            sorted(
                (
                    Commit(
                        int(r["version"]),
                        str(r["operation"]),
                        r.get("userMetadata") or None,
                        _restored_to(r) if str(r["operation"]).upper() == "RESTORE" else None,
                    )
                    for r in rows
                    if int(r["version"]) > version
                ),
                key=lambda c: int(c.version),
            )
        )

    def put_back(
        self, intent: Intent, after: Tuple[Commit, ...], executed: Optional[Sequence[Step]]
    ) -> List[str]:
        """RESTORE takes the schema back too: no step's inverse is needed."""
        return [self._restore(intent, after)]

    def _restore(self, intent: Intent, checked: Tuple[Commit, ...]) -> str:
        """RESTORE to the intent's version, never over another writer's commit
        (`_restore_over`)."""
        version = int(intent.restore_version or 0)
        last_checked = max((int(c.version) for c in checked), default=version)
        self._restore_over(
            intent.relation,
            version,
            last_checked,
            intent.commit_tag,
            intent.unique_id,
            lambda: self.manual_repair(intent),
        )
        return f"restored to Delta version {version}"

    def _restore_over(
        self,
        relation: str,
        version: int,
        last_checked: int,
        run_tag: str,
        unique_id: str,
        manual: Callable[[], str],
    ) -> None:
        """RESTORE to `version`, then make sure no other writer committed between the check
        (which read up to `last_checked`) and the RESTORE: it would have been undone with the
        commits of the run tagged `run_tag`. If one did, RESTORE again to the version just
        before ours, which holds that commit, and fail naming it."""
        tag = self.spark.get_conf(DELTA_USER_METADATA)  # what this session's RESTORE carries
        self.spark.run(f"restore table {relation} to version as of {version}")
        later = self._commits_after(relation, last_checked)
        ours = max(
            (int(c.version) for c in later if c.operation == "RESTORE" and c.tag == tag),
            default=None,
        )
        if ours is None:
            raise RestoreFailed(
                unique_id,
                "restoring",
                DbtRuntimeError("the run's own RESTORE commit is not in the table's history"),
                DbtRuntimeError(describe_commits(later) or "no commits after the check"),
                manual(),
            )
        # the dead run's own statement, finished by a server after its client died, may land
        # here too: it is the run's change (the RESTORE undoes it), not another writer's
        raced = foreign_commits((c for c in later if int(c.version) < ours), run_tag)
        if not raced:
            return
        after_ours = tuple(c for c in later if int(c.version) > ours)
        if after_ours:  # taking the RESTORE back now would undo these: leave it to a person
            raise ForeignCommits(
                relation,
                version,
                raced + after_ours,
                f"The first ones committed while the run was restoring and were undone by its "
                f"RESTORE (version {ours}); commits after it exist, so it was not taken back. "
                f"RESTORE TABLE {relation} TO VERSION AS OF {ours - 1} brings the raced commits "
                "back but undoes the later ones: decide by hand.",
            )
        self.spark.run(f"restore table {relation} to version as of {ours - 1}")
        raise ForeignCommits(
            relation,
            version,
            raced,
            f"They committed while the run was restoring; the restore was taken back "
            f"(RESTORE to version {ours - 1}), so the run's own changes stay in place.",
        )

    def listed(self, relation: str) -> Tuple[Optional[int], List[Snapshot]]:
        """Every version, each with the one before it as its parent (core/recovery/late.linear)."""
        head, snapshots = linear(self._commits_after(relation, -1))
        return head, list(snapshots)

    def take_back(
        self, relation: str, back_to: int, listed: Sequence[int], tag: str, unique_id: str
    ) -> None:
        """RESTORE to `back_to`, which brings back what a late ALTER took out of the current
        version (a dropped column's values)."""
        self._restore_over(
            relation,
            back_to,
            max(listed, default=back_to),
            tag,
            unique_id,
            lambda: f"RESTORE TABLE {relation} TO VERSION AS OF {back_to}",
        )

    def manual_repair(self, intent: Intent) -> str:
        if intent.restore_version is None:
            return (
                f"RESTORE TABLE {intent.relation} TO VERSION AS OF the version before the first "
                f"commit whose userMetadata is '{intent.commit_tag}' (DESCRIBE HISTORY "
                f"{intent.relation}), then ALTER TABLE {intent.relation} UNSET TBLPROPERTIES "
                f"('{INTENT_PROPERTY}') if it is still set"
            )
        return (
            f"dbt run-operation restore_table --args '{{relation: {intent.relation}, "
            f"version: {intent.restore_version}}}' (or RESTORE TABLE {intent.relation} TO "
            f"VERSION AS OF {intent.restore_version}), then {forget(intent)}"
        )

    def entries(self, table: str) -> Optional[List[LogEntry]]:
        rows = self.spark.fetch(f"describe history {table}")
        rows.sort(key=lambda r: int(r["version"]))
        return [
            LogEntry(
                r.get("userMetadata") or None,
                str(r["operation"]),
                int(r["version"]),
                _restored_to(r) if str(r["operation"]).upper() == "RESTORE" else None,
                int(r["version"]) == 0,
            )
            for r in rows
        ]


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
                self.spark.run(DropAdded(relation, present).sql)
                done.append("dropped the columns the run added")
        if (
            intent.restore_version is not None
            and self.current_version(relation) != intent.restore_version
        ):
            catalog, ident = relation.split(".", 1)
            self.spark.run(
                f"call {catalog}.system.rollback_to_snapshot('{ident}', {intent.restore_version})"
            )
            done.append(f"rolled back to Iceberg snapshot {intent.restore_version}")
            self._raced(intent, after)
        return done

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


_DRIVERS = {"delta": DeltaLog, "iceberg": IcebergLog}


def forget(intent: Intent) -> str:
    """The statement that drops what records the intent once the table is put back by hand:
    its run's record, or (an older version's intent) the table's property."""
    record = lease_name(intent.relation, intent.invocation_id)
    return (
        f"{drop_sql(record, intent.table_format)} (its run's record; Iceberg: REFRESH "
        "TABLE it first, or PURGE leaves its last commit's file; or, where an older version wrote "
        f"the intent on the table, ALTER TABLE {intent.relation} UNSET TBLPROPERTIES "
        f"('{INTENT_PROPERTY}'))"
    )


def table_log(spark: Spark, table_format: str) -> TableLog:
    """The log driver of a table in `table_format`."""
    return _DRIVERS.get(table_format, TableLog)(spark)


def _restored_to(row: Any) -> Optional[int]:
    """A Delta RESTORE's target version, from DESCRIBE HISTORY's operationParameters (a map on
    the session and over Connect, its text over Thrift)."""
    found = re.search(
        r"['\"]?version['\"]?\s*[:=]\s*['\"]?(\d+)", str(row.get("operationParameters"))
    )
    return int(found.group(1)) if found else None
