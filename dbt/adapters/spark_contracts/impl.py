"""The adapter: dbt-spark's SparkAdapter plus catalogs (Iceberg), typed schemas and the planner's
entry points. Decisions live in `core/`; this class only gathers inputs and hands back results."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Iterable, List, Optional, Tuple

from dbt.adapters.base import available
from dbt.adapters.base.impl import catch_as_completed
from dbt.adapters.base.relation import AdapterTrackingRelationInfo, BaseRelation, InformationSchema
from dbt.adapters.contracts.relation import RelationConfig, RelationType
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.impl import SparkAdapter, SparkConfig
from dbt_common.exceptions import CompilationError, DbtRuntimeError
from dbt_common.utils import executor
from typing_extensions import TypeAlias

from dbt.adapters.spark_contracts import evolution as run_evolution
from dbt.adapters.spark_contracts.column import SparkContractsColumn
from dbt.adapters.spark_contracts.connections import SparkContractsConnectionManager
from dbt.adapters.spark_contracts.core import diff_schemas
from dbt.adapters.spark_contracts.core.config import ConfigError, resolve_settings
from dbt.adapters.spark_contracts.core.contract import resolve_contract
from dbt.adapters.spark_contracts.core.enforce import decide, render_load_select
from dbt.adapters.spark_contracts.core.model_contract import compare_model_contract, mismatch_table
from dbt.adapters.spark_contracts.credentials import set_project_root
from dbt.adapters.spark_contracts.relation import SparkContractsRelation

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


SESSION_CATALOG = "spark_catalog"


@dataclass
class SparkContractsConfig(SparkConfig):
    file_format: str = DEFAULT_FILE_FORMAT
    schema_contract: Optional[Any] = None
    schema_evolution: Optional[Dict[str, Any]] = None


class SparkContractsAdapter(SparkAdapter):
    Relation: TypeAlias = SparkContractsRelation  # type: ignore[assignment]
    Column: TypeAlias = SparkContractsColumn  # type: ignore[assignment]
    ConnectionManager: TypeAlias = SparkContractsConnectionManager  # type: ignore[assignment]
    AdapterSpecificConfigs: TypeAlias = SparkContractsConfig  # type: ignore[assignment]

    def __init__(self, config: Any, mp_context: Any) -> None:
        set_project_root(getattr(config, "project_root", None))
        super().__init__(config, mp_context)

    @classmethod
    def type(cls) -> str:
        return "spark_contracts"

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
        if not hasattr(handle, "schema_json"):
            raise DbtRuntimeError(
                f"connection method {self.config.credentials.method} cannot analyse a query's schema"
            )
        return handle.schema_json(sql)

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
    def plan_schema_evolution(
        self,
        relation: BaseRelation,
        compiled_sql: str,
        model: Dict[str, Any],
        run_vars: Dict[str, Any],
        table_options: str = "",
    ) -> run_evolution.SchemaEvolution:
        """Diff the model's analysed output against the deployed table and plan (core/)."""
        unique_id = model.get("unique_id", str(relation))
        contract, settings = self._resolve_run_settings(model, run_vars)
        compiled = run_evolution.compiled_schema(
            self.schema_json(compiled_sql), _declared_not_null(model)
        )
        self._validate_column_settings(unique_id, settings, compiled, relation)
        deployed = run_evolution.from_spark_json(self.schema_json(f"select * from {relation}"))
        properties = {str(k): str(v) for k, v in self._fetch_rows(f"show tblproperties {relation}")}
        table_format = self.table_format_of(relation)
        decision = None
        if contract is not None:
            decision = decide(
                contract, deployed, compiled, diff_schemas(deployed, compiled), table_format
            )
            if decision.violations:
                self._raise_violation(unique_id, str(relation), decision.violations[0].to_dict())
        evolution = run_evolution.plan_evolution(
            unique_id,
            str(relation),
            table_format,
            deployed,  # type: ignore[arg-type]
            compiled,
            properties,
            settings,
            table_options.strip(),
            contract=decision,
        )
        if evolution.has_changes or evolution.blocked or evolution.plan.notes:
            logger.info(evolution.summary())
        self._record(evolution)
        return evolution

    def _resolve_run_settings(self, model: Dict[str, Any], run_vars: Dict[str, Any]) -> Any:
        unique_id = model.get("unique_id", "model")
        config = model.get("config", {})
        try:
            contract = resolve_contract(
                unique_id, config.get("schema_contract"), run_vars.get("schema_contract")
            )
            settings = resolve_settings(
                unique_id,
                config.get("schema_evolution"),
                contract,
                config.get("on_schema_change"),
                run_vars,
            )
        except ConfigError as exc:
            raise CompilationError(str(exc)) from exc
        if contract is not None and config.get("on_schema_change") not in (None, "ignore"):
            logger.warning(
                f"{unique_id}: schema_contract is set, so on_schema_change "
                f"({config.get('on_schema_change')}) is ignored"
            )
        return contract, settings

    def _raise_violation(
        self, unique_id: str, relation: str, violation: Dict[str, Any], values: Any = ()
    ) -> None:
        error = run_evolution.SchemaContractViolation(unique_id, relation, violation, values)
        entry = {"violation": {**violation, "offending_values": [str(v) for v in values]}}
        run_evolution.REPORT.record(self._target_dir, unique_id, entry)
        raise error

    @available
    def contract_new_table_action(
        self,
        relation: BaseRelation,
        compiled_sql: str,
        model: Dict[str, Any],
        run_vars: Dict[str, Any],
    ) -> str:
        """`tables` of the schema contract when the relation does not exist: create or skip
        (discard modes, with a warning); freeze fails here, before anything is created."""
        contract, _ = self._resolve_run_settings(model, run_vars)
        if contract is None:
            return "create"
        compiled = run_evolution.from_spark_json(self.schema_json(compiled_sql))
        decision = decide(contract, None, compiled, diff_schemas(compiled, compiled), "delta")  # type: ignore[arg-type]
        unique_id = model.get("unique_id", str(relation))
        if decision.violations:
            self._raise_violation(unique_id, str(relation), decision.violations[0].to_dict())
        if decision.table_action == "skip":
            logger.warning(f"{unique_id}: {decision.warnings[0]} ({relation})")
            return "skip"
        return "create"

    @available
    def contract_source(
        self, evolution: run_evolution.SchemaEvolution, staged: BaseRelation, run_id: str
    ) -> BaseRelation:
        """The relation the load reads: the staged model, or under a schema contract a view
        applying it (casts, filters, variants) inside the one query that writes the data."""
        decision = evolution.contract
        if decision is None or evolution.dry_run:
            return staged
        load = render_load_select(
            decision, str(staged), evolution.deployed, evolution.compiled, run_id
        )
        evolution.load = load
        view = staged.incorporate(path={"identifier": f"{staged.identifier}__contract"})
        self.execute(f"create or replace temporary view {view} as {load.select}")
        if load.discard_count_sql:
            rows = self._fetch_rows(load.discard_count_sql)
            evolution.rows_discarded, evolution.values_discarded = (int(v or 0) for v in rows[0])
        if load.quarantine_select and decision.contract.quarantine and evolution.rows_discarded:
            self._write_quarantine(evolution, load.quarantine_select)
        return view

    def _write_quarantine(self, evolution: run_evolution.SchemaEvolution, select: str) -> None:
        table = f"{evolution.relation}__quarantine"
        self.execute(
            f"create table if not exists {table} using {evolution.table_format} "
            f"as select * from ({select}) where false"
        )
        self.execute(f"insert into {table} by name {select}")

    def _validate_column_settings(
        self, unique_id: str, settings: Any, compiled: Any, relation: BaseRelation
    ) -> None:
        unknown = settings.policy.unknown_columns(compiled)
        if unknown:
            raise CompilationError(
                f"{unique_id}: `schema_evolution.columns` names {', '.join(unknown)}, which the "
                f"model does not output; its columns are {', '.join(compiled.names)}"
            )
        for name, column in settings.policy.columns.items():
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
    def apply_schema_evolution(
        self, evolution: run_evolution.SchemaEvolution, staged_relation: BaseRelation
    ) -> None:
        """Run the model's query (cached) first, then the DDL; on failure put the table back."""
        if evolution.dry_run or not evolution.has_changes or evolution.full_refresh:
            return
        evolution.restore_point = run_evolution.take_restore_point(
            self._fetch_rows, evolution.relation, evolution.table_format
        )
        # The query runs here, before any change: a query that fails at run time changes nothing.
        self.execute(f"cache table {staged_relation}")
        evolution.cached = True
        for statement in evolution.statements:
            try:
                self.execute(statement)
                evolution.executed.append(statement)
            except Exception as exc:
                self._restore_and_raise(evolution, exc, statement)

    @available
    def load_with_restore(
        self, evolution: run_evolution.SchemaEvolution, load_sql: str, staged_relation: BaseRelation
    ) -> run_evolution.ContractsAdapterResponse:
        """The load; if it fails after this run changed the table, the table is put back."""
        try:
            response, _ = self.execute(load_sql)
        except Exception as exc:
            frozen = "schema_contract data_type freeze" in str(exc)
            if evolution.executed:
                try:
                    self._restore_and_raise(evolution, exc, "the load")
                except DbtRuntimeError:
                    if not frozen:
                        raise
            if frozen:
                self._raise_data_type_violation(evolution)
            raise
        finally:
            if evolution.cached:
                self.execute(f"uncache table if exists {staged_relation}")
        return self.evolution_response(evolution, response)

    @available
    def evolution_response(
        self, evolution: run_evolution.SchemaEvolution, response: Any
    ) -> run_evolution.ContractsAdapterResponse:
        """The load's response, carrying what this run changed (for run_results.json)."""
        self._record(evolution)
        return run_evolution.ContractsAdapterResponse(
            _message=str(response),
            code=getattr(response, "code", None),
            rows_affected=getattr(response, "rows_affected", None),
            schema_changes=evolution.applied_changes(),
            rows_discarded=evolution.rows_discarded,
            values_discarded=evolution.values_discarded,
            contract=evolution.contract.contract.to_dict() if evolution.contract else None,
        )

    def _raise_data_type_violation(self, evolution: run_evolution.SchemaEvolution) -> None:
        load, decision = evolution.load, evolution.contract
        samples = self._fetch_rows(load.violation_sample_sql) if load.violation_sample_sql else []
        column = str(samples[0][0]) if samples else None
        check = next(
            (c for c in decision.value_checks if column and c.dotted.lower() == column.lower()),
            None,
        )
        violation = {
            "schema_entity": "data_type",
            "contract_mode": "freeze",
            "column": column,
            "deployed_type": check.deployed_type.to_sql() if check else None,
            "compiled_type": check.compiled_type.to_sql() if check else None,
            "reason": "values do not coerce into the deployed column's type",
        }
        values = [row[1] for row in samples if str(row[0]) == column]
        self._raise_violation(evolution.unique_id, evolution.relation, violation, values)

    @available
    def skipped_response(self, model: Dict[str, Any]) -> run_evolution.ContractsAdapterResponse:
        return run_evolution.ContractsAdapterResponse(
            _message="SKIP (schema_contract tables: the relation does not exist; not created)",
            schema_changes=[],
        )

    @available
    def dry_run_response(
        self, evolution: run_evolution.SchemaEvolution
    ) -> run_evolution.ContractsAdapterResponse:
        return run_evolution.ContractsAdapterResponse(
            _message=f"DRY RUN: {len(evolution.statements)} statement(s) planned, nothing changed",
            schema_changes=[],
            dry_run=True,
        )

    def _restore_and_raise(
        self, evolution: run_evolution.SchemaEvolution, exc: BaseException, step: str
    ) -> None:
        try:
            evolution.restored = run_evolution.restore(
                self._fetch_rows, evolution, self._catalog_of(evolution)
            )
        except Exception as restore_exc:  # report both; never hide the original failure
            evolution.restored = f"RESTORE FAILED: {restore_exc}"
        self._record(evolution)
        raise DbtRuntimeError(
            f"{evolution.unique_id}: {step} failed, so the run was undone "
            f"({evolution.restored}). Cause: {exc}"
        ) from exc

    def _catalog_of(self, evolution: run_evolution.SchemaEvolution) -> Optional[str]:
        parts = evolution.relation.split(".")
        return parts[0] if len(parts) == 3 else None

    @property
    def _target_dir(self) -> Path:
        return Path(self.config.project_root) / self.config.target_path

    def _record(self, evolution: run_evolution.SchemaEvolution) -> None:
        run_evolution.REPORT.record(self._target_dir, evolution.unique_id, evolution.report())

    @available
    def assert_model_contract(self, sql: str, empty_schema_sql: str, model: Dict[str, Any]) -> str:
        """dbt's enforced contract, on typed schemas: nested types field by field; raises dbt's
        mismatch table. Runs on every build, incremental runs included."""
        definition = run_evolution.from_spark_json(self.schema_json(sql))
        contract = run_evolution.from_spark_json(self.schema_json(empty_schema_sql))
        mismatches = compare_model_contract(definition, contract)  # type: ignore[arg-type]
        if mismatches:
            raise CompilationError(
                "This model has an enforced contract that failed.\n"
                "Please ensure the name, data_type, and number of columns in your contract match "
                "the columns in your model's definition.\n\n" + mismatch_table(mismatches),
                node=None,
            )
        return ""

    @available
    def describe_deployed_schema(self, relation_name: str) -> str:
        """Text for operators: format, typed schema and table properties of a table."""
        schema = run_evolution.from_spark_json(self.schema_json(f"select * from {relation_name}"))
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
        chosen = shared
        if update_columns:
            wanted = {name.lower() for name in update_columns}
            chosen = [name for name in shared if name.lower() in wanted]
        elif exclude_columns:
            excluded = {name.lower() for name in exclude_columns}
            chosen = [name for name in shared if name.lower() not in excluded]
        return {
            "insert": [self.quote(name) for name in shared],
            "update": [self.quote(name) for name in chosen],
        }

    # ---- docs catalog ---------------------------------------------------------------------
    def _get_columns_for_catalog(self, relation: BaseRelation) -> Iterable[Dict[str, Any]]:
        # DESCRIBE gives full nested types (SHOW TABLE EXTENDED's tree prints only `struct`).
        try:
            columns = self.get_columns_in_relation(relation)
        except DbtRuntimeError:
            columns = []
        for column in columns:
            as_dict = column.to_column_dict()
            as_dict["column_name"] = as_dict.pop("column", None)
            as_dict["column_type"] = as_dict.pop("dtype")
            as_dict["table_database"] = relation.database
            as_dict["table_type"] = str(relation.type) if relation.type else None
            yield as_dict

    def get_catalog(
        self,
        relation_configs: Iterable[RelationConfig],
        used_schemas: FrozenSet[Tuple[str, str]],
    ) -> Tuple[agate.Table, List[Exception]]:
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
        columns: List[Dict[str, Any]] = []
        for schema in schemas:
            for relation in self.list_relations(database, schema):
                columns.extend(self._get_columns_for_catalog(relation))
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
