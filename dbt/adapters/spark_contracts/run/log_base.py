"""The base of each format's log driver (run/table_log.py): a table that keeps no log (a file
source: Parquet), put back by its run's own steps' inverses alone, and the statement that forgets
a run's intent once its table is put back by hand."""

from typing import List, Optional, Sequence, Tuple

from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.evolution.capabilities import drop_sql
from dbt.adapters.spark_contracts.core.evolution.steps import Step, undo
from dbt.adapters.spark_contracts.core.recovery.intent import (
    INTENT_PROPERTY,
    Commit,
    Intent,
    Snapshot,
)
from dbt.adapters.spark_contracts.core.recovery.pending import LogEntry, lease_name


class TableLog:
    """A table that keeps no log (a file source: Parquet). The base of the drivers."""

    # a restore brings the table's properties back (an older version's intent on them too)
    restores_properties = False
    # every change is a commit in the log (Iceberg's schema changes are not snapshots)
    logs_every_change = False

    def __init__(self, spark: Spark) -> None:
        self.spark = spark

    def behind_history(self, relation: str, statement: str) -> str:
        """`statement` (an ALTER or a rebuild's replace of `relation`) as it is sent, read
        before the fence that precedes it: as it is, where the format fences it otherwise
        (Delta: an ALTER found and taken back, a replace under the transaction id; Parquet: no
        lease is taken over while its holder may send one)."""
        return statement

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

    def landed_last(self, intent: Intent) -> bool:
        """The run's last step, after its load, landed: its change stands, nothing is put back
        (core/recovery/intent.landed_last; Iceberg only)."""
        return False

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
