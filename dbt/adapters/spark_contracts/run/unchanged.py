"""The check a multi-step run makes once it holds the model's lease, before its first change."""

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.evolution.capabilities import describable
from dbt.adapters.spark_contracts.run.lease import Leases
from dbt.adapters.spark_contracts.run.model_run import ModelRun
from dbt.adapters.spark_contracts.run.run_errors import TableChangedMeanwhile


def check_unchanged(spark: Spark, leases: Leases, run: ModelRun) -> None:
    """The table's schema is still the one the plan was made against, or the run fails leaving
    the table as it was (`TableChangedMeanwhile`), its lease let go. Rows another run loaded
    meanwhile are no reason: an append or a merge goes on over them."""
    now, _ = spark.deployed(run.relation, describable(run.table_format))
    if now != run.deployed:
        leases.let_go(run)
        raise TableChangedMeanwhile(
            run.unique_id, run.relation, run.deployed.simple_string(), now.simple_string()
        )
