"""Moving a run's discarded rows into the quarantine at most once (run/quarantine_steps.py):
whether the quarantine can be read, whether it holds a run's rows, and the MERGE that appends
them unless it does."""

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark, answers
from dbt.adapters.spark_contracts.core.contracts.load_select import (
    BATCH_COLUMN,
    PENDING_DISCARDED,
    RUN_ID_COLUMN,
)
from dbt.adapters.spark_contracts.core.recovery.manual import RowsOf
from dbt.adapters.spark_contracts.core.schema.types import Struct, quote_identifier, sql_string

logger = AdapterLogger("SparkContracts")


def readable(spark: Spark, table: str) -> bool:
    """`table` answers a read (a failed read: False)."""
    return answers(spark, f"select 1 as present from {table} limit 0")


def holds(spark: Spark, quarantine: str, rows: RowsOf) -> bool:
    """The quarantine holds rows of that run (of that batch, for a batch's)."""
    return bool(spark.fetch(f"select 1 as held from {quarantine} where {rows.where()} limit 1"))


def merge_once(spark: Spark, quarantine: str, pending: str, schema: Struct, rows: RowsOf) -> None:
    """A run's discarded rows (a dead run's, by a settler; the run's own, into an Iceberg
    quarantine) into the quarantine unless it holds rows of that run (that batch), in one
    MERGE: two runs settling the same pending table at once cannot both append it (the second
    MERGE's commit fails Delta's and Iceberg's conflict check, or it finds the rows and inserts
    none). A failed MERGE after which the quarantine holds the run's rows was the other run's
    win; any other failure is raised. `schema`: the pending table's."""
    columns = [quote_identifier(f.name) for f in schema.fields]
    run_id = quote_identifier(RUN_ID_COLUMN)
    # the run's id as a literal too: the quarantine's scan can skip other runs' files (each
    # run writes files of its own)
    on = f"q.{run_id} = p.{run_id} and q.{run_id} = {sql_string(rows.invocation_id)}"
    if rows.tag is not None:  # a batch's: its invocation's other batches' rows are no match
        batch = quote_identifier(BATCH_COLUMN)
        on += f" and q.{batch} = p.{batch} and q.{batch} = {sql_string(rows.tag)}"
    merge = (
        f"merge into {quarantine} q using (select * from {pending} "
        f"where {PENDING_DISCARDED}) p on {on} "
        # never true (a match has the run's id); it keeps the MERGE a row-level operation,
        # whose commit Iceberg checks for conflicts (Spark turns an insert-only MERGE into
        # an unchecked append)
        f"when matched and q.{run_id} is null then delete "
        f"when not matched then insert ({', '.join(columns)}) "
        f"values ({', '.join('p.' + c for c in columns)})"
    )
    try:
        spark.run(merge)
    except DbtDatabaseError:
        if not holds(spark, quarantine, rows):
            raise
        logger.info(f"another run moved {pending} into {quarantine} meanwhile")
