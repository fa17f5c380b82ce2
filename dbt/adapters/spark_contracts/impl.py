"""The adapter: dbt-spark's SparkAdapter plus catalogs (Iceberg), typed schemas and the planner's
entry points. Decisions live in `core/`; this class only gathers inputs and hands back results."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Iterable, List, Optional, Tuple

from dbt.adapters.base import available
from dbt.adapters.base.impl import catch_as_completed
from dbt.adapters.base.relation import AdapterTrackingRelationInfo, BaseRelation, InformationSchema
from dbt.adapters.contracts.relation import RelationConfig, RelationType
from dbt.adapters.spark.impl import SparkAdapter, SparkConfig
from dbt_common.exceptions import CompilationError, DbtRuntimeError
from dbt_common.utils import executor
from typing_extensions import TypeAlias

from dbt.adapters.spark_contracts.column import SparkContractsColumn
from dbt.adapters.spark_contracts.connections import SparkContractsConnectionManager
from dbt.adapters.spark_contracts.credentials import set_project_root
from dbt.adapters.spark_contracts.relation import SparkContractsRelation

if TYPE_CHECKING:
    import agate

DEFAULT_FILE_FORMAT = "delta"
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
            if "NAMESPACE_NOT_FOUND" in message or "SCHEMA_NOT_FOUND" in message:
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
