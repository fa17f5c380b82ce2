"""One incremental model run, end to end: plan once (typed, immutable), then stage, change, load and
finish, all-or-nothing. Decisions come from `core/`; this module runs them against a connection.

The shape of a run (Jinja calls one step at a time and hands the `ModelRun` back):

1. `plan`: analyse the staged view and the deployed table, repair what a dead run left (its
   durable intent), decide the contract, the evolution plan and the write path.
2. `prepare`: stage the model's output once when the run needs it (a multi-step change, a
   freeze check, discard counts, quarantine); check freeze; count discards; quarantine; record
   the intent and run the multi-step statements.
3. `load`: the one write (evolving the schema itself on the in-write path); on failure the
   table is put back, never over another writer's commit; the intent is cleared.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.core import (
    AddColumns,
    DropColumns,
    Plan,
    Rewrite,
    Struct,
    from_spark_json,
    quote_identifier,
)
from dbt.adapters.spark_contracts.core.diff import SchemaDiff
from dbt.adapters.spark_contracts.core.enforce import COERCE_REASON, ContractDecision, LoadSql
from dbt.adapters.spark_contracts.core.intent import (
    INTENT_PROPERTY,
    Commit,
    Intent,
    describe_commits,
    foreign_commits,
)
from dbt.adapters.spark_contracts.core.microbatch import MICROBATCH, Microbatch, select_list
from dbt.adapters.spark_contracts.core.outcome import (
    history_ddl,
    history_insert,
    history_relation,
    outcome_line,
    plan_markdown,
    run_summary,
)
from dbt.adapters.spark_contracts.core.render import suffixed, undo_swap
from dbt.adapters.spark_contracts.core.types import Field, as_nullable
from dbt.adapters.spark_contracts.core.write_path import WriteDecision, merged_by_name

logger = AdapterLogger("SparkContracts")

DELTA_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
# Iceberg adds `spark.sql.iceberg.snapshot-property.<key>` to the summary of every snapshot
ICEBERG_TAG_KEY = "dbt-spark-contracts"
ICEBERG_SNAPSHOT_TAG = f"spark.sql.iceberg.snapshot-property.{ICEBERG_TAG_KEY}"
DELTA_AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
STAGE_SUFFIX = "__dbt_stage_"


@dataclass
class ContractsAdapterResponse(AdapterResponse):
    """dbt's adapter response plus what this adapter did to the table and its rows."""

    schema_changes: List[Dict[str, Any]] = field(default_factory=list)
    rows_discarded: Optional[int] = None
    values_discarded: Optional[int] = None
    contract: Optional[Dict[str, str]] = None
    dry_run: Optional[bool] = None
    write_path: Optional[str] = None
    repairs: List[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- typed errors


ABSENT = "(absent)"  # a type on the side that lacks the column (or the relation)


class SchemaContractViolation(DbtRuntimeError):
    """A broken `freeze`, with dlt's DataValidationError context as attributes."""

    def __init__(self, unique_id: str, relation: str, violation: Dict[str, Any], values=()):
        self.unique_id, self.relation = unique_id, relation
        self.violation = dict(violation)
        self.schema_entity = violation.get("schema_entity")
        self.contract_mode = violation.get("contract_mode")
        self.column_name = violation.get("column")
        self.deployed_type = violation.get("deployed_type")
        self.compiled_type = violation.get("compiled_type")
        self.offending_values = list(values)
        lines = [
            f"Schema contract violated in {unique_id} ({relation}); nothing was loaded:",
            f"  schema_entity: {self.schema_entity}",
            f"  contract_mode: {self.contract_mode}",
        ]
        lines.append(f"  column: {self.column_name or '(none: the relation itself)'}")
        lines.append(
            f"  deployed type: {self.deployed_type or ABSENT}, "
            f"compiled type: {self.compiled_type or ABSENT}"
        )
        if self.offending_values:
            shown = ", ".join(repr(v) for v in self.offending_values[:5])
            lines.append(f"  offending values (up to 5): {shown}")
        if violation.get("reason"):
            lines.append(f"  reason: {violation['reason']}")
        super().__init__("\n".join(lines))


class RunUndone(DbtRuntimeError):
    """A step failed after the run changed the table; the table was put back."""

    def __init__(self, unique_id: str, step: str, restored: str, cause: BaseException):
        self.cause = cause
        super().__init__(
            f"{unique_id}: {step} failed, so the run was undone ({restored}). Cause: {cause}"
        )


class ForeignCommits(DbtRuntimeError):
    """A restore would undo commits another writer made after the restore point: not done."""

    def __init__(self, relation: str, restore_version: Any, commits: Tuple[Commit, ...], why: str):
        self.relation, self.restore_version, self.commits = relation, restore_version, commits
        super().__init__(
            f"{relation}: not restored to {restore_version}, because another writer committed "
            f"after it: {describe_commits(commits)}. {why} Repair by hand: inspect the history "
            f"(`DESCRIBE HISTORY {relation}` / `{relation}.snapshots`), then restore or replay."
        )


class RestoreFailed(DbtRuntimeError):
    """A step failed and putting the table back failed too: both named, and the manual fix."""

    def __init__(
        self, unique_id: str, step: str, cause: BaseException, restore: BaseException, manual: str
    ):
        self.cause, self.restore_error, self.manual = cause, restore, manual
        super().__init__(
            f"{unique_id}: {step} failed ({cause}), and restoring the table failed too "
            f"({restore}). Repair by hand: {manual}"
        )


# ------------------------------------------------------------------------- the connection


Observed = Callable[[], Optional[Dict[str, Any]]]  # the observed metrics; None if never seen


class Spark(Protocol):
    """What a run needs from the dbt connection of its thread."""

    def fetch(self, sql: str) -> List[Dict[str, Any]]: ...

    def run(self, sql: str) -> Any: ...

    def schema(self, sql: str) -> Struct: ...

    def relation_schema(self, relation: str, describable: bool) -> Struct:
        """A table's or view's schema; `describable`: a temporary view or v1 table (over
        thrift one `DESCRIBE ... AS JSON`; a Delta or Iceberg table needs a view first)."""
        ...

    def set_conf(self, key: str, value: Optional[str]) -> None: ...

    def get_conf(self, key: str) -> Optional[str]: ...

    def can_observe(self) -> bool:
        """Metrics observed while a statement runs reach this process (classic session)."""
        ...

    def observe(self, view: str, source: str, metrics: Tuple[Tuple[str, str], ...]) -> Observed:
        """Define temporary view `view` as `source`, observing `metrics` (name, aggregate) in
        whichever statement reads it first."""
        ...


def compiled_schema(schema: Struct, not_null_columns: Tuple[str, ...]) -> Struct:
    """The model's output schema as a table built from it would store it: nullable, except
    the columns the model declares `not_null` (Spark marks literals NOT NULL; CTAS does not)."""
    analysed = as_nullable(schema)
    assert isinstance(analysed, Struct)
    declared = {name.lower() for name in not_null_columns}
    return Struct(
        tuple(
            Field(f.name, f.type, nullable=f.name.lower() not in declared, comment=f.comment)
            for f in analysed.fields
        )
    )


# ----------------------------------------------------------------------------- the plan


@dataclass
class RunOutcome:
    """What happened, filled in as the steps run (the plan itself never changes)."""

    executed: List[str] = field(default_factory=list)
    restore_version: Optional[int] = None
    intent: Optional[Intent] = None  # written to the table; None: no multi-step change began
    staged: bool = False
    observation: Optional[Observed] = field(default=None, repr=False)
    restored: Optional[str] = None
    rows_discarded: Optional[int] = None
    values_discarded: Optional[int] = None
    quarantined: Optional[int] = None
    loaded: bool = False  # the load committed: the plan's changes are in the table
    violation: Optional[Dict[str, Any]] = None
    repairs: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class ModelRun:
    """Everything one incremental run decided, once; Jinja reads it and hands it back."""

    unique_id: str
    invocation_id: str
    relation: str
    table_format: str
    strategy: str
    deployed: Struct
    compiled: Struct
    diff: SchemaDiff
    plan: Plan
    statements: Tuple[str, ...]
    dry_run: bool
    mode: str
    write: WriteDecision
    view: str  # the model's query as a temporary view
    stage: Optional[str]  # the table the output is staged in, when the run stages
    observed: Optional[str]  # the view over `view` whose first reader counts the discards
    commit_tag: str
    contract: Optional[ContractDecision] = None
    load_sql: Optional[LoadSql] = None
    outcome: RunOutcome = field(default_factory=RunOutcome, compare=False)
    microbatch: Optional[Microbatch] = None  # the batch window a microbatch run replaces
    drop_first: bool = False  # a rebuild of this table drops it first (no atomic replace)

    # -- what Jinja reads
    @property
    def blocked(self) -> bool:
        return self.plan.is_blocked

    @property
    def has_changes(self) -> bool:
        return bool(self.plan.operations)

    @property
    def full_refresh(self) -> bool:
        return self.plan.full_refresh is not None

    @property
    def evolves_in_write(self) -> bool:
        return self.write.evolves_in_write

    @property
    def source(self) -> str:
        """The relation the load reads: contract view, stage or the model's view."""
        if self.load_sql is not None:
            return suffixed(self.view, "__contract")
        return self.stage or self.view

    @property
    def quarantine_table(self) -> str:
        return suffixed(self.relation, "__quarantine")

    def columns_after(self) -> List[str]:
        """The table's top-level columns once the plan's steps have run (before the load)."""
        if self.evolves_in_write:
            return list(self._written().names)
        names = list(self.deployed.names)
        for op in self.plan.operations:
            if isinstance(op, Rewrite):
                names = list(op.target_schema.names)
            elif isinstance(op, AddColumns):
                names += [c.path[0] for c in op.columns if len(c.path) == 1]
            elif isinstance(op, DropColumns):
                gone = {p[0].lower() for p in op.paths if len(p) == 1}
                names = [n for n in names if n.lower() not in gone]
        return names

    def microbatch_sql(self, target: str) -> str:
        """A microbatch run's load: the batch replaces its window (core/microbatch.py)."""
        assert self.microbatch is not None
        if self.evolves_in_write:  # the evolving write appends new columns, in table order
            order = list(merged_by_name(self.deployed, self._written()).names)
        else:
            order = self.columns_after()
        columns = select_list(order, self._written())
        return self.microbatch.load_sql(target, self.source, columns)

    def insert_columns(self) -> List[str]:
        """Columns the append writes (quoted): everything the source has that the table keeps."""
        after = {n.lower() for n in self.columns_after()}
        return [quote_identifier(f.name) for f in self._written().fields if f.name.lower() in after]

    def merge_columns(
        self,
        update_columns: Optional[List[str]] = None,
        exclude_columns: Optional[List[str]] = None,
    ) -> Dict[str, List[str]]:
        """Quoted column lists for MERGE: insert = source ∩ target (target order); update = that,
        narrowed by `merge_update_columns` or minus `merge_exclude_columns` (case-insensitive)."""
        written = self._written()
        shared = [n for n in self.columns_after() if written.field(n) is not None]
        return merge_column_lists(shared, update_columns, exclude_columns)

    def _written(self) -> Struct:
        if self.contract is not None and self.contract.target is not None:
            return self.contract.target
        return self.compiled

    @property
    def error_message(self) -> str:
        return blocked_message(self.unique_id, self.relation, self.table_format, self.plan)

    def summary(self) -> str:
        head = f"{self.unique_id} ({self.relation}): {self.mode}; {self.write.path.value}"
        if self.write.reason:
            head += f" ({self.write.reason})"
        body = self.plan.summary()
        ddl = "\n".join(f"    {sql.strip()};" for sql in self.statements)
        return f"{head}\n{body}" + (f"\n  DDL:\n{ddl}" if ddl else "")

    def report(self) -> Dict[str, Any]:
        out = self.outcome
        return {
            "relation": self.relation,
            "table_format": self.table_format,
            "mode": self.mode,
            "dry_run": self.dry_run,
            "write_path": self.write.path.name.lower(),
            "staged": self.stage is not None,
            "diff": [
                {"change": type(c).__name__, "path": c.dotted, "description": c.describe()}
                for c in self.diff.changes
            ],
            "plan": self.plan.to_dict(),
            "statements": list(self.statements),
            "executed": list(out.executed),
            "restored": out.restored,
            "repairs": list(out.repairs),
            "contract": self.contract.to_dict() if self.contract is not None else None,
            "rows_discarded": out.rows_discarded,
            "values_discarded": out.values_discarded,
            "quarantined": out.quarantined,
            "loaded": out.loaded,
            "applied": self.applied_changes() if out.loaded else [],
            "violation": out.violation,
        }

    def outcome_line(self) -> Optional[str]:
        """What this run did, for the console; None when dbt's own line says it all."""
        out = self.outcome
        name = self.unique_id.split(".")[-1]
        operations = self.plan.operations if out.loaded else ()
        return outcome_line(
            name,
            operations,
            out.rows_discarded,
            out.values_discarded,
            out.quarantined,
            self.quarantine_table,
            out.repairs,
        )

    def applied_changes(self) -> List[Dict[str, Any]]:
        if self.dry_run:
            return []
        return [
            {"op": type(op).__name__, "description": op.describe()} for op in self.plan.operations
        ]

    def response(self, message: str, **extra: Any) -> ContractsAdapterResponse:
        out = self.outcome
        return ContractsAdapterResponse(
            _message=message,
            schema_changes=self.applied_changes(),
            rows_discarded=out.rows_discarded,
            values_discarded=out.values_discarded,
            contract=self.contract.contract.to_dict() if self.contract else None,
            write_path=self.write.path.name.lower(),
            repairs=list(out.repairs),
            **extra,
        )


def blocked_message(unique_id: str, relation: str, table_format: str, plan: Plan) -> str:
    """The error of a plan with blocked changes (incremental runs, table rebuilds, snapshots)."""
    lines = [
        f"Schema change blocked for {unique_id} ({relation}, {table_format}); nothing was changed:"
    ]
    lines += [f"  - {blocked.describe()}" for blocked in plan.blocked]
    return "\n".join(lines)


def counts_not_observed_note(unique_id: str, method: str) -> str:
    """Said once per model run whose discard counts the connection cannot observe in the load."""
    return (
        f"{unique_id}: method {method} does not receive metrics observed in a statement: the "
        "discard counts come from the model's output staged once and counted by a query of "
        "their own (one more write and read of the output than method session)"
    )


def merge_column_lists(
    shared: List[str],
    update_columns: Optional[List[str]] = None,
    exclude_columns: Optional[List[str]] = None,
) -> Dict[str, List[str]]:
    """MERGE's insert list (`shared`) and update list (narrowed by `merge_update_columns` or
    minus `merge_exclude_columns`, case-insensitive), quoted."""
    chosen = shared
    if update_columns:
        wanted = {name.lower() for name in update_columns}
        chosen = [name for name in shared if name.lower() in wanted]
    elif exclude_columns:
        excluded = {name.lower() for name in exclude_columns}
        chosen = [name for name in shared if name.lower() not in excluded]
    return {
        "insert": [quote_identifier(n) for n in shared],
        "update": [quote_identifier(n) for n in chosen],
    }


def stage_name(relation: str, invocation_id: str) -> str:
    return suffixed(relation, STAGE_SUFFIX + invocation_id.replace("-", "")[:12])


# --------------------------------------------------------------------------- the runner


class Runner:
    """Carries a `ModelRun` out on one connection; every failure after a change restores."""

    def __init__(self, spark: Spark, report: RunReport, target_dir: Path) -> None:
        self.spark, self.report, self.target_dir = spark, report, target_dir

    # -- the commit tag: set for one model's run, in its thread's own session
    def tag_commits(self, tag: str) -> None:
        self.spark.set_conf(DELTA_USER_METADATA, tag)
        self.spark.set_conf(ICEBERG_SNAPSHOT_TAG, tag)

    def untag(self) -> None:
        self.spark.set_conf(DELTA_USER_METADATA, None)
        self.spark.set_conf(ICEBERG_SNAPSHOT_TAG, None)

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

    def restore(self, intent: Intent, executed: Sequence[str] = ()) -> str:
        """Put the table back to the intent's restore point, unless another writer committed
        after it (then `ForeignCommits`, and nothing is undone). `executed`: the statements this
        process saw complete (a parquet rewrite stopped midway is taken back from them)."""
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
        if intent.table_format == "delta" and intent.restore_version is not None:
            return self._restore_delta(intent, after)
        if intent.table_format == "iceberg":
            if intent.added_columns:
                schema = self.spark.relation_schema(relation, False)
                present = [p for p in intent.added_columns if _has_path(schema, p)]
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
            undo = undo_swap(relation, executed)
            for statement in undo:
                self.spark.run(statement)
            if undo:
                done.append("took the unfinished rewrite back (the old table is in place)")
        self._clear_intent(relation)
        done.append("cleared the run's intent")
        return "; ".join(done)

    def manual_repair(self, intent: Intent) -> str:
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
        dead_stage = stage_name(intent.relation, intent.invocation_id)
        try:
            self.spark.run(f"drop table if exists {dead_stage}")
        except Exception as exc:  # a leftover stage harms nothing; say so
            logger.warning(f"{unique_id}: could not drop {dead_stage}, the dead run's stage: {exc}")
        if intent.table_format not in ("delta", "iceberg"):
            self._clear_intent(intent.relation)
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
        message = f"repaired after run {intent.invocation_id} died half way: {done}"
        logger.warning(f"{unique_id}: {message}")
        return message

    # -- steps
    def prepare(self, run: ModelRun) -> str:
        """Stage, check, count, quarantine, then the multi-step changes. Returns the relation
        the load reads."""
        try:
            return self._prepare(run)
        except BaseException:
            self.drop_stage(run)
            self.untag()
            raise

    def _prepare(self, run: ModelRun) -> str:
        out = run.outcome
        load = run.load_sql
        if run.observed is not None and load is not None:
            out.observation = self.spark.observe(run.observed, run.view, load.discard_metrics)
        if run.stage:
            self.spark.run(f"drop table if exists {run.stage}")
            self.spark.run(
                f"create table {run.stage} using {_stage_format(run)} "
                f"as select * from {run.observed or run.view}"
            )
            out.staged = True
            self._take_counts(run)
        if load is not None:
            if load.violation_sample_sql:
                rows = self.spark.fetch(load.violation_sample_sql)
                if rows:
                    self.drop_stage(run)
                    self.raise_value_violation(run, rows)
            if load.discard_count_sql and run.observed is None:
                self._set_counts(run, self.spark.fetch(load.discard_count_sql)[0])
            self.spark.run(f"create or replace temporary view {run.source} as {load.select}")
        if run.write.multi_step and run.statements:
            self._begin_steps(run)
        if load is not None and load.quarantine_select and out.rows_discarded:
            self._step(
                run,
                "the quarantine insert",
                lambda: self._quarantine(run, load.quarantine_select or ""),
            )
        return run.source

    def _take_counts(self, run: ModelRun) -> None:
        """The discard counts observed in the pass that just read the model's output."""
        observation, run.outcome.observation = run.outcome.observation, None
        if observation is None:
            return
        counts = observation()
        load = run.load_sql
        if counts is None and run.outcome.staged and load is not None and load.discard_count_sql:
            counts = self.spark.fetch(load.discard_count_sql)[0]  # from the stage, not the model
        if counts is None:
            logger.warning(f"{run.unique_id}: Spark reported no discard counts for this run")
        else:
            self._set_counts(run, counts)

    @staticmethod
    def _set_counts(run: ModelRun, counts: Mapping[str, Any]) -> None:
        run.outcome.rows_discarded = int(counts["rows_discarded"] or 0)
        run.outcome.values_discarded = int(counts["values_discarded"] or 0)

    def _begin_steps(self, run: ModelRun) -> None:
        out = run.outcome
        out.restore_version = self.current_version(run.relation, run.table_format)
        intent = self.intent_of(run)
        value = intent.to_json().replace("\\", "\\\\").replace("'", "\\'")
        self.spark.run(
            f"alter table {run.relation} set tblproperties ('{INTENT_PROPERTY}' = '{value}')"
        )
        out.intent = intent
        for statement in run.statements:
            self._step(run, statement, lambda s=statement: self.spark.run(s))
            out.executed.append(statement)

    def intent_of(self, run: ModelRun) -> Intent:
        added = tuple(
            col.path
            for op in run.plan.operations
            if isinstance(op, AddColumns)
            for col in op.columns
        )
        return Intent(
            run.invocation_id,
            run.unique_id,
            run.relation,
            run.table_format,
            run.outcome.restore_version,
            run.commit_tag,
            added,
            run.statements,
        )

    def _step(self, run: ModelRun, step: str, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except Exception as exc:
            self.undo(run, exc, step)

    def _quarantine(self, run: ModelRun, select: str) -> None:
        table = run.quarantine_table
        self.spark.run(
            f"create table if not exists {table} using {_quarantine_format(run)} "
            f"as select * from ({select}) where false"
        )
        self.spark.run(f"insert into {table} by name {select}")
        run.outcome.quarantined = run.outcome.rows_discarded

    def load(self, run: ModelRun, sql: str) -> ContractsAdapterResponse:
        """The one write; then the intent is cleared. Any failure after a change is undone."""
        auto_merge = (
            run.evolves_in_write
            and run.table_format == "delta"
            and run.strategy in ("append", MICROBATCH)
        )
        try:
            if auto_merge:  # this statement only, in this thread's own session
                previous = self.spark.get_conf(DELTA_AUTO_MERGE)
                self.spark.set_conf(DELTA_AUTO_MERGE, "true")
            try:
                response = self._step(run, "the load", lambda: self.spark.run(sql))
            finally:
                if auto_merge:
                    self.spark.set_conf(DELTA_AUTO_MERGE, previous)
            run.outcome.loaded = True
            try:
                self._take_counts(run)
            except Exception as exc:  # the load has committed: counts are a report, not the data
                logger.warning(f"{run.unique_id}: could not read the discard counts: {exc}")
            if run.outcome.intent is not None:
                self._step(run, "clearing the intent", lambda: self._clear_intent(run.relation))
        finally:
            self.drop_stage(run)
            self.untag()
        self.record(run)
        self._append_history(run)
        line = run.outcome_line()
        if line:
            logger.info(line)
        return run.response(
            str(response),
            code=getattr(response, "code", None),
            rows_affected=getattr(response, "rows_affected", None),
        )

    def _append_history(self, run: ModelRun) -> None:
        """The run's applied changes, discards and repairs, appended to the schema's history
        table. The load has committed: a failure here is a warning, not a failed model."""
        out = run.outcome
        table = history_relation(run.relation)
        insert = history_insert(
            table,
            run.unique_id,
            run.relation,
            run.invocation_id,
            run.plan.operations,
            out.rows_discarded,
            out.values_discarded,
            out.repairs,
        )
        if insert is None:
            return
        try:
            using = "iceberg" if run.table_format == "iceberg" else "delta"
            self.report.once(table, lambda: self.spark.run(history_ddl(table, using)))
            self.spark.run(insert)
        except Exception as exc:
            logger.warning(f"{run.unique_id}: could not append to {table}: {exc}")

    def drop_stage(self, run: ModelRun) -> None:
        if run.outcome.staged:
            run.outcome.staged = False
            try:
                self.spark.run(f"drop table if exists {run.stage}")
            except Exception as exc:  # a leftover stage harms nothing; say so
                logger.warning(f"{run.unique_id}: could not drop the stage {run.stage}: {exc}")

    def undo(self, run: ModelRun, exc: BaseException, step: str) -> None:
        """Put the table back after `step` failed (if this run changed it), then raise."""
        out = run.outcome
        self.drop_stage(run)
        if out.quarantined and run.table_format in ("delta", "iceberg"):
            try:
                self.spark.run(
                    f"delete from {run.quarantine_table} where `_dbt_run_id` = '{run.invocation_id}'"
                )
                out.quarantined = None
            except Exception as cleanup:
                logger.warning(f"{run.unique_id}: quarantine rows of this run stay: {cleanup}")
        intent = out.intent
        if intent is None:
            self.untag()
            self.record(run)
            raise exc
        try:
            out.restored = self.restore(intent, out.executed)
        except ForeignCommits as foreign:
            out.restored = f"NOT RESTORED: {foreign}"
            self.record(run)
            raise
        except Exception as restore_exc:
            out.restored = f"RESTORE FAILED: {restore_exc}"
            self.record(run)
            raise RestoreFailed(
                run.unique_id, step, exc, restore_exc, self.manual_repair(intent)
            ) from exc
        finally:
            self.untag()
        self.record(run)
        raise RunUndone(run.unique_id, step, out.restored, exc) from exc

    def raise_value_violation(self, run: ModelRun, samples: List[Dict[str, Any]]) -> None:
        decision = run.contract
        assert decision is not None
        column = str(samples[0]["column_name"])
        reason = str(samples[0].get("reason") or COERCE_REASON)
        check = next((c for c in decision.value_checks if c.dotted.lower() == column.lower()), None)
        if reason != COERCE_REASON:  # a declared rule (pydantic_contract), not a coercion
            check = None
        violation = {
            "schema_entity": "data_type",
            "contract_mode": "freeze",
            "column": column,
            "deployed_type": check.deployed_type.to_sql() if check else None,
            "compiled_type": check.compiled_type.to_sql() if check else None,
            "reason": reason,
        }
        values = [
            row["value"]
            for row in samples
            if str(row["column_name"]) == column
            and str(row.get("reason") or COERCE_REASON) == reason
        ]
        self.raise_violation(run.unique_id, run.relation, violation, values)

    def raise_violation(
        self, unique_id: str, relation: str, violation: Dict[str, Any], values: Any = ()
    ) -> None:
        self.untag()
        error = SchemaContractViolation(unique_id, relation, violation, values)
        entry = {"violation": {**violation, "offending_values": [str(v) for v in values]}}
        self.report.record(self.target_dir, unique_id, entry)
        raise error

    def record(self, run: ModelRun) -> None:
        self.report.record(self.target_dir, run.unique_id, run.report())


def _stage_format(run: ModelRun) -> str:
    """Plain parquet (no transaction log, no statistics) unless the table's catalog is Iceberg's,
    which only makes Iceberg tables."""
    return "iceberg" if run.table_format == "iceberg" else "parquet"


def _quarantine_format(run: ModelRun) -> str:
    """The table's own format where rows can be deleted again (a failed run takes its back)."""
    return run.table_format if run.table_format in ("delta", "iceberg") else "parquet"


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


# ------------------------------------------------------------------------------ the report


class RunReport:
    """`target/schema_changes.json` of one dbt invocation: per model, the diff, the plan, what
    ran, repairs, any violation. A new invocation id starts a new report; written atomically."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._invocation: Optional[str] = None
        self._entries: Dict[str, Dict[str, Any]] = {}
        self._summarized = False
        self._used: set = set()
        self._key_locks: Dict[str, threading.Lock] = {}

    def start(self, invocation_id: str) -> None:
        with self._lock:
            if invocation_id != self._invocation:
                self._invocation, self._entries = invocation_id, {}
                self._summarized, self._used = False, set()

    def once(self, key: str, action: Callable[[], Any]) -> None:
        """Run `action` once per `key` in this invocation; other threads wait for it, and a
        failed action is tried again by the next caller."""
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            if key in self._used:
                return
            action()
            with self._lock:
                self._used.add(key)

    def take_summary(self) -> Optional[str]:
        """The run's summary line, once per invocation (None when no model had news)."""
        with self._lock:
            if self._summarized or not self._entries:
                return None
            self._summarized = True
            return run_summary(self._entries)

    def record(self, target_path: Path, unique_id: str, entry: Dict[str, Any]) -> None:
        with self._lock:
            self._entries.setdefault(unique_id, {}).update(entry)
            body = json.dumps(
                {"invocation_id": self._invocation, "models": self._entries}, indent=2, default=str
            )
            target_path.mkdir(parents=True, exist_ok=True)
            _write_atomically(target_path, "schema_changes.json", body)
            planned = {k: e for k, e in self._entries.items() if e.get("dry_run")}
            if planned:  # a dry run: the plan a pull request can show
                invocation = self._invocation or ""
                plan = {"invocation_id": invocation, "models": planned}
                _write_atomically(
                    target_path, "schema_plan.json", json.dumps(plan, indent=2, default=str)
                )
                _write_atomically(target_path, "schema_plan.md", plan_markdown(invocation, planned))


def _write_atomically(directory: Path, name: str, body: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
    with os.fdopen(fd, "w") as handle:
        handle.write(body)
    os.replace(tmp, directory / name)


def from_json(schema_json: Mapping[str, Any]) -> Struct:
    parsed = from_spark_json(schema_json)
    assert isinstance(parsed, Struct)
    return parsed
