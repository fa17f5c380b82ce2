"""DB-API cursors over a SparkSession: the embedded one (`session`) or a Spark Connect one
(`connect`). Both also answer `schema_json(sql)`: a query's output schema, analysed, not run."""

from __future__ import annotations

import json
import logging
import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.session import Connection, Cursor, SessionConnectionWrapper

from dbt.adapters.spark_contracts.connection.errors import (
    SESSION_LEFT,
    CancelMark,
    QueryTimeoutError,
    spark_errors_as_dbt_errors,
)
from dbt.adapters.spark_contracts.core.settings.deadline import StatementDeadline

SessionFactory = Callable[[], Any]
logger = AdapterLogger("SparkContracts")
OBSERVATION_TIMEOUT_S = 10.0

# PySpark logs every failed statement as a JSON stack trace on stderr; dbt reports the error
# itself (once, readably), so these two loggers are quietened.
for _name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


class SparkSessionCursor(Cursor):
    """dbt-spark's session cursor, on a session built once instead of on every statement.

    `query_timeout` (seconds, embedded session only): a statement (its execute and the fetch
    of its rows) still running then has its Spark jobs cancelled and fails with
    QueryTimeoutError. The profile's `server_side_parameters` are the session's own conf (set
    when it is built): the cursor applies none."""

    def __init__(self, session_factory: SessionFactory, query_timeout: Optional[float] = None):
        super().__init__()
        self._session_factory = session_factory
        self._query_timeout = query_timeout
        self._started: Optional[float] = None

    @property
    def session(self) -> Any:
        return self._session_factory()

    def execute(self, sql: str, *parameters: Any) -> None:
        if parameters:
            sql = sql % parameters
        self._rows = None
        self._started = time.monotonic()
        with self._statement():
            self._df = self.session.sql(sql)

    def fetchall(self) -> Optional[List[Any]]:
        with self._statement():
            return super().fetchall()

    def fetchone(self) -> Any:
        with self._statement():
            return super().fetchone()

    @contextmanager
    def _statement(self) -> Iterator[None]:
        """Spark's errors as dbt's; with a `query_timeout`, the statement's Spark jobs carry a
        tag of their own, cancelled (interrupting their tasks) once the time since `execute`
        passes it. Job tags and interrupt-on-cancel are local properties of this thread."""
        if self._query_timeout is None or self._started is None:
            with spark_errors_as_dbt_errors():
                yield
            return
        context = self.session.sparkContext
        tag = f"dbt-spark-contracts-timeout-{uuid.uuid4().hex}"
        interrupt = context.getLocalProperty("spark.job.interruptOnCancel")
        context.addJobTag(tag)
        context.setInterruptOnCancel(True)
        remaining = self._query_timeout - (time.monotonic() - self._started)
        deadline = StatementDeadline(remaining, lambda: context.cancelJobsWithTag(tag))
        try:
            with deadline:
                with spark_errors_as_dbt_errors():
                    yield
        except Exception as exc:
            if deadline.fired:
                raise QueryTimeoutError(self._query_timeout, "session") from exc
            raise
        finally:
            context.removeJobTag(tag)
            context.setLocalProperty("spark.job.interruptOnCancel", interrupt)
            for error in deadline.cancel_errors:
                logger.debug(f"query_timeout: cancelling {tag} failed: {error}")
        if deadline.fired:  # nothing of it was a Spark job to cancel (or it ended just then)
            logger.debug(f"query_timeout of {self._query_timeout}s passed; the statement ended")

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

    def table_with_properties(self, table: str) -> Optional[Tuple[Dict[str, Any], Dict[str, str]]]:
        """A table's schema and the properties SHOW TBLPROPERTIES lists (unredacted), from one lookup
        in the table's catalog (`TableCatalog.loadTable`, what every statement on the table does
        first) on the embedded session; None over Spark Connect, which has no catalog handle
        (the caller reads the schema and SHOW TBLPROPERTIES)."""
        session = self.session
        if is_connect(session):
            return None
        with spark_errors_as_dbt_errors():
            return load_table(session, table)


def is_connect(session: Any) -> bool:
    """A Spark Connect session (no JVM in this process), not the embedded one."""
    return type(session).__module__.startswith("pyspark.sql.connect")


@contextmanager
def _catalog_table(session: Any, table: str) -> Iterator[Any]:
    """`table` loaded from its catalog in the embedded session's JVM (`TableCatalog.loadTable`).

    The name resolves as Spark resolves a multi-part table name: a first part that names a
    registered catalog (or the session catalog) picks it, otherwise the current catalog; a
    one-part name is in the current namespace. The session is the thread's active one meanwhile
    (a catalog reads its settings from the active session)."""
    jvm, jsession = session._jvm, session._jsparkSession
    sessions = getattr(jvm, "org.apache.spark.sql.classic.SparkSession")
    previous = sessions.getActiveSession()
    sessions.setActiveSession(jsession)
    try:
        state = jsession.sessionState()
        parts = state.sqlParser().parseMultipartIdentifier(table).mkString(_SEP).split(_SEP)
        manager = state.catalogManager()
        if len(parts) == 1:
            catalog, namespace = manager.currentCatalog(), list(manager.currentNamespace())
        elif parts[0].lower() == "spark_catalog" or manager.isCatalogRegistered(parts[0]):
            catalog, namespace = manager.catalog(parts[0]), parts[1:-1]
        else:
            catalog, namespace = manager.currentCatalog(), parts[:-1]
        names = session.sparkContext._gateway.new_array(jvm.java.lang.String, len(namespace))
        for i, part in enumerate(namespace):
            names[i] = part
        connector = jvm.org.apache.spark.sql.connector.catalog
        yield catalog.loadTable(connector.Identifier.of(names, parts[-1]))
    finally:
        if previous.isDefined():
            sessions.setActiveSession(previous.get())
        else:
            sessions.clearActiveSession()


def load_table(session: Any, table: str) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """(schema JSON, properties) of `table` from its catalog (`_catalog_table`). The properties
    leave out the reserved ones (provider, location, owner, ...) and a file-source table's
    `option.*`, as SHOW TBLPROPERTIES does, but are not redacted (SHOW TBLPROPERTIES hides
    values matching Spark's redaction patterns)."""
    jvm = session._jvm
    with _catalog_table(session, table) as loaded:
        mapper = jvm.com.fasterxml.jackson.databind.ObjectMapper()
        properties = json.loads(mapper.writeValueAsString(loaded.properties()))
        connector = jvm.org.apache.spark.sql.connector.catalog
        reserved = connector.CatalogV2Util.TABLE_RESERVED_PROPERTIES().mkString(_SEP).split(_SEP)
        if loaded.getClass().getSimpleName() == "V1Table":  # its storage options, as `option.*`
            reserved += [k for k in properties if k.startswith("option.")]
        schema = json.loads(loaded.schema().json())
    kept = {str(k): str(v) for k, v in properties.items() if k not in reserved}
    return schema, kept


_SEP = "\u0000"  # joins a Scala sequence of names into one py4j string (names hold no NUL)


class SparkSessionHandle(Connection):
    """dbt-spark's session connection, whose cursors all run on one session (the current one:
    a cursor follows the handle to a new session, `renew`)."""

    def __init__(
        self,
        session_factory: SessionFactory,
        query_timeout: Optional[float] = None,
        renew: Optional[SessionFactory] = None,
    ):
        super().__init__()
        self._session_factory = session_factory
        self.query_timeout = query_timeout
        self._renew = renew  # a new session like the first (Spark Connect), or None
        self._renewing = False  # the current session is left: the next use opens a new one
        self.left: List[Any] = []  # sessions left for a statement that may still run there
        self.settings: Dict[str, str] = {}  # what the wrapper's `set_conf` set in the current one

    def _session(self) -> Any:
        if self._renewing:  # until it opens, no statement runs anywhere (never in the old)
            assert self._renew is not None
            fresh = self._renew()
            try:
                for key, value in self.settings.items():  # those carried over (`renew`)
                    fresh.conf.set(key, value)
            except BaseException:
                self.left.append(fresh)  # stopped with the connection; the next use tries anew
                raise
            self._session_factory, self._renewing = (lambda: fresh), False
        return self._session_factory()

    def cursor(self) -> SparkSessionCursor:  # type: ignore[override]
        return SparkSessionCursor(self._session, self.query_timeout)

    def renew(self, carried: Sequence[str] = ()) -> bool:
        """Its statements go on in a new session, with the `settings` among `carried` set
        there too; the current one is left as it is (stopped with the connection). False where
        it has no way to make one. The new one is opened now; where that fails, it raises, and
        each later statement tries again first."""
        if self._renew is None:
            return False
        if not self._renewing:
            self.left.append(self._session_factory())
            self.settings = {k: v for k, v in self.settings.items() if k in carried}
            self._renewing = True
        self._session()
        return True

    def current(self) -> Optional[Any]:
        """The session statements run in now; None while the one to go on in is not open yet
        (`renew`): asking opens nothing."""
        return None if self._renewing else self._session_factory()

    def opened(self) -> List[Any]:
        """Every session it opened and has not stopped: those left, and the current one."""
        current = self.current()
        return [*self.left, *([] if current is None else [current])]


class SparkSessionConnectionWrapper(SessionConnectionWrapper, CancelMark):
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

    def table_with_properties(self, table: str) -> Optional[Tuple[Dict[str, Any], Dict[str, str]]]:
        """A deployed table's schema and properties in one catalog lookup (None: not here)."""
        return self.handle.cursor().table_with_properties(table)

    def set_conf(self, key: str, value: Optional[str]) -> None:
        """Set (None: unset) a SQL conf in this connection's own session."""
        conf = self.handle.cursor().session.conf
        if value is None:
            conf.unset(key)
            self.handle.settings.pop(key, None)
        else:
            conf.set(key, value)
            self.handle.settings[key] = value

    def get_conf(self, key: str) -> Optional[str]:
        return self.handle.cursor().session.conf.get(key, None)

    def leave_session(self, carried: Sequence[str] = ()) -> bool:
        """Spark Connect: later statements run in a new session of the server's (the profile's
        settings set in it, and the settings `carried` that `set_conf` set in the old one set
        again: the old one is not asked), the old one left untouched for a statement that may
        still read its settings. The embedded session: nothing to do (a failed statement there
        is over)."""
        if not is_connect(self.handle.cursor().session) or not self.handle.renew(carried):
            return False
        logger.debug(SESSION_LEFT)
        self._cursor = None  # (a cursor follows the handle anyway)
        return True

    def close(self) -> None:
        """dbt closes a thread's connection at the end of a command: a Connect session is
        stopped then (its client threads would otherwise keep the process from exiting), and
        any it left (`leave_session`); the embedded session stays, shared by the process."""
        super().close()
        for left in self.handle.opened():
            if is_connect(left):
                try:
                    left.stop()
                except Exception as exc:  # a session left on a server gone: nothing to stop
                    logger.debug(f"could not stop a Spark Connect session: {exc}")
        self.handle.left.clear()

    def cancel(self) -> None:
        """Interrupt every operation this connection's own session runs (dbt-spark's session
        wrapper cannot cancel). Other connections have sessions of their own. dbt cancels from
        its main thread: none while the session is renewed (no statement of the node's runs
        then; opening one here would race the node's thread for it)."""
        session = self.handle.current()
        if session is None:
            return
        interrupted = session.interruptAll()
        logger.debug(f"Interrupted operations: {interrupted}")

    def can_observe(self) -> bool:
        """A Connect client does not receive metrics observed in a statement it sends as SQL."""
        return not is_connect(self.handle.cursor().session)

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
