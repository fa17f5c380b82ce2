"""Putting a table back: the versions and commits a restore reads, the restore itself (never over
another writer's commit), and the repair of a table a dead run left with its intent."""

import time
from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.core import (
    Struct,
    quote_identifier,
)
from dbt.adapters.spark_contracts.core.capabilities import LOGGED
from dbt.adapters.spark_contracts.core.intent import (
    INTENT_PROPERTY,
    Commit,
    Intent,
    describe_commits,
    foreign_commits,
)
from dbt.adapters.spark_contracts.core.load_select import RUN_ID_COLUMN
from dbt.adapters.spark_contracts.core.pending import (
    LEASE_SUFFIX,
    RUN_PROPERTY,
    heartbeat_of,
    lease_is_fresh,
    lease_name,
    pending_name,
)
from dbt.adapters.spark_contracts.core.quarantine import QUARANTINE_SUFFIX
from dbt.adapters.spark_contracts.core.render import suffixed, undo_swap
from dbt.adapters.spark_contracts.core.types import drop_sql, sql_string
from dbt.adapters.spark_contracts.lease import lease_seconds
from dbt.adapters.spark_contracts.model_run import (
    DELTA_USER_METADATA,
    ICEBERG_TAG_KEY,
    stage_name,
)
from dbt.adapters.spark_contracts.run_errors import ForeignCommits, RestoreFailed, RunInProgress
from dbt.adapters.spark_contracts.spark_handle import Spark

logger = AdapterLogger("SparkContracts")


class Restorer:
    """The restore half of the `Runner`: reads commits and puts a table back."""

    spark: Spark

    # -- intents and history
    def current_version(self, relation: str, table_format: str) -> Optional[int]:
        if table_format == "delta":
            rows = self.spark.fetch(f"describe history {relation} limit 1")
            return int(rows[0]["version"]) if rows else None
        if table_format == "iceberg":
            self.spark.run(f"refresh table {relation}")  # not the session catalog's cached copy
            rows = self.spark.fetch(
                f"select snapshot_id from {relation}.history where is_current_ancestor "
                "order by made_current_at desc limit 1"
            )
            return int(rows[0]["snapshot_id"]) if rows else None
        return None

    def restore_point(self, intent: Intent) -> Intent:
        """The intent with its restore point: on Delta a run records none (no history read on
        its path); it is the version before the commit that wrote the intent, the run's first
        SET TBLPROPERTIES carrying its tag (a repair the run made before it is a RESTORE and
        stays). Without that commit in the history no version is safe: it fails."""
        if intent.table_format != "delta" or intent.restore_version is not None:
            return intent
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
        """The table's commits after the intent's restore point, with who made each."""
        relation, version = intent.relation, intent.restore_version
        if intent.table_format == "delta" and version is not None:
            return self._delta_commits_after(relation, version)
        if intent.table_format == "iceberg":
            # the session's Iceberg catalog caches the table: see other sessions' commits too
            self.spark.run(f"refresh table {relation}")
            rows = self.spark.fetch(
                f"select h.snapshot_id, s.operation, s.summary['{ICEBERG_TAG_KEY}'] as tag "
                f"from {relation}.history h join {relation}.snapshots s "
                "on h.snapshot_id = s.snapshot_id order by h.made_current_at"
            )
            ids = [int(r["snapshot_id"]) for r in rows]
            start = ids.index(version) + 1 if version in ids else 0
            return tuple(
                Commit(int(r["snapshot_id"]), str(r["operation"]), r.get("tag") or None)
                for r in rows[start:]
            )
        return ()

    def _delta_commits_after(self, relation: str, version: int) -> Tuple[Commit, ...]:
        rows = self.spark.fetch(f"describe history {relation}")
        return tuple(
            sorted(
                (
                    Commit(int(r["version"]), str(r["operation"]), r.get("userMetadata") or None)
                    for r in rows
                    if int(r["version"]) > version
                ),
                key=lambda c: int(c.version),
            )
        )

    def _restore_delta(self, intent: Intent, checked: Tuple[Commit, ...]) -> str:
        """RESTORE, then make sure no other writer committed between the check and the RESTORE
        (it would have been undone with the run's changes): if one did, RESTORE again to the
        version just before ours, which holds that commit, and fail naming it."""
        relation, version = intent.relation, int(intent.restore_version or 0)
        last_checked = max((int(c.version) for c in checked), default=version)
        tag = self.spark.get_conf(DELTA_USER_METADATA)  # what this session's RESTORE carries
        self.spark.run(f"restore table {relation} to version as of {version}")
        later = self._delta_commits_after(relation, last_checked)
        ours = max(
            (int(c.version) for c in later if c.operation == "RESTORE" and c.tag == tag),
            default=None,
        )
        if ours is None:
            raise RestoreFailed(
                intent.unique_id,
                "restoring",
                DbtRuntimeError("the run's own RESTORE commit is not in the table's history"),
                DbtRuntimeError(describe_commits(later) or "no commits after the check"),
                self.manual_repair(intent),
            )
        # the dead run's own statement, finished by a server after its client died, may land
        # here too: it is the run's change (the RESTORE undoes it), not another writer's
        raced = foreign_commits((c for c in later if int(c.version) < ours), intent.commit_tag)
        if not raced:
            return f"restored to Delta version {version}"
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

    def restore(self, intent: Intent, executed: Optional[Sequence[str]] = None) -> str:
        """Put the table back to the intent's restore point, unless another writer committed
        after it (then `ForeignCommits`, and nothing is undone). `executed`: the statements this
        process saw complete (a parquet rewrite stopped midway is taken back from them; on
        Iceberg only the columns its own ADD COLUMNS added are dropped: another run of the model
        may have added the same ones); None for a dead run's (not known)."""
        intent = self.restore_point(intent)
        relation = intent.relation
        after = self.commits_after(intent)
        foreign = foreign_commits(after, intent.commit_tag)
        if foreign:
            raise ForeignCommits(
                relation,
                intent.restore_version,
                foreign,
                "The run's own changes were left in place.",
            )
        done: List[str] = []
        if intent.quarantine:  # first: a kill after it leaves the intent, and this is repeatable
            self.unquarantine(intent.quarantine, intent.invocation_id)
            done.append(f"took the run's rows out of {intent.quarantine}")
        if intent.table_format == "delta" and intent.restore_version is not None:
            return "; ".join([*done, self._restore_delta(intent, after)])
        if intent.table_format == "iceberg":
            if intent.added_columns:
                schema = self.spark.relation_schema(relation, False)
                present = [
                    p
                    for p in intent.added_columns
                    if _has_path(schema, p) and (executed is None or _added_by(p, executed))
                ]
                if present:
                    paths = ", ".join(".".join(quote_identifier(s) for s in p) for p in present)
                    self.spark.run(f"alter table {relation} drop columns ({paths})")
                    done.append("dropped the columns the run added")
            if (
                intent.restore_version is not None
                and self.current_version(relation, "iceberg") != intent.restore_version
            ):
                catalog, ident = relation.split(".", 1)
                self.spark.run(
                    f"call {catalog}.system.rollback_to_snapshot('{ident}', {intent.restore_version})"
                )
                done.append(f"rolled back to Iceberg snapshot {intent.restore_version}")
        elif intent.table_format != "delta":
            undo = undo_swap(relation, executed or ())
            for statement in undo:
                self.spark.run(statement)
            if undo:
                done.append("took the unfinished rewrite back (the old table is in place)")
        self._clear_intent(relation)
        done.append("cleared the run's intent")
        return "; ".join(done)

    def check_lease(self, intent: Intent, unique_id: str) -> None:
        """`RunInProgress` if the intent's run holds a fresh lease (it may be alive)."""
        lease = lease_name(intent.relation, intent.invocation_id)
        schema, name = lease.rsplit(".", 1)
        if not self.spark.fetch(f"show tables in {schema} like '{name}'"):
            return  # no lease: the run ended, or predates leases
        heartbeat, now = heartbeat_of(self._properties(lease)), time.time()
        if lease_is_fresh(heartbeat, now, lease_seconds()):
            assert heartbeat is not None
            raise RunInProgress(unique_id, intent.relation, intent.invocation_id, now - heartbeat)

    def live_runs(
        self, relation: str, invocation_id: str, suffix: str = LEASE_SUFFIX
    ) -> Tuple[str, ...]:
        """Other runs of the model holding a fresh lease on `relation`. Fails closed: a listing
        that fails raises (the run then changes nothing), and a lease whose properties cannot
        be read counts as live unless it is no longer listed (its run let go of it)."""
        schema, name = relation.rsplit(".", 1)
        own = lease_name(relation, invocation_id, suffix).rsplit(".", 1)[1].lower()
        pattern = f"show tables in {schema} like '{name}{suffix}*'"

        def listed() -> List[str]:
            tables = (str(row.get("tableName") or "") for row in self.spark.fetch(pattern))
            return [t for t in tables if t and t.lower() != own]

        found: List[str] = []
        for table in listed():
            try:
                props = self._properties(f"{schema}.{table}")
            except Exception as exc:
                if table in listed():  # still there, unreadable: it may be a live run's
                    logger.debug(f"could not read the lease {table}: {exc}")
                    found.append(table)
                continue
            if lease_is_fresh(heartbeat_of(props), time.time(), lease_seconds()):
                found.append(props.get(RUN_PROPERTY, table))
        return tuple(found)

    def _properties(self, table: str) -> Dict[str, str]:
        rows = self.spark.fetch(f"show tblproperties {table}")
        return {str(r.get("key")): str(r.get("value")) for r in rows}

    def _drop_lease(self, intent: Intent, unique_id: str) -> None:
        lease = lease_name(intent.relation, intent.invocation_id)
        try:
            self.spark.run(drop_sql(lease, intent.table_format))
        except Exception as exc:
            logger.warning(f"{unique_id}: could not drop {lease}, the dead run's lease: {exc}")

    def unquarantine(self, quarantine: str, invocation_id: str) -> None:
        """Delete one run's rows from a quarantine (a Delta or Iceberg table)."""
        self.spark.run(
            f"delete from {quarantine} where `{RUN_ID_COLUMN}` = {sql_string(invocation_id)}"
        )

    def manual_repair(self, intent: Intent) -> str:
        if intent.table_format == "delta" and intent.restore_version is None:
            return (
                f"RESTORE TABLE {intent.relation} TO VERSION AS OF the version before the first "
                f"commit whose userMetadata is '{intent.commit_tag}' (DESCRIBE HISTORY "
                f"{intent.relation}), then ALTER TABLE {intent.relation} UNSET TBLPROPERTIES "
                f"('{INTENT_PROPERTY}') if it is still set"
            )
        if intent.table_format == "delta":
            return (
                f"dbt run-operation restore_table --args '{{relation: {intent.relation}, "
                f"version: {intent.restore_version}}}' (or RESTORE TABLE {intent.relation} TO "
                f"VERSION AS OF {intent.restore_version})"
            )
        if intent.table_format == "iceberg":
            catalog, ident = intent.relation.split(".", 1)
            return (
                f"CALL {catalog}.system.rollback_to_snapshot('{ident}', {intent.restore_version}), "
                f"then ALTER TABLE {intent.relation} UNSET TBLPROPERTIES ('{INTENT_PROPERTY}')"
            )
        return f"ALTER TABLE {intent.relation} UNSET TBLPROPERTIES ('{INTENT_PROPERTY}')"

    def _clear_intent(self, relation: str) -> None:
        self.spark.run(
            f"alter table {relation} unset tblproperties if exists ('{INTENT_PROPERTY}')"
        )

    def repair(self, intent: Intent, unique_id: str) -> str:
        """A dead run's intent found on the table: put it back before anything else, and drop
        the dead run's stage table (its name holds that run's invocation id: no live run's)."""
        logger.warning(
            f"{unique_id}: {intent.relation} carries the intent of run {intent.invocation_id} "
            f"({intent.unique_id}), which did not finish; repairing the table first"
        )
        self.check_lease(intent, unique_id)
        dead_stage = stage_name(intent.relation, intent.invocation_id)
        try:
            self.spark.run(drop_sql(dead_stage, intent.table_format))
        except Exception as exc:  # a leftover stage harms nothing; say so
            logger.warning(f"{unique_id}: could not drop {dead_stage}, the dead run's stage: {exc}")
        if intent.table_format not in LOGGED:
            self._clear_intent(intent.relation)
            self._drop_lease(intent, unique_id)
            return (
                f"repaired forward after run {intent.invocation_id}: {intent.table_format} keeps "
                "no history, its completed steps stay (a rewrite stopped between its renames "
                "was put back first); intent cleared"
            )
        try:
            done = self.restore(intent)
        except ForeignCommits:
            raise
        except Exception as exc:
            raise RestoreFailed(
                unique_id,
                f"repairing after run {intent.invocation_id}",
                DbtRuntimeError("a previous run died half way"),
                exc,
                self.manual_repair(intent),
            ) from exc
        # the dead run's discarded rows belong to the load just taken back
        pending = pending_name(suffixed(intent.relation, QUARANTINE_SUFFIX), intent.invocation_id)
        try:
            self.spark.run(drop_sql(pending, intent.table_format))
        except Exception as exc:
            raise RestoreFailed(
                unique_id,
                f"repairing after run {intent.invocation_id}",
                DbtRuntimeError(f"the table was restored; its pending rows in {pending} stay"),
                exc,
                drop_sql(pending, intent.table_format),
            ) from exc
        self._drop_lease(intent, unique_id)
        message = f"repaired after run {intent.invocation_id} died half way: {done}"
        logger.warning(f"{unique_id}: {message}")
        return message


def _added_by(path: Tuple[str, ...], executed: Sequence[str]) -> bool:
    """One of `executed` is an ADD COLUMNS that added `path` (quoted as the renderer quotes)."""
    quoted = ".".join(quote_identifier(s) for s in path)
    return any(" ADD COLUMNS " in e.upper() and quoted in e for e in executed)


def _has_path(schema: Struct, path: Tuple[str, ...]) -> bool:
    current: Any = schema
    for segment in path:
        if isinstance(current, Struct):
            found = current.field(segment)
            if found is None:
                return False
            current = found.type
        elif segment == "element" and hasattr(current, "element"):
            current = current.element
        elif segment == "value" and hasattr(current, "value"):
            current = current.value
        else:
            return False
    return True
