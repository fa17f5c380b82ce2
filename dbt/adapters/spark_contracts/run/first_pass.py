"""A quarantining run's first pass (core/materialization/run_plan.first_pass): the load over the
model's output as it is, its SELECT failing the load's own job at the first row the contract
discards; and how a failed first pass is told from a failed load, by the table's own log."""

from typing import Any

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtDatabaseError, DbtRuntimeError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.contracts.quarantine import (
    DISCARDED_PROPERTY,
    discarded_last,
)
from dbt.adapters.spark_contracts.run.model_run import ModelRun
from dbt.adapters.spark_contracts.run.outcome_events import FIRST_PASS, Counted, PathTaken, RunBook
from dbt.adapters.spark_contracts.run.run_errors import FirstPassFailed
from dbt.adapters.spark_contracts.run.table_log import TableLog

logger = AdapterLogger("SparkContracts")


def prepare_first_pass(spark: Spark, book: RunBook, run: ModelRun) -> None:
    """The run begun on its first pass: the coerced output as a view, the discard metrics
    observed on it (where values are discarded), the guarded load SELECT as `run.source`."""
    first = run.first_pass
    assert first is not None
    book.begin(run.repairs)
    book.events.add(PathTaken(FIRST_PASS))
    base = first.coerced_view(run.view)
    coerced = first.coerced_select(run.view)
    if coerced:
        spark.run(f"create or replace temporary view {base} as {coerced}")
    if run.observed is not None and first.discard_metrics:
        book.state.observation = spark.observe(run.observed, base, first.discard_metrics)
    else:  # not observed (Thrift, Connect), or nothing that discards values: a first pass
        # that goes through discarded nothing, and one that fails begins the run again
        book.events.add(Counted(0, 0, first.clean_gate_counts()))
    spark.run(f"create or replace temporary view {run.source} as {first.select}")


def first_pass_load(spark: Spark, log: TableLog, run: ModelRun, sql: str) -> Any:
    """The first pass's load statement. A statement the engine failed (its guard met a
    discarded row, or anything else) is `FirstPassFailed` when the table's own log holds no
    commit of this run (its commit tag): then it wrote nothing, and the run takes its pending
    table. A commit of its in the log (an error reported after the commit), or a log that
    cannot be read, leaves the error as it is: the run fails, its load not repeated. A lost
    connection or a timeout is no engine's answer and stays as it is too."""
    try:
        return spark.run(sql)
    except DbtDatabaseError as exc:
        try:
            entries = log.entries(run.relation)
        except Exception as log_exc:
            logger.warning(
                f"{run.unique_id}: could not read the log of {run.relation} "
                f"after the first pass failed: {log_exc}"
            )
            raise exc from None
        if entries is None or any(e.tag == run.commit_tag for e in entries):
            raise
        raise FirstPassFailed(exc) from exc


def read_discarded_last(spark: Spark, quarantine: str) -> bool:
    """The quarantine's memory of the model's last quarantining run (`DISCARDED_PROPERTY`).
    A hint: a read that fails is logged, and the run tries its first pass."""
    try:
        rows = spark.fetch(f"show tblproperties {quarantine} ('{DISCARDED_PROPERTY}')")
    except DbtRuntimeError as exc:
        logger.warning(f"could not read {DISCARDED_PROPERTY} of {quarantine}: {exc}")
        return False
    return discarded_last({str(r.get("key")): str(r.get("value")) for r in rows})
