"""The adapter's Python models and docs catalog."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Iterable, List, Tuple, Type

from dbt.adapters.base import PythonJobHelper, available
from dbt.adapters.base.impl import catch_as_completed
from dbt.adapters.base.relation import AdapterTrackingRelationInfo, BaseRelation, InformationSchema
from dbt.adapters.contracts.relation import RelationConfig, RelationType
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.events.types import CodeExecution, CodeExecutionStatus
from dbt.adapters.spark.impl import (
    GET_COLUMNS_IN_RELATION_RAW_MACRO_NAME,
)
from dbt_common.events.functions import fire_event
from dbt_common.exceptions import DbtRuntimeError
from dbt_common.utils import executor

from dbt.adapters.spark_contracts import python_model
from dbt.adapters.spark_contracts.connection.spark_handle import from_json
from dbt.adapters.spark_contracts.core.report.catalog import catalog_rows, described_docs
from dbt.adapters.spark_contracts.core.report.outcome import (
    HISTORY_COLUMNS,
    catalog_stats,
    history_relation,
)
from dbt.adapters.spark_contracts.core.schema.types import sql_string

if TYPE_CHECKING:
    import agate

from dbt.adapters.base.meta import AdapterMeta

logger = AdapterLogger("SparkContracts")


class CatalogMethods(metaclass=AdapterMeta):
    """Mixed into `SparkContractsAdapter`."""

    @available
    def describe_deployed_schema(self, relation_name: str) -> str:
        """Text for operators: format, typed schema and table properties of a table."""
        schema = from_json(self.schema_json(f"select * from {relation_name}"))
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
        `struct`): dbt-spark's parse gives names, types and stats; core.report.catalog adds the
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
