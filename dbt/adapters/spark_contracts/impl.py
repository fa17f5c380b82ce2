"""The adapter: dbt-spark's SparkAdapter plus catalogs (Iceberg), typed schemas and the planner's
entry points. Decisions live in `core/`; this class only gathers inputs and hands back results."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Iterable, List, Optional, Tuple, Type

from dbt.adapters.base import PythonJobHelper, available
from dbt.adapters.base.impl import catch_as_completed
from dbt.adapters.base.relation import AdapterTrackingRelationInfo, BaseRelation, InformationSchema
from dbt.adapters.contracts.relation import RelationConfig, RelationType
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.events.types import CodeExecution, CodeExecutionStatus
from dbt.adapters.spark.impl import (
    GET_COLUMNS_IN_RELATION_RAW_MACRO_NAME,
    SparkAdapter,
    SparkConfig,
)
from dbt_common.events.functions import fire_event
from dbt_common.exceptions import CompilationError, DbtRuntimeError
from dbt_common.invocation import get_invocation_id
from dbt_common.utils import executor
from typing_extensions import TypeAlias

from dbt.adapters.spark_contracts import python_model
from dbt.adapters.spark_contracts import run as runs
from dbt.adapters.spark_contracts.column import SparkContractsColumn
from dbt.adapters.spark_contracts.connections import SparkContractsConnectionManager
from dbt.adapters.spark_contracts.constraints import (
    model_table_constraints,
    run_explicit_build,
    support_for,
)
from dbt.adapters.spark_contracts.core import diff_schemas
from dbt.adapters.spark_contracts.core.catalog import catalog_rows, described_docs
from dbt.adapters.spark_contracts.core.clone import CloneFacts, ClonePlan, plan_clone
from dbt.adapters.spark_contracts.core.config import read_run_vars
from dbt.adapters.spark_contracts.core.constraints import TableConstraints, explicit_build
from dbt.adapters.spark_contracts.core.contract import ContractMode
from dbt.adapters.spark_contracts.core.diff import SchemaDiff
from dbt.adapters.spark_contracts.core.enforce import decide, render_load_select, view_violations
from dbt.adapters.spark_contracts.core.intent import commit_tag, find_intent
from dbt.adapters.spark_contracts.core.microbatch import (
    MICROBATCH,
    Microbatch,
    check_batch_plan,
    plan_microbatch,
)
from dbt.adapters.spark_contracts.core.model_contract import compare_model_contract, mismatch_table
from dbt.adapters.spark_contracts.core.outcome import (
    HISTORY_COLUMNS,
    catalog_stats,
    history_relation,
)
from dbt.adapters.spark_contracts.core.render import (
    BACKUP_SUFFIX,
    REWRITE_SUFFIX,
    render_plan,
    suffixed,
)
from dbt.adapters.spark_contracts.core.snapshot import SnapshotContractError, plan_snapshot
from dbt.adapters.spark_contracts.core.types import sql_string
from dbt.adapters.spark_contracts.core.write_path import (
    REBUILD,
    WritePath,
    decide_write_path,
    needs_stage,
    plan_change,
)
from dbt.adapters.spark_contracts.credentials import set_project_root
from dbt.adapters.spark_contracts.errors import config_errors_as_compilation_errors
from dbt.adapters.spark_contracts.relation import SparkContractsRelation
from dbt.adapters.spark_contracts.validation import settings_at_run, validate_manifest

if TYPE_CHECKING:
    import agate

logger = AdapterLogger("SparkContracts")
DEFAULT_FILE_FORMAT = "delta"


def _declared_not_null(model: Dict[str, Any]) -> Tuple[str, ...]:
    """Columns the model declares NOT NULL (column constraints or model-level constraints)."""
    names = [
        name
        for name, column in (model.get("columns") or {}).items()
        for constraint in column.get("constraints") or []
        if constraint.get("type") == "not_null"
    ]
    for constraint in model.get("constraints") or []:
        if constraint.get("type") == "not_null":
            names.extend(constraint.get("columns") or [])
    return tuple(names)


def _plan_batch(
    unique_id: str, strategy: str, table_format: str, model: Dict[str, Any], compiled: Any
) -> Optional[Microbatch]:
    """A microbatch run's window and load (core/microbatch.py), refused before any write."""
    if strategy != MICROBATCH:
        return None
    with config_errors_as_compilation_errors():
        return plan_microbatch(
            unique_id, table_format, model.get("config") or {}, model.get("batch"), compiled
        )


SESSION_CATALOG = "spark_catalog"


@dataclass
class SparkContractsConfig(SparkConfig):
    file_format: str = DEFAULT_FILE_FORMAT
    schema_contract: Optional[Any] = None
    schema_evolution: Optional[Dict[str, Any]] = None
    pydantic_contract: Optional[str] = None


class SparkContractsAdapter(SparkAdapter):
    Relation: TypeAlias = SparkContractsRelation  # type: ignore[assignment]
    Column: TypeAlias = SparkContractsColumn  # type: ignore[assignment]
    ConnectionManager: TypeAlias = SparkContractsConnectionManager  # type: ignore[assignment]
    AdapterSpecificConfigs: TypeAlias = SparkContractsConfig  # type: ignore[assignment]
    # Delta's (the default format); a model's own format decides its warnings (table_constraints)
    CONSTRAINT_SUPPORT = support_for(DEFAULT_FILE_FORMAT)  # type: ignore[assignment]

    def __init__(self, config: Any, mp_context: Any) -> None:
        set_project_root(getattr(config, "project_root", None))
        super().__init__(config, mp_context)
        self._report = runs.RunReport()  # per adapter instance, restarted per invocation id

    @classmethod
    def type(cls) -> str:
        return "spark_contracts"

    def set_macro_resolver(self, macro_resolver: Any) -> None:
        """dbt hands every manifest it loads to the adapter here (after a parse, a partial parse,
        or as passed to dbtRunner), before any node runs: the point where each node's final config
        is known. Bad adapter config fails here, as a parsing error."""
        validate_manifest(self, macro_resolver)
        super().set_macro_resolver(macro_resolver)

    def cleanup_connections(self) -> None:
        """dbt calls this once a command's nodes and hooks are done: say what the run did."""
        super().cleanup_connections()
        line = self._report.take_summary()
        if line:
            logger.info(line)

    # ---- catalogs -------------------------------------------------------------------------
    @property
    def configured_catalogs(self) -> Tuple[str, ...]:
        return (self.config.credentials.iceberg_catalog,)

    @available
    def resolve_catalog(
        self, custom_database_name: Optional[str], file_format: Optional[str]
    ) -> Optional[str]:
        """The catalog a model lives in: None for spark_catalog, else a configured catalog name.

        `file_format: iceberg` without a `database` goes to the Iceberg catalog, because
        Delta owns spark_catalog and cannot hold Iceberg tables.
        """
        name = (custom_database_name or "").strip()
        if not name or name.lower() == SESSION_CATALOG:
            if (file_format or "").lower() == "iceberg":
                return self.configured_catalogs[0]
            return None
        for catalog in self.configured_catalogs:
            if name.lower() == catalog.lower():
                return catalog
        raise CompilationError(
            f"`database: {name}` names no catalog this target knows. On Spark, `database` is a "
            f"catalog: use one of {', '.join((SESSION_CATALOG,) + self.configured_catalogs)} "
            "(or omit it). The Iceberg catalog's name is the profile key `iceberg_catalog`."
        )

    @available
    def default_file_format(self) -> str:
        return DEFAULT_FILE_FORMAT

    @available
    def default_incremental_strategy(self, file_format: str) -> str:
        """`merge` where the format can merge (it appends when there is no unique_key), else
        `append`: a `unique_key` is never silently ignored on Delta or Iceberg."""
        return "merge" if file_format in ("delta", "iceberg", "hudi") else "append"

    def list_relations_without_caching(self, schema_relation: BaseRelation) -> List[BaseRelation]:
        if not schema_relation.database:
            return super().list_relations_without_caching(schema_relation)
        try:
            rows = self.execute_macro(
                "spark_contracts__list_catalog_tables", kwargs={"schema_relation": schema_relation}
            )
        except DbtRuntimeError as exc:
            message = getattr(exc, "msg", str(exc))
            missing = ("NAMESPACE_NOT_FOUND", "SCHEMA_NOT_FOUND", "NoSuchNamespaceException")
            if any(marker in message for marker in missing):
                return []
            raise
        return [
            self.Relation.create(
                database=schema_relation.database,
                schema=schema_relation.schema,
                identifier=row[1],
                type=RelationType.Table,
                is_iceberg=True,
            )
            for row in rows
        ]

    def get_relation(self, database: str, schema: str, identifier: str) -> Optional[BaseRelation]:
        return super(SparkAdapter, self).get_relation(database, schema, identifier)

    def check_schema_exists(self, database: str, schema: str) -> bool:
        results = self.execute_macro("list_schemas", kwargs={"database": database})
        return schema.lower() in [str(row[0]).lower() for row in results]

    # ---- schemas -------------------------------------------------------------------------
    def schema_json(self, sql: str) -> Dict[str, Any]:
        """A query's output schema as Spark JSON, by analysis only (the query does not run)."""
        handle = self.connections.get_thread_connection().handle
        with self.connections.exception_handler(sql):
            return handle.schema_json(sql)

    def relation_schema_json(self, relation: Any, describable: bool) -> Dict[str, Any]:
        """A table's or view's schema as Spark JSON, in one read where the method allows:
        `describable` says the relation is a temporary view or a v1 table (not Delta, Iceberg)."""
        handle = self.connections.get_thread_connection().handle
        with self.connections.exception_handler(f"-- schema of {relation}"):
            return handle.relation_schema(str(relation), describable)

    def _fetch_rows(self, sql: str) -> List[Tuple[Any, ...]]:
        _, table = self.execute(sql, fetch=True)
        return [tuple(row.values()) for row in table.rows]

    @staticmethod
    def table_format_of(relation: BaseRelation) -> str:
        if getattr(relation, "is_delta", False):
            return "delta"
        if getattr(relation, "is_iceberg", False):
            return "iceberg"
        return "parquet"  # file-source tables (parquet, orc, csv, ...) share its capabilities

    @available
    def plan_clone(
        self,
        target: BaseRelation,
        existing: Optional[BaseRelation],
        deferred: BaseRelation,
        source: Optional[BaseRelation],
        can_clone_table: bool,
        full_refresh: bool,
    ) -> ClonePlan:
        """`dbt clone` of one node (core/clone.py): `existing` is the target as cached, `source`
        the deferred relation (`deferred`) as cached; None when absent."""
        key = lambda r: (r.database, r.schema, r.identifier)  # noqa: E731
        return plan_clone(
            CloneFacts(
                source_type=str(source.type) if source is not None and source.type else None,
                source_format=self.table_format_of(source) if source is not None else "",
                target_type=str(existing.type) if existing is not None else None,
                target_in_session_catalog=(target.database or SESSION_CATALOG).lower()
                == SESSION_CATALOG,
                same_relation=key(deferred) == key(target),
                can_clone_table=bool(can_clone_table),
                full_refresh=bool(full_refresh),
            )
        )

    @available
    def plan_model_run(
        self,
        relation: BaseRelation,
        view: BaseRelation,
        model: Dict[str, Any],
        run_vars: Dict[str, Any],
        table_options: str,
        strategy: str,
        invocation_id: str,
    ) -> runs.ModelRun:
        """Step 1 of an incremental run: analyse, repair what a dead run left, decide (core/)."""
        unique_id = model.get("unique_id", str(relation))
        contract, settings, declared = self._resolve_run_settings(model, run_vars)
        spark = self._spark()
        runner = self._runner(spark, invocation_id)
        tag = commit_tag(invocation_id, unique_id)
        runner.tag_commits(tag)  # every commit of this run carries it
        try:
            run = self._plan_model_run(
                spark,
                runner,
                relation,
                view,
                model,
                contract,
                declared,
                settings,
                strategy,
                invocation_id,
                tag,
                table_options,
            )
        except BaseException:
            runner.untag()  # a later node on this thread must not commit under this tag
            raise
        if run.blocked or run.dry_run:
            runner.untag()  # nothing will be written
        return run

    def _plan_model_run(
        self,
        spark: runs.Spark,
        runner: runs.Runner,
        relation: BaseRelation,
        view: BaseRelation,
        model: Dict[str, Any],
        contract: Any,
        declared: Any,
        settings: Any,
        strategy: str,
        invocation_id: str,
        tag: str,
        table_options: str,
    ) -> runs.ModelRun:
        unique_id = model.get("unique_id", str(relation))
        compiled = runs.compiled_schema(
            spark.relation_schema(str(view), True), _declared_not_null(model)
        )
        self._validate_column_settings(unique_id, settings, compiled, relation)
        table_format = self.table_format_of(relation)
        microbatch = _plan_batch(unique_id, strategy, table_format, model, compiled)
        deployed, properties = self._deployed(spark, relation)
        repairs: List[str] = []
        dead = find_intent(properties)
        if dead is not None and dead.invocation_id != invocation_id:
            repairs.append(runner.repair(dead, unique_id))
            deployed, properties = self._deployed(spark, relation)
        decision = None
        if contract is not None:
            changes = diff_schemas(deployed, compiled)
            decision = decide(contract, deployed, compiled, changes, table_format, declared)
            if decision.violations:
                runner.raise_violation(unique_id, str(relation), decision.violations[0].to_dict())
        diff, plan, mode = plan_change(
            deployed, compiled, table_format, properties, settings, decision
        )
        if microbatch is not None:
            with config_errors_as_compilation_errors():
                check_batch_plan(microbatch, plan)
        config = model.get("config", {})
        column_lists = bool(
            config.get("merge_update_columns") or config.get("merge_exclude_columns")
        )
        written = (
            decision.target if decision is not None and decision.target is not None else compiled
        )
        write = decide_write_path(plan, table_format, strategy, deployed, written, column_lists)
        in_write = write.evolves_in_write
        # a dry run shows the DDL the plan amounts to, also when the write would carry it
        statements = (
            ()
            if plan.is_blocked
            or write.path is WritePath.REPLACE
            or (in_write and not settings.dry_run)
            else render_plan(plan, str(relation), table_format, table_options.strip())
        )
        stage = runs.stage_name(str(relation), invocation_id)
        load = None
        if decision is not None and not settings.dry_run:
            load = render_load_select(decision, stage, deployed, compiled, invocation_id)
        # A table rebuild's `create or replace ... as select` runs its query in a nested
        # execution whose observed metrics never reach the session (Delta 4.3): it stages.
        observe = (
            load is not None
            and bool(load.discard_metrics)
            and spark.can_observe()
            and strategy != REBUILD
        )
        observed = suffixed(str(view), "__observed") if observe else None
        staged = needs_stage(write, load, observe) and not (plan.full_refresh or settings.dry_run)
        if staged and load is not None and load.discard_metrics and not spark.can_observe():
            method = str(self.config.credentials.method)
            logger.info(runs.counts_not_observed_note(unique_id, method))
        if decision is not None and load is not None and not staged:
            source = observed or str(view)
            load = render_load_select(decision, source, deployed, compiled, invocation_id)
        run = runs.ModelRun(
            unique_id=unique_id,
            invocation_id=invocation_id,
            relation=str(relation),
            table_format=table_format,
            strategy=strategy,
            deployed=deployed,
            compiled=compiled,
            diff=diff,
            plan=plan,
            statements=tuple(statements),
            dry_run=settings.dry_run,
            mode=mode,
            write=write,
            view=str(view),
            stage=stage if staged else None,
            observed=observed,
            commit_tag=tag,
            contract=decision,
            load_sql=load,
            microbatch=microbatch,
        )
        run.outcome.repairs.extend(repairs)
        if (run.has_changes or run.blocked or plan.notes or repairs) and not run.dry_run:
            logger.info(run.summary())  # a dry run logs its own `[dry run]` line
        runner.record(run)
        return run

    def _deployed(self, spark: runs.Spark, relation: BaseRelation) -> Tuple[Any, Dict[str, str]]:
        describable = self.table_format_of(relation) not in ("delta", "iceberg")
        deployed = spark.relation_schema(str(relation), describable)
        rows = self._fetch_rows(f"show tblproperties {relation}")
        return deployed, {str(k): str(v) for k, v in rows}

    def _spark(self) -> _ConnectionSpark:
        return _ConnectionSpark(self)

    def _runner(self, spark: runs.Spark, invocation_id: str) -> runs.Runner:
        self._report.start(invocation_id)
        return runs.Runner(spark, self._report, self._target_dir)

    @available
    def schema_history(self, unique_id: str, relation_name: str) -> Any:
        """The schema history of one model (`dbt run-operation schema_history`), oldest first."""
        table = history_relation(relation_name)
        columns = ", ".join(name for name, _ in HISTORY_COLUMNS if name != "model")
        sql = (
            f"select {columns} from {table} where model = {sql_string(unique_id)} "
            "order by recorded_at"
        )
        try:
            _, rows = self.execute(sql, fetch=True)
        except DbtRuntimeError as exc:
            raise DbtRuntimeError(
                f"No schema history for {unique_id}: reading {table} failed ({exc}). The table "
                "is created by the first run that changes a schema, discards rows or repairs."
            ) from exc
        return rows

    @available
    def recover_rewrite(self, relation: BaseRelation) -> Optional[BaseRelation]:
        """`relation` is missing: if a parquet rewrite died between its two renames, the old
        table waits under its backup name. Put it back (and drop the half-built copy); the
        intent it carries then has the run repair it as usual. Found through dbt's relation
        cache, so a missing table costs no Spark call unless there is something to recover."""
        backup = self.get_relation(
            relation.database, relation.schema, suffixed(relation.identifier, BACKUP_SUFFIX)
        )
        if backup is None:
            return None
        properties = {str(k): str(v) for k, v in self._fetch_rows(f"show tblproperties {backup}")}
        intent = find_intent(properties)
        renames = [s for s in (intent.statements if intent else ()) if "RENAME TO" in s]
        if not any(BACKUP_SUFFIX in s for s in renames):
            return None  # a leftover of a finished swap, not a rewrite that stopped midway
        logger.warning(
            f"{relation} is missing and {backup} holds it: a rewrite stopped between its two "
            "renames; renaming it back"
        )
        beside = self.get_relation(
            relation.database, relation.schema, suffixed(relation.identifier, REWRITE_SUFFIX)
        )
        if beside is not None:
            self.drop_relation(beside)
        self.rename_relation(backup, relation)
        return self.get_relation(relation.database, relation.schema, relation.identifier)

    @available
    def prepare_model_run(self, run: runs.ModelRun) -> str:
        """Step 2: stage, check, count, quarantine, multi-step changes; the relation to load."""
        return self._runner(self._spark(), run.invocation_id).prepare(run)

    @available
    def load_model_run(self, run: runs.ModelRun, load_sql: str) -> runs.ContractsAdapterResponse:
        """Step 3: the one write (evolving in place when the plan allows); undone on failure."""
        return self._runner(self._spark(), run.invocation_id).load(run, load_sql)

    @available
    def full_refresh_response(
        self, run: runs.ModelRun, response: Any
    ) -> runs.ContractsAdapterResponse:
        runner = self._runner(self._spark(), run.invocation_id)
        runner.untag()  # the rebuild's commits carried the run's tag; later nodes must not
        runner.record(run)
        return run.response(str(response))

    @available
    def dry_run_response(self, run: runs.ModelRun) -> runs.ContractsAdapterResponse:
        return run.response(
            f"DRY RUN: {len(run.statements)} statement(s) planned, nothing changed", dry_run=True
        )

    def _resolve_run_settings(self, model: Dict[str, Any], run_vars: Dict[str, Any]) -> Any:
        """(schema contract, evolution settings, declared `pydantic_contract`) of this run."""
        settings = settings_at_run(self, model, run_vars)
        config = model.get("config", {})
        if settings.contract is not None and config.get("on_schema_change") not in (None, "ignore"):
            logger.warning(
                f"{model.get('unique_id', 'model')}: schema_contract is set, so on_schema_change "
                f"({config.get('on_schema_change')}) is ignored"
            )
        return settings.contract, settings.evolution, settings.declared

    @available
    def run_vars(self, var: Any) -> Dict[str, Any]:
        """The run vars the adapter reads, as the model's `var()` resolves them."""
        return read_run_vars(var)

    @available
    def binds_schema_contract(self, model: Dict[str, Any], run_vars: Dict[str, Any]) -> bool:
        """A rebuilt table model is planned like an incremental run when it sets
        `schema_contract`, `pydantic_contract` or `schema_evolution` (or the run sets the
        `schema_contract` var)."""
        contract, settings, _ = self._resolve_run_settings(model, run_vars)
        return bool(settings.uses_evolution or contract is not None)

    @available
    def contract_new_table_action(
        self,
        relation: BaseRelation,
        compiled_sql: str,
        model: Dict[str, Any],
        run_vars: Dict[str, Any],
    ) -> str:
        """A first build, before its first statement: the model's settings checked against its
        output (`schema_evolution.columns`), then `tables` of the schema contract: create or
        skip (discard modes, with a warning); freeze fails here, before anything is created."""
        contract, settings, declared = self._resolve_run_settings(model, run_vars)
        if not settings.policy.columns and contract is None:
            return "create"  # nothing to check: no analysis of the query
        spark = self._spark()
        compiled = spark.schema(compiled_sql)
        unique_id = model.get("unique_id", str(relation))
        self._validate_column_settings(unique_id, settings, compiled, f"({compiled_sql}) AS t")
        if contract is None:
            return "create"
        decision = decide(contract, None, compiled, SchemaDiff(), "delta", declared)
        if decision.violations:
            self._raise_violation(spark, unique_id, relation, decision.violations)
        if decision.table_action == "skip":
            logger.warning(f"{unique_id}: {decision.warnings[0]} ({relation})")
            return "skip"
        return "create"

    @available
    def evolve_snapshot(
        self,
        target: BaseRelation,
        staging: BaseRelation,
        model: Dict[str, Any],
        run_vars: Dict[str, Any],
    ) -> List[str]:
        """A snapshot's run, before its merge: the schema contract against the source's columns,
        then the planner's additions and widenings applied to the snapshot table. Returns the
        (quoted) staging columns the merge inserts."""
        contract, settings, _ = self._resolve_run_settings(model, run_vars)
        unique_id = model.get("unique_id", str(target))
        spark = self._spark()
        deployed, properties = self._deployed(spark, target)
        staged = spark.relation_schema(str(staging), True)  # a temporary view
        table_format = self.table_format_of(target)
        try:
            planned = plan_snapshot(
                unique_id, deployed, staged, table_format, properties, settings, contract
            )
        except SnapshotContractError as exc:
            raise CompilationError(str(exc)) from exc
        if planned.violations:
            self._raise_violation(spark, unique_id, target, planned.violations)
        if planned.plan.is_blocked:
            raise CompilationError(
                runs.blocked_message(unique_id, str(target), table_format, planned.plan)
            )
        for statement in render_plan(planned.plan, str(target), table_format, ""):
            self.execute(statement)
        if planned.plan.operations:
            logger.info(f"{unique_id} ({target}): {planned.plan.summary()}")
        return list(planned.insert_columns)

    @available
    def check_view_contract(
        self,
        relation: BaseRelation,
        compiled_sql: str,
        model: Dict[str, Any],
        run_vars: Dict[str, Any],
    ) -> str:
        """A view being replaced: its schema contract's `freeze` modes against the view's
        current schema, by analysis only; raises the violation before the view changes."""
        contract, _, _ = self._resolve_run_settings(model, run_vars)
        if contract is None:
            return ""
        spark = self._spark()
        deployed = spark.relation_schema(str(relation), True)  # a view
        violations = view_violations(contract, deployed, spark.schema(compiled_sql))
        if violations:
            unique_id = model.get("unique_id", str(relation))
            self._raise_violation(spark, unique_id, relation, violations)
        return ""

    @available
    def contract_create_sql(
        self, relation: BaseRelation, compiled_sql: str, model: Dict[str, Any], run_vars: Any
    ) -> str:
        """The SELECT a run that creates the table writes: the model's query itself, or, under a
        `pydantic_contract`, that query coerced into the declared columns with the declared rules
        applied (freeze fails the CREATE itself; no counts, no quarantine on this run)."""
        contract, _, declared = self._resolve_run_settings(model, run_vars)
        if contract is None or declared is None:
            return compiled_sql
        spark = self._spark()
        compiled = runs.compiled_schema(spark.schema(compiled_sql), _declared_not_null(model))
        table_format = (model.get("config") or {}).get("file_format") or DEFAULT_FILE_FORMAT
        # `tables` was decided already (spark_contracts_may_create), or the table exists
        creating = replace(contract, tables=ContractMode.EVOLVE)
        decision = decide(creating, None, compiled, SchemaDiff(), table_format, declared)
        unique_id = model.get("unique_id", str(relation))
        if decision.violations:
            self._raise_violation(spark, unique_id, relation, decision.violations)
        source = f"(\n{compiled_sql}\n) AS __dbt_contract_source"
        return render_load_select(decision, source, None, compiled, "").select

    def _raise_violation(
        self, spark: runs.Spark, unique_id: str, relation: Any, violations: Any
    ) -> None:
        """A contract broken outside an incremental run (first build, view, snapshot): the
        first violation raised, and recorded in this invocation's report."""
        runner = self._runner(spark, get_invocation_id())
        runner.raise_violation(unique_id, str(relation), violations[0].to_dict())

    def _validate_column_settings(
        self, unique_id: str, settings: Any, compiled: Any, relation: Any
    ) -> None:
        """`schema_evolution.columns` against the model's output, by analysis only: each entry
        names an output column, each default/backfill is valid SQL over `relation` (the
        deployed table, or on a first build the model's query)."""
        unknown = settings.policy.unknown_columns(compiled)
        if unknown:
            # written ahead of the column (the next run adds it) or left behind: not an error,
            # and it changes nothing the other entries do
            logger.warning(
                f"{unique_id}: `schema_evolution.columns` names {', '.join(unknown)}, which the "
                f"model does not output (yet); its columns are {', '.join(compiled.names)}. "
                "The entry applies on the run that adds the column."
            )
        lowered = {name.lower() for name in unknown}
        for name, column in settings.policy.columns.items():
            if name.lower() in lowered:
                continue  # its expressions are checked on the run that adds the column
            for key in ("default", "backfill"):
                expr = getattr(column, key)
                if expr is None:
                    continue
                try:
                    # analysed against the deployed table: a backfill may read its columns
                    self.schema_json(f"select {expr} as v from {relation}")
                except DbtRuntimeError as exc:
                    raise CompilationError(
                        f"{unique_id}: `schema_evolution.columns.{name}.{key}` is not a valid SQL "
                        f"expression: {expr!r} ({str(exc).splitlines()[0]})"
                    ) from exc

    @available
    def skipped_response(self, model: Dict[str, Any]) -> runs.ContractsAdapterResponse:
        return runs.ContractsAdapterResponse(
            _message="SKIP (schema_contract tables: the relation does not exist; not created)",
            schema_changes=[],
        )

    @property
    def _target_dir(self) -> Path:
        return Path(self.config.project_root) / self.config.target_path

    @available
    def assert_model_contract(self, sql: str, empty_schema_sql: str, model: Dict[str, Any]) -> str:
        """dbt's enforced contract, on typed schemas: nested types field by field; raises dbt's
        mismatch table. Runs on every build, incremental runs included."""
        definition = runs.from_json(self.schema_json(sql))
        contract = runs.from_json(self.schema_json(empty_schema_sql))
        mismatches = compare_model_contract(definition, contract)  # type: ignore[arg-type]
        if mismatches:
            raise CompilationError(
                "This model has an enforced contract that failed.\n"
                "Please ensure the name, data_type, and number of columns in your contract match "
                "the columns in your model's definition.\n\n" + mismatch_table(mismatches),
                node=None,
            )
        return ""

    # ---- model constraints ----------------------------------------------------------------
    @available
    def table_constraints(self, model: Dict[str, Any], file_format: str) -> TableConstraints:
        """The constraints a build of `model` creates with its table (dbt warns here about the
        ones `file_format` does not enforce or support)."""
        return model_table_constraints(model, file_format)

    @available
    def build_with_schema(
        self,
        relation: BaseRelation,
        select_sql: str,
        constraints: TableConstraints,
        clauses: str,
        exists: bool,
    ) -> Any:
        """An Iceberg build with NOT NULL columns, all or nothing (core/constraints.py)."""
        spark = self._spark()
        schema = constraints.schema(spark.schema(select_sql))
        stage = suffixed(str(relation), "__dbt_constraints")
        build = explicit_build(
            str(relation), stage, exists, schema, constraints.table_format, clauses, select_sql
        )
        snapshot = (
            runs.Runner(spark, self._report, self._target_dir).current_version(
                str(relation), "iceberg"
            )
            if exists
            else None
        )

        def restore() -> None:
            if snapshot is not None:
                spark.run(build.restore_sql(snapshot))

        return run_explicit_build(spark.run, build, restore)

    @available
    def describe_deployed_schema(self, relation_name: str) -> str:
        """Text for operators: format, typed schema and table properties of a table."""
        schema = runs.from_json(self.schema_json(f"select * from {relation_name}"))
        rows = self._fetch_rows(f"describe table extended {relation_name}")
        provider = next((str(r[1]) for r in rows if str(r[0]).strip() == "Provider"), "unknown")
        properties = self._fetch_rows(f"show tblproperties {relation_name}")
        lines = [f"{relation_name} ({provider})"]
        for column in schema.fields:  # type: ignore[union-attr]
            null = "" if column.nullable else " NOT NULL"
            lines.append(f"  {column.name}: {column.type.to_sql()}{null}")
        lines += [f"  property {key} = {value}" for key, value in properties]
        return "\n".join(lines)

    @available
    def merge_columns(
        self,
        source: BaseRelation,
        target: BaseRelation,
        update_columns: Optional[List[str]] = None,
        exclude_columns: Optional[List[str]] = None,
    ) -> Dict[str, List[str]]:
        """Quoted column lists for MERGE: insert = source ∩ target (target order); update = that,
        narrowed by `merge_update_columns` or minus `merge_exclude_columns` (case-insensitive)."""
        source_names = {c.name.lower() for c in self.get_columns_in_relation(source)}
        shared = [
            c.name for c in self.get_columns_in_relation(target) if c.name.lower() in source_names
        ]
        return runs.merge_column_lists(shared, update_columns, exclude_columns)

    # ---- Python models ----------------------------------------------------------------------
    @available
    def python_model_view(self, compiled_code: str, model: Dict[str, Any]) -> BaseRelation:
        """Run a Python model in this process on the thread's SparkSession; the temporary view
        holding its DataFrame, which the materialization then reads like a SQL model's query."""
        connection = self.connections.get_thread_connection()
        method = str(self.config.credentials.method)
        # dbt's `log_code_execution` (which logs dbt-spark's submit_python_job): the code on the
        # model's connection, then the status and time of running it. Running model() builds
        # the DataFrame; the materialization's load evaluates it.
        fire_event(CodeExecution(conn_name=connection.name, code_content=compiled_code))
        start = time.time()
        view = python_model.python_model_view(connection.handle, method, compiled_code, model)
        response = self.connections.get_response(None)
        fire_event(
            CodeExecutionStatus(status=response._message, elapsed=round(time.time() - start, 2))
        )
        return self.Relation.create(identifier=view, type=RelationType.View)

    @property
    def python_submission_helpers(self) -> Dict[str, Type[PythonJobHelper]]:
        return {}  # dbt-spark's Databricks job helpers do not apply here

    def submit_python_job(self, parsed_model: dict, compiled_code: str) -> Any:
        raise DbtRuntimeError(
            f"{parsed_model.get('unique_id')}: Python models run in the dbt process through the "
            "table and incremental materializations of spark_contracts; nothing is submitted to "
            "a cluster"
        )

    # ---- docs catalog ---------------------------------------------------------------------
    def _get_columns_for_catalog(self, relation: BaseRelation) -> Iterable[Dict[str, Any]]:
        """One DESCRIBE TABLE EXTENDED (full nested types; SHOW TABLE EXTENDED's tree prints only
        `struct`): dbt-spark's parse gives names, types and stats; core.catalog adds the
        comments and owner, numbered from 1."""
        try:
            raw = self.execute_macro(
                GET_COLUMNS_IN_RELATION_RAW_MACRO_NAME, kwargs={"relation": relation}
            )
        except DbtRuntimeError as exc:  # as dbt-spark: unreadable (e.g. dropped since listed)
            logger.debug(f"No catalog entry for {relation}: {getattr(exc, 'msg', exc)}")
            return []
        columns = [
            column.to_column_dict()
            for column in self.parse_describe_extended(relation, raw)
            if column.name not in self.HUDI_METADATA_COLUMNS
        ]
        docs = described_docs([(r["col_name"], r["data_type"], r["comment"]) for r in raw])
        table_type = str(relation.type) if relation.type else None
        return catalog_rows(columns, docs, relation.database, table_type)

    def get_catalog(
        self,
        relation_configs: Iterable[RelationConfig],
        used_schemas: FrozenSet[Tuple[str, str]],
    ) -> Tuple[agate.Table, List[Exception]]:
        relation_configs = list(relation_configs)
        schema_map = self._get_catalog_schemas(relation_configs)
        with executor(self.config) as tpe:
            futures: List[Future[agate.Table]] = []
            for info, schemas in schema_map.items():
                for schema in schemas:
                    futures.append(
                        tpe.submit_connected(
                            self, schema, self._get_one_catalog, info, [schema], relation_configs
                        )
                    )
            catalogs, exceptions = catch_as_completed(futures)
        return catalogs, exceptions

    def _get_one_catalog(
        self,
        information_schema: InformationSchema,
        schemas: Any,
        used_schemas: Any,
    ) -> agate.Table:
        import agate
        from dbt_common.clients.agate_helper import DEFAULT_TYPE_TESTER

        database = information_schema.database
        settings = {
            (str(c.database).lower(), str(c.schema).lower(), str(c.identifier).lower()): (
                _catalog_stats(c)
            )
            for c in used_schemas  # the relation configs, passed by get_catalog
        }
        columns: List[Dict[str, Any]] = []
        for schema in schemas:
            for relation in self.list_relations(database, schema):
                key = tuple(
                    str(part).lower()
                    for part in (relation.database, relation.schema, relation.identifier)
                )
                stats = settings.get(key) or catalog_stats("", None, None)
                columns.extend({**c, **stats} for c in self._get_columns_for_catalog(relation))
        return agate.Table.from_object(columns, column_types=DEFAULT_TYPE_TESTER)

    @classmethod
    def get_adapter_run_info(cls, config: RelationConfig) -> AdapterTrackingRelationInfo:
        # dbt derives the module from the class name, which cannot spell `spark_contracts`.
        from dbt.adapters.__about__ import version as base_version

        from dbt.adapters.spark_contracts.__version__ import version

        return AdapterTrackingRelationInfo(
            adapter_name="spark_contracts",
            base_adapter_version=base_version,
            adapter_version=version,
            model_adapter_details=cls._get_adapter_specific_run_info(config),
        )

    @classmethod
    def _get_adapter_specific_run_info(cls, config: RelationConfig) -> Dict[str, Any]:
        info = super()._get_adapter_specific_run_info(config)
        info["adapter_type"] = "spark_contracts"
        return info


def _catalog_stats(relation_config: Any) -> Dict[str, Any]:
    config = getattr(relation_config, "config", None)
    get = getattr(config, "get", None)
    if get is None:
        return catalog_stats("", None, None)
    unique_id = getattr(relation_config, "unique_id", None) or str(relation_config.identifier)
    return catalog_stats(unique_id, get("schema_contract"), get("schema_evolution"))


class _ConnectionSpark:
    """The thread's dbt connection as the run needs it (`run.Spark`)."""

    def __init__(self, adapter: SparkContractsAdapter) -> None:
        self._adapter = adapter

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        _, table = self._adapter.execute(sql, fetch=True)
        return [dict(zip(table.column_names, row.values(), strict=True)) for row in table.rows]

    def run(self, sql: str) -> Any:
        response, _ = self._adapter.execute(sql)
        return response

    def schema(self, sql: str) -> Any:
        return runs.from_json(self._adapter.schema_json(sql))

    def relation_schema(self, relation: str, describable: bool) -> Any:
        return runs.from_json(self._adapter.relation_schema_json(relation, describable))

    def _handle(self) -> Any:
        return self._adapter.connections.get_thread_connection().handle

    def set_conf(self, key: str, value: Optional[str]) -> None:
        handle = self._handle()
        if hasattr(handle, "set_conf"):
            with self._adapter.connections.exception_handler(f"set {key}"):
                handle.set_conf(key, value)

    def get_conf(self, key: str) -> Optional[str]:
        handle = self._handle()
        if not hasattr(handle, "get_conf"):
            return None
        with self._adapter.connections.exception_handler(f"get {key}"):
            return handle.get_conf(key)

    def can_observe(self) -> bool:
        handle = self._handle()
        return bool(getattr(handle, "can_observe", lambda: False)())

    def observe(self, view: str, source: str, metrics: Tuple[Tuple[str, str], ...]) -> Any:
        return self._handle().observe(view, source, metrics)
