"""The adapter: dbt-spark's SparkAdapter plus catalogs (Iceberg), typed schemas and the planner's
entry points. Decisions live in `core/`; this class only gathers inputs and hands back results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from dbt.adapters.base import available
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.contracts.relation import RelationType
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.impl import (
    SparkAdapter,
    SparkConfig,
)
from dbt_common.exceptions import CompilationError, DbtRuntimeError
from typing_extensions import TypeAlias

from dbt.adapters.spark_contracts import run as runs
from dbt.adapters.spark_contracts.column import SparkContractsColumn
from dbt.adapters.spark_contracts.connection.closes import CLOSES
from dbt.adapters.spark_contracts.connection.connections import SparkContractsConnectionManager
from dbt.adapters.spark_contracts.connection.credentials import set_project_root
from dbt.adapters.spark_contracts.constraints import (
    support_for,
)
from dbt.adapters.spark_contracts.core.materialization.clone import (
    CloneFacts,
    ClonePlan,
    plan_clone,
)
from dbt.adapters.spark_contracts.relation import SnapshotStaging, SparkContractsRelation
from dbt.adapters.spark_contracts.validation import validate_manifest

if TYPE_CHECKING:
    pass

from dbt.adapters.spark_contracts.adapter_catalog import CatalogMethods
from dbt.adapters.spark_contracts.adapter_contracts import ContractMethods
from dbt.adapters.spark_contracts.adapter_run import RunPathMethods
from dbt.adapters.spark_contracts.adapter_swap import SwapMethods
from dbt.adapters.spark_contracts.core.evolution.capabilities import DEFAULT_FILE_FORMAT, row_of
from dbt.adapters.spark_contracts.core.report.outcome import history_ddl, history_insert_rows

logger = AdapterLogger("SparkContracts")

SESSION_CATALOG = "spark_catalog"


@dataclass
class SparkContractsConfig(SparkConfig):
    file_format: str = DEFAULT_FILE_FORMAT
    schema_contract: Optional[Any] = None
    schema_evolution: Optional[Dict[str, Any]] = None
    pydantic_contract: Optional[str] = None


class SparkContractsAdapter(
    RunPathMethods, SwapMethods, ContractMethods, CatalogMethods, SparkAdapter
):
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
        self._tags = runs.CommitTags()  # the threads whose session carries a node's commit tag

    @classmethod
    def type(cls) -> str:
        return "spark_contracts"

    def set_macro_resolver(self, macro_resolver: Any) -> None:
        """dbt hands every manifest it loads to the adapter here (after a parse, a partial parse,
        or as passed to dbtRunner), before any node runs: the point where each node's final config
        is known. Bad adapter config fails here, as a parsing error."""
        validate_manifest(self, macro_resolver)
        super().set_macro_resolver(macro_resolver)

    def post_model_hook(self, config: Any, context: Any) -> None:
        """dbt calls this after every node's materialization, whatever happened (a `finally`):
        the node's commit tag leaves its thread's session here, so no later node commits under
        it. A failure to clear it (a lost connection) is logged, never raised: it would replace
        the node's own error; the thread's next node tries again."""
        try:
            self._tags.clear(self._spark)
        except Exception as exc:
            logger.warning(f"could not clear the commit tag from this thread's session: {exc}")
        super().post_model_hook(config, context)

    def cleanup_connections(self) -> None:
        """dbt calls this once a command's nodes and hooks are done: say what the run did."""
        self._write_history()
        super().cleanup_connections()
        CLOSES.warn_unfinished()  # the Thrift sessions closing off their nodes' paths
        line = self._report.take_summary()
        if line:
            logger.info(line)

    def _write_history(self) -> None:
        """The invocation's schema-history rows, one INSERT per history table. The loads have
        committed: a failure here is a warning, never a failed model."""
        pending = self._report.take_history()
        if not pending:
            return
        with self.connection_named("schema-history"):
            for table, using, rows in pending:
                try:
                    self.execute(history_ddl(table, using))
                    self.execute(history_insert_rows(table, rows))
                except Exception as exc:
                    logger.warning(f"could not append {len(rows)} row(s) to {table}: {exc}")

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
            if file_format and row_of(file_format).in_own_catalog:
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
        except DbtRuntimeError as listing_failed:
            # a schema not created yet lists nothing; asked, not read from the error's text
            try:
                exists = self.check_schema_exists(schema_relation.database, schema_relation.schema)
            except DbtRuntimeError:
                raise listing_failed from None
            if not exists:
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

    @available
    def snapshot_staging(self, relation: Any, sql: str) -> SnapshotStaging:
        """The snapshot's staging view and the query it reads (relation.SnapshotStaging), by
        the deployed table's format, as the executor's stage (run/execute.py) decides it."""
        return SnapshotStaging.of(relation, sql, self.table_format_of(relation))

    @available.parse_list
    def columns_in_query(self, sql: str) -> List[str]:
        """`sql`'s output column names, by analysis. dbt's default runs the query (`where false
        limit 0`) and reads its result's description, which Spark's Thrift server cannot give
        for a VARIANT column (a snapshot of a model with one reads its columns so)."""
        return [str(field["name"]) for field in self.schema_json(sql)["fields"]]

    def relation_schema_json(self, relation: Any, describable: bool) -> Dict[str, Any]:
        """A table's or view's schema as Spark JSON, in one read where the method allows:
        `describable` says the relation is a temporary view or a v1 table (not Delta, Iceberg)."""
        handle = self.connections.get_thread_connection().handle
        with self.connections.exception_handler(f"-- schema of {relation}"):
            return handle.relation_schema(str(relation), describable)

    def _fetch_rows(self, sql: str) -> List[Tuple[Any, ...]]:
        _, table = self.execute(sql, fetch=True)
        return [tuple(row.values()) for row in table.rows]

    def _listed_properties(self, relation: Any) -> Dict[str, str]:
        """A table's properties as SHOW TBLPROPERTIES lists them."""
        return {str(k): str(v) for k, v in self._fetch_rows(f"show tblproperties {relation}")}

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
        """`dbt clone` of one node (core/materialization/clone.py): `existing` is the target as cached, `source`
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
