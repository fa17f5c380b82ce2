"""Each format's log, one driver per format: the version a run starts from, the commits after
it and who made them, putting a table back, the statement that does it by hand, and the log a
pending table is settled from (core/recovery/pending.py). Delta through `DESCRIBE HISTORY` and
`RESTORE`, Iceberg through its metadata tables and procedures; Parquet keeps no log. Every
per-format choice of the restore path lives here. Beside the log a run's own steps are taken
back by their typed inverses (core/evolution/steps.py): Delta's RESTORE needs none, Iceberg's
rollback keeps the schema (the added columns are dropped by theirs), Parquet has only them."""

import re
from dataclasses import replace
from typing import Any, Callable, List, Optional, Sequence, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.evolution.steps import Step
from dbt.adapters.spark_contracts.core.recovery.intent import (
    INTENT_PROPERTY,
    Commit,
    Intent,
    Snapshot,
    describe_commits,
    foreign_commits,
)
from dbt.adapters.spark_contracts.core.recovery.late import linear
from dbt.adapters.spark_contracts.core.recovery.pending import LogEntry
from dbt.adapters.spark_contracts.run.iceberg_log import IcebergLog
from dbt.adapters.spark_contracts.run.log_base import TableLog, forget
from dbt.adapters.spark_contracts.run.model_run import DELTA_USER_METADATA
from dbt.adapters.spark_contracts.run.run_errors import ForeignCommits, RestoreFailed

__all__ = ["DeltaLog", "IcebergLog", "TableLog", "forget", "table_log"]


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


_DRIVERS = {"delta": DeltaLog, "iceberg": IcebergLog}


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
