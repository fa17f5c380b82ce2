"""DB-API cursors over a SparkSession: the embedded one (`session`) or a Spark Connect one
(`connect`). Both also answer `schema_json(sql)`: a query's output schema, analysed, not run."""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.session import Connection, Cursor, SessionConnectionWrapper

from dbt.adapters.spark_contracts.errors import spark_errors_as_dbt_errors

SessionFactory = Callable[[], Any]
logger = AdapterLogger("SparkContracts")
OBSERVATION_TIMEOUT_S = 10.0

# PySpark logs every failed statement as a JSON stack trace on stderr; dbt reports the error
# itself (once, readably), so these two loggers are quietened.
for _name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


class SparkSessionCursor(Cursor):
    """dbt-spark's session cursor, on a session built once instead of on every statement."""

    def __init__(self, session_factory: SessionFactory, server_side_parameters: Dict[str, str]):
        super().__init__(server_side_parameters=server_side_parameters)
        self._session_factory = session_factory

    @property
    def session(self) -> Any:
        return self._session_factory()

    def execute(self, sql: str, *parameters: Any) -> None:
        if parameters:
            sql = sql % parameters
        self._rows = None
        with spark_errors_as_dbt_errors():
            self._df = self.session.sql(sql)

    def fetchall(self) -> Optional[List[Any]]:
        with spark_errors_as_dbt_errors():
            return super().fetchall()

    @property
    def description(self) -> Sequence[Tuple[str, Any, None, None, None, None, bool]]:
        if self._df is None:
            return []
        return [
            (f.name, f.dataType.simpleString(), None, None, None, None, f.nullable)
            for f in self._df.schema.fields
        ]

    def schema_json(self, sql: str) -> Dict[str, Any]:
        """The output schema of `sql` as Spark's JSON schema; the query is analysed, not run."""
        with spark_errors_as_dbt_errors():
            return json.loads(self.session.sql(sql).schema.json())

    def relation_schema(self, relation: str) -> Dict[str, Any]:
        """The schema of a table or view, from `spark.table(name)`: nothing is parsed as SQL
        (over Spark Connect one AnalyzePlan request)."""
        with spark_errors_as_dbt_errors():
            return json.loads(self.session.table(relation).schema.json())


class SparkSessionHandle(Connection):
    def __init__(self, session_factory: SessionFactory, server_side_parameters: Dict[str, str]):
        super().__init__(server_side_parameters=server_side_parameters)
        self._session_factory = session_factory

    def cursor(self) -> SparkSessionCursor:  # type: ignore[override]
        return SparkSessionCursor(self._session_factory, dict(self.server_side_parameters))


class SparkSessionConnectionWrapper(SessionConnectionWrapper):
    """dbt-spark's wrapper, plus schema analysis for the planner."""

    handle: SparkSessionHandle  # type: ignore[assignment]
    _cursor: Optional[SparkSessionCursor]  # type: ignore[assignment]

    def schema_json(self, sql: str) -> Dict[str, Any]:
        cursor = self._cursor or self.handle.cursor()
        return cursor.schema_json(sql)

    def relation_schema(self, relation: str, describable: bool = True) -> Dict[str, Any]:
        """The schema of a table or view (`describable` matters over thrift only)."""
        cursor = self._cursor or self.handle.cursor()
        return cursor.relation_schema(relation)

    def set_conf(self, key: str, value: Optional[str]) -> None:
        """Set (None: unset) a SQL conf in this connection's own session."""
        conf = self.handle.cursor().session.conf
        if value is None:
            conf.unset(key)
        else:
            conf.set(key, value)

    def get_conf(self, key: str) -> Optional[str]:
        return self.handle.cursor().session.conf.get(key, None)

    def close(self) -> None:
        """dbt closes a thread's connection at the end of a command: a Connect session is
        stopped then (its client threads would otherwise keep the process from exiting); the
        embedded session stays, shared by the process."""
        super().close()
        session = self.handle.cursor().session
        if type(session).__module__.startswith("pyspark.sql.connect"):
            session.stop()

    def cancel(self) -> None:
        """Interrupt every operation this connection's own session runs (dbt-spark's session
        wrapper cannot cancel). Other connections have sessions of their own."""
        session = self.handle.cursor().session
        interrupted = session.interruptAll()
        logger.debug(f"Interrupted operations: {interrupted}")

    def can_observe(self) -> bool:
        """A Connect client does not receive metrics observed in a statement it sends as SQL."""
        return not type(self.handle.cursor().session).__module__.startswith("pyspark.sql.connect")

    def observe(
        self, view: str, source: str, metrics: Tuple[Tuple[str, str], ...]
    ) -> Callable[[], Optional[Dict[str, Any]]]:
        """Temporary view `view` over `source`, observing `metrics` (name, SQL aggregate) in
        the first statement that reads it; the returned call gives them, or None if no
        statement did."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        session = self.handle.cursor().session
        observation = Observation(view)
        columns = [F.expr(expr).alias(name) for name, expr in metrics]
        session.table(source).observe(observation, *columns).createOrReplaceTempView(view)
        names = [name for name, _ in metrics]
        return lambda: _observed(observation, names)

    @classmethod
    def _fix_binding(cls, value: Any) -> Any:
        """dbt-spark renders None as the string 'None' and leaves quotes unescaped; fix both."""
        if value is None:
            return "NULL"
        if isinstance(value, str):
            escaped = value.replace("\\", "\\\\").replace("'", "\\'")
            return f"'{escaped}'"
        return super()._fix_binding(value)

    def fetchone(self) -> Any:
        assert self._cursor, "Cursor not available"
        return self._cursor.fetchone()


def _observed(
    observation: Any, names: List[str], timeout: float = OBSERVATION_TIMEOUT_S
) -> Optional[Dict[str, Any]]:
    """The observation's metrics once Spark's listener has delivered them (asynchronously, just
    after the statement ends); None when no statement ran the observed plan. Read by position:
    after a Delta CTAS the row carries no schema, which pyspark's `Observation.get` needs."""
    future = observation._jo.future() if observation._jo is not None else None
    deadline = time.monotonic() + timeout
    while future is not None and not future.isCompleted():
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)
    if future is None:
        return None
    row = observation._jo.getRow()
    if row.size() != len(names):  # a statement that read the plan without running it
        return None
    return {name: row.get(i) for i, name in enumerate(names)}
