"""DB-API cursors over a SparkSession: the embedded one (`session`) or a Spark Connect one
(`connect`). Both also answer `schema_json(sql)`: a query's output schema, analysed, not run."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from dbt.adapters.spark.session import Connection, Cursor, SessionConnectionWrapper
from dbt_common.exceptions import DbtRuntimeError

SessionFactory = Callable[[], Any]


def _is_spark_error(exc: BaseException) -> bool:
    from pyspark.errors import PySparkException

    return isinstance(exc, PySparkException)


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
        try:
            self._df = self.session.sql(sql)
        except Exception as exc:
            if _is_spark_error(exc):
                raise DbtRuntimeError(str(exc)) from exc
            raise

    def fetchall(self) -> Optional[List[Any]]:
        try:
            return super().fetchall()
        except Exception as exc:
            if _is_spark_error(exc):
                raise DbtRuntimeError(str(exc)) from exc
            raise

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
        try:
            return json.loads(self.session.sql(sql).schema.json())
        except Exception as exc:
            if _is_spark_error(exc):
                raise DbtRuntimeError(str(exc)) from exc
            raise


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
