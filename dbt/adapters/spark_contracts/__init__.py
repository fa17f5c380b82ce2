"""dbt-spark-contracts: dbt-spark with data contracts and schema evolution for Delta, Iceberg, Parquet."""

from dbt.adapters.base import AdapterPlugin

from dbt.adapters.spark_contracts.column import SparkContractsColumn  # noqa: F401
from dbt.adapters.spark_contracts.connection.connections import SparkContractsConnectionManager  # noqa: F401
from dbt.adapters.spark_contracts.connection.credentials import SparkContractsCredentials
from dbt.adapters.spark_contracts.impl import SparkContractsAdapter
from dbt.adapters.spark_contracts.relation import SparkContractsRelation  # noqa: F401
from dbt.include import spark_contracts

Plugin = AdapterPlugin(
    adapter=SparkContractsAdapter,  # type: ignore[arg-type]
    credentials=SparkContractsCredentials,
    include_path=spark_contracts.PACKAGE_PATH,
    dependencies=["spark"],
)
