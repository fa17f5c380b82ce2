"""One incremental model run as planned: the typed, immutable `ModelRun` Jinja reads and hands
back, and the adapter response it returns (the connection protocol: spark_handle.py)."""

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.core.contracts.decision import (
    ContractDecision,
)
from dbt.adapters.spark_contracts.core.contracts.load_select import (
    BATCH_COLUMN,
    LoadSql,
)
from dbt.adapters.spark_contracts.core.contracts.quarantine import QUARANTINE_SUFFIX
from dbt.adapters.spark_contracts.core.evolution.capabilities import logged, row_of
from dbt.adapters.spark_contracts.core.evolution.fit import fits_view
from dbt.adapters.spark_contracts.core.evolution.operations import AddColumns, DropColumns, Plan
from dbt.adapters.spark_contracts.core.evolution.render import dropped_after_load, suffixed
from dbt.adapters.spark_contracts.core.evolution.steps import AFTER_LOAD_MARK, Step
from dbt.adapters.spark_contracts.core.materialization.load import (
    Load,
    LoadOptions,
    Rebuild,
    plan_load,
)
from dbt.adapters.spark_contracts.core.materialization.microbatch import Microbatch
from dbt.adapters.spark_contracts.core.materialization.run_plan import (  # noqa: F401
    STAGE_SUFFIX,
    Build,
    BuildPlan,
    RunDecision,
    RunInputs,
    stage_name,
)
from dbt.adapters.spark_contracts.core.materialization.write_path import REBUILD, WriteDecision
from dbt.adapters.spark_contracts.core.recovery.intent import Intent
from dbt.adapters.spark_contracts.core.recovery.pending import pending_name
from dbt.adapters.spark_contracts.core.recovery.swap import refused
from dbt.adapters.spark_contracts.core.report.outcome import (
    outcome_line,
)
from dbt.adapters.spark_contracts.core.schema.diff import SchemaDiff
from dbt.adapters.spark_contracts.core.schema.types import Field, Primitive, Struct
from dbt.adapters.spark_contracts.core.settings.config import ConfigError
from dbt.adapters.spark_contracts.run.messages import blocked_message
from dbt.adapters.spark_contracts.run.outcome_events import FIRST_PASS, RunOutcome

logger = AdapterLogger("SparkContracts")

DELTA_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
# Iceberg adds `spark.sql.iceberg.snapshot-property.<key>` to the summary of every snapshot
ICEBERG_TAG_KEY = "dbt-spark-contracts"
ICEBERG_SNAPSHOT_TAG = f"spark.sql.iceberg.snapshot-property.{ICEBERG_TAG_KEY}"
# the session settings a commit tag is set under: every format's log that keeps one
TAG_KEYS = (DELTA_USER_METADATA, ICEBERG_SNAPSHOT_TAG)
_TAG_KEY_OF = {"delta": (DELTA_USER_METADATA,), "iceberg": (ICEBERG_SNAPSHOT_TAG,)}


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
    # each discarding data test's rows: test, reason, action, rows (issue 42)
    data_tests: Optional[List[Dict[str, Any]]] = None


# ----------------------------------------------------------------------------- the plan

# the fields of a ModelRun that are RunInputs' and RunDecision's of the same name (`planned`)
_FROM_INPUTS = "invocation_id relation table_format strategy deployed compiled discarded_last"
_FROM_DECISION = (
    "diff plan statements mode write stage observed contract quarantine_pending fits first_pass"
    " creates load_settings"
).split()


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
    statements: Tuple[Step, ...]
    dry_run: bool
    mode: str
    write: WriteDecision
    view: str  # the model's query as a temporary view
    stage: Optional[str]  # the table the output is staged in, when the run stages
    observed: Optional[str]  # the view over `view` whose first reader counts the discards
    commit_tag: str
    contract: Optional[ContractDecision] = None
    load_sql: Optional[LoadSql] = None
    repairs: Tuple[str, ...] = ()  # what the repair step before planning did
    microbatch: Optional[Microbatch] = None  # the batch window a microbatch run replaces
    # how a rebuild or full refresh of this table replaces it (core/materialization/run_plan.replacement)
    replace_by: Build = Build.REPLACE
    # the discarded rows go to a pending table before the load, into the quarantine after it
    quarantine_pending: bool = False
    quarantine_format: Optional[str] = None  # of <relation>__quarantine in dbt's cache, if there
    # `view` is the view of this SELECT, the model's output as it fits the table (a change it
    # ignores, a struct field written NULL: core/evolution/fit.py); the runner defines it first
    fits: Optional[str] = None
    load: Optional[Load] = None  # the one write, when the run loads (core/materialization/load.py)
    # a quarantining run's first pass (run_plan.first_pass), and its quarantine's memory that
    # the model's last quarantining run discarded rows
    first_pass: Optional[LoadSql] = None
    discarded_last: bool = False
    creates: bool = False  # the run creates the table (core/materialization/create_run.py)
    load_settings: Tuple[Tuple[str, str], ...] = ()  # the load's SQL confs (RunDecision's)

    @classmethod
    def planned(
        cls,
        inputs: RunInputs,
        decided: RunDecision,
        unique_id: str,
        commit_tag: str,
        options: LoadOptions = LoadOptions(),
        **facts: Any,
    ) -> "ModelRun":
        """The run `plan_run(inputs)` decided (`decided`) with its load typed from the model's
        `options` (core/materialization/load.plan_load) when it loads; `facts`: what the adapter knows beside it
        (microbatch, replace_by, repairs, quarantine_format)."""
        run = cls(
            unique_id=unique_id,
            commit_tag=commit_tag,
            dry_run=inputs.settings.dry_run,
            view=fits_view(inputs.view) if decided.fits else inputs.view,
            load_sql=decided.load,
            **{name: getattr(inputs, name) for name in _FROM_INPUTS.split()},
            **{name: getattr(decided, name) for name in _FROM_DECISION},
            **facts,
        )
        rebuilds = run.full_refresh or run.strategy == REBUILD
        if run.replace_by is Build.REFUSE and rebuilds and not (run.blocked or run.dry_run):
            raise ConfigError(f"{run.unique_id} ({run.relation}): {refused(run.table_format)}")
        if run.blocked or run.dry_run or run.full_refresh:
            return run
        load = plan_load(
            run.strategy,
            run.relation,
            run.source,
            run.table_format,
            run.deployed,
            run._written(),
            run.plan,
            run.evolves_in_write,
            run.microbatch,
            options,
        )
        return replace(run, load=load)

    def intent(self, restore_version: Optional[int]) -> Intent:
        """The durable intent this run writes on the table before its first change: how to
        put it back (to `restore_version`), which columns its ADD COLUMNS add, and which it
        drops after its load (core/recovery/intent.landed_last)."""
        ops, fmt = self.plan.operations, self.table_format
        added = tuple(c.path for op in ops if isinstance(op, AddColumns) for c in op.columns)
        removed = tuple(
            p for op in ops if isinstance(op, DropColumns) for p in dropped_after_load(op, fmt)
        )
        return Intent(
            self.invocation_id,
            self.unique_id,
            self.relation,
            self.table_format,
            restore_version,
            self.commit_tag,
            added,
            self.statements,
            removed_after_load=removed,
        )

    # -- what Jinja reads
    @property
    def blocked(self) -> bool:
        return self.plan.is_blocked

    @property
    def has_changes(self) -> bool:
        return bool(self.plan.operations)

    @property
    def full_refresh(self) -> bool:
        """The plan's full refresh, made by the build's table statement, not a creating run."""
        return self.plan.full_refresh is not None and not self.creates

    @property
    def rebuilds(self) -> bool:
        """The load is a table model's rebuild: dbt-spark's `create_table_as` over `source`."""
        return isinstance(self.load, Rebuild)

    @property
    def drops_before_load(self) -> bool:
        """A table model's rebuild (the `table` strategy) that drops the table first (a
        location_root, a format's own catalog)."""
        return self.strategy == REBUILD and self.replace_by is Build.DROP_AND_CREATE

    @property
    def swaps_after_load(self) -> bool:
        """A table model's rebuild built beside the table, swapped in after its load
        (core/recovery/swap.py)."""
        return self.strategy == REBUILD and self.replace_by is Build.SWAP

    @property
    def tags_commits(self) -> bool:
        """A later step or run may look this run's commits up by its commit tag, so its session
        carries the tag before its first statement that changes something: a run that restores
        (its intent: the steps before its load, core/recovery/intent.py), changes the schema,
        stages, quarantines (its first pass, its pending table), loads a microbatch batch,
        creates or rebuilds the table. The one run whose commits no one looks up: the load of
        an unchanged schema in one statement, nothing before it, nothing to settle after it."""
        load = self.load_sql
        return not (
            self.load is not None
            and not self.has_changes
            and not self.statements
            and self.stage is None
            and self.first_pass is None
            and not self.quarantine_pending
            and (load is None or load.quarantine_row is None)
            and self.microbatch is None
            and not (self.creates or self.full_refresh or self.rebuilds)
        )

    @property
    def tag_keys(self) -> Tuple[str, ...]:
        """The settings this run's tag is set under: its table's format's own (the log a later
        run reads it from), every format's where the run replaces or creates the table or its
        format keeps no log."""
        if self.creates or self.full_refresh or self.rebuilds:
            return TAG_KEYS
        return _TAG_KEY_OF.get(self.table_format, TAG_KEYS)

    @property
    def evolves_in_write(self) -> bool:
        return self.write.evolves_in_write

    @property
    def source(self) -> str:
        """The relation the load reads: the contract's view (none where the contract's SELECT
        passes its source through unchanged), the stage or the model's view."""
        if self.load_sql is not None:
            if self.load_sql.passes_through:
                return self.load_sql.source
            return suffixed(self.view, "__contract")
        return self.stage or self.view

    @property
    def model_source(self) -> str:
        """`view`, or the view over it adding the load's coerced columns."""
        return self.load_sql.coerced_view(self.view) if self.load_sql is not None else self.view

    @property
    def observed_metrics(self) -> Tuple[Tuple[str, str], ...]:
        """(name, aggregate) pairs the reader of `observed` reports."""
        if self.observed is None or self.load_sql is None:
            return ()
        return self.load_sql.discard_metrics

    @property
    def quarantine_table(self) -> str:
        return suffixed(self.relation, QUARANTINE_SUFFIX)

    @property
    def batch_tag(self) -> str:
        """A microbatch batch's commit tag, which its pending table and discarded rows carry
        (core/recovery/pending.py); "" for any other run."""
        return self.load_sql.batch_tag if self.load_sql is not None else ""

    @property
    def pending_table(self) -> str:
        return pending_name(self.quarantine_table, self.invocation_id, self.batch_tag)

    @property
    def quarantined_schema(self) -> Struct:
        """The columns the quarantine takes from this run beside its own two: the model's, and
        a batch's `_dbt_batch_tag`."""
        if not self.batch_tag:
            return self.compiled
        return Struct((*self.compiled.fields, Field(BATCH_COLUMN, Primitive("string"))))

    def _written(self) -> Struct:
        """What the load writes: the contract's target schema, or the model's output."""
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
        mark = AFTER_LOAD_MARK
        ddl = "\n".join(f"    {s.sql.strip()};{mark * s.after_load}" for s in self.statements)
        return f"{head}\n{body}" + (f"\n  DDL:\n{ddl}" if ddl else "")

    def report(self, out: RunOutcome) -> Dict[str, Any]:
        return {
            "relation": self.relation,
            "table_format": self.table_format,
            "mode": self.mode,
            "dry_run": self.dry_run,
            "write_path": self.write.path.name.lower(),
            # staged: the output written to a table first (a quarantining run's: its pending
            # table, core/recovery/pending.py)
            "staged": self.stage is not None and out.quarantine_path != FIRST_PASS,
            "pending_table": (
                self.pending_table
                if self.quarantine_pending and out.quarantine_path != FIRST_PASS
                else None
            ),
            "quarantine_path": out.quarantine_path,
            "diff": [
                {"change": type(c).__name__, "path": c.dotted, "description": c.describe()}
                for c in self.diff.changes
            ],
            "plan": self.plan.to_dict(),
            "statements": [step.sql for step in self.statements],
            # sent after the load (core/evolution/steps.Step.after_load), listed last above
            "after_load": [step.sql for step in self.statements if step.after_load],
            "executed": [step.sql for step in out.executed],
            "restored": out.restored,
            "repairs": list(out.repairs),
            "contract": self.contract.to_dict() if self.contract is not None else None,
            "rows_discarded": out.rows_discarded,
            "values_discarded": out.values_discarded,
            "data_tests": [c.to_dict() for c in out.gate_counts] or None,
            "quarantined": out.quarantined,
            "loaded": out.loaded,
            "applied": self.applied_changes() if out.loaded else [],
        }

    def outcome_line(self, out: RunOutcome) -> Optional[str]:
        """What this run did, for the console; None when dbt's own line says it all."""
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

    def response(self, message: str, out: RunOutcome, **extra: Any) -> ContractsAdapterResponse:
        return ContractsAdapterResponse(
            _message=message,
            schema_changes=self.applied_changes(),
            rows_discarded=out.rows_discarded,
            values_discarded=out.values_discarded,
            data_tests=[c.to_dict() for c in out.gate_counts] or None,
            contract=self.contract.contract.to_dict() if self.contract else None,
            write_path=self.write.path.name.lower(),
            repairs=list(out.repairs),
            **extra,
        )


def stage_format(table_format: str) -> str:
    """A stage's or a pending table's format beside a model table in `table_format`: plain
    parquet (no transaction log, no statistics) unless the table's catalog is Iceberg's, which
    only makes Iceberg tables."""
    return row_of(table_format).stage_format


def quarantine_format_for(table_format: str) -> str:
    """A quarantine's (and a run lease's) format beside a model table in `table_format`: the
    table's own where rows can be deleted again (triage), else parquet."""
    return table_format if logged(table_format) else "parquet"
