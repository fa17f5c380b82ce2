"""The SQL confs a run's load runs under (core/materialization/write_path.load_settings: Delta's
autoMerge for an evolving append, a partitioned model's dynamic partition overwrite), set in the
node's own session right before the load's statement (inside the load's step: a failure there is
the load's, undone as one) and put back once the whole run has succeeded. After a failure they
are left as they are: the node's session ends with the node, and a load Spark gave no answer
for may still be planned there, where a conf put back would change what it does (a late
`INSERT OVERWRITE` under the static mode replaces every partition of the table)."""

from typing import List, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import Spark

logger = AdapterLogger("SparkContracts")


class LoadSettings:
    """One run's load settings in one session: `set` before each load statement (a first pass
    and the pending path after it both load; what each conf was is read once, before the
    first), `put_back` after the run has succeeded."""

    def __init__(self, spark: Spark, settings: Sequence[Tuple[str, str]] = ()) -> None:
        self.spark, self.settings = spark, tuple(settings)
        self.previous: Optional[List[Tuple[str, Optional[str]]]] = None

    def set(self) -> None:
        if self.previous is None:
            self.previous = [(key, self.spark.get_conf(key)) for key, _ in self.settings]
        for key, value in self.settings:
            self.spark.set_conf(key, value)

    def put_back(self, unique_id: str) -> None:
        """Each setting as it was; one that cannot be put back is logged, not raised (the load
        is in, and the session ends with the node)."""
        for key, value in self.previous or ():
            try:
                self.spark.set_conf(key, value)
            except Exception as exc:
                logger.warning(f"{unique_id}: could not put {key} back after the run: {exc}")
