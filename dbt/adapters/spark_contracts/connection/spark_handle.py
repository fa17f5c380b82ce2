"""What a run needs from a connection (the `Spark` protocol), and that protocol over the
adapter's thread connection (every method alike)."""

from __future__ import annotations

import os
import socket
from contextlib import contextmanager
from typing import (
    Any,
    Callable,
    ContextManager,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
)

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.core.recovery.pending import SESSION_ENDPOINT, Application
from dbt.adapters.spark_contracts.core.schema.parse import from_spark_json
from dbt.adapters.spark_contracts.core.schema.types import Struct

logger = AdapterLogger("SparkContracts")

Observed = Callable[[], Optional[Dict[str, Any]]]  # the observed metrics; None if never seen


class Spark(Protocol):
    """What a run needs from the dbt connection of its thread."""

    def fetch(self, sql: str) -> List[Dict[str, Any]]: ...

    def run(self, sql: str) -> Any: ...

    def schema(self, sql: str) -> Struct: ...

    def relation_schema(self, relation: str, describable: bool) -> Struct:
        """A table's or view's schema; `describable`: a temporary view or v1 table (over
        thrift one `DESCRIBE ... AS JSON`; a Delta or Iceberg table needs a view first)."""
        ...

    def deployed(
        self, table: str, describable: bool, schema: bool = True
    ) -> Tuple[Optional[Struct], Dict[str, str]]:
        """A table's schema and its properties (as SHOW TBLPROPERTIES lists them); `schema`
        False: the schema None where the connection reads it more cheaply beside another
        relation's (`relation_schemas`), else read now too."""
        ...

    def relation_schemas(self, relations: Sequence[str]) -> List[Struct]:
        """The schemas of several tables or views, in one read where the connection can
        (over thrift: two statements, however many relations)."""
        ...

    def set_conf(self, key: str, value: Optional[str]) -> None: ...

    def get_conf(self, key: str) -> Optional[str]: ...

    def leave_session(self, carried: Sequence[str] = ()) -> bool:
        """The session this connection's statements ran in left as it is, for a statement that
        may still read its settings on the server (a write Spark gave no answer for): the
        connection's next statements run in a new session, with the settings `carried` (the
        node's commit tag) that the connection set there set again. False where the method
        cannot, or need not (the embedded session: its statement is over once it failed)."""
        ...

    def application(self) -> Application:
        """Where this connection's statements run (core/recovery/pending.Application)."""
        ...

    def can_observe(self) -> bool:
        """Metrics observed while a statement runs reach this process (classic session)."""
        ...

    def runs_here(self) -> bool:
        """Statements run in this process's own Spark (method session): a call that has
        returned, answered or not, leaves nothing of its statement running."""
        ...

    def observe(self, view: str, source: str, metrics: Tuple[Tuple[str, str], ...]) -> Observed:
        """Define temporary view `view` as `source`, observing `metrics` (name, aggregate) in
        whichever statement reads it first."""
        ...

    def own_connection(self, name: str) -> ContextManager[Spark]:
        """The same as a connection of the calling thread's own (for a background thread)."""
        ...


def from_json(schema_json: Mapping[str, Any]) -> Struct:
    parsed = from_spark_json(dict(schema_json))
    assert isinstance(parsed, Struct)
    return parsed


class _ConnectionSpark:
    """The thread's dbt connection as the run needs it (`run.Spark`)."""

    def __init__(self, adapter: Any) -> None:
        self._adapter = adapter

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        _, table = self._adapter.execute(sql, fetch=True)
        return [dict(zip(table.column_names, row.values(), strict=True)) for row in table.rows]

    def run(self, sql: str) -> Any:
        response, _ = self._adapter.execute(sql)
        return response

    def schema(self, sql: str) -> Any:
        return from_json(self._adapter.schema_json(sql))

    def relation_schema(self, relation: str, describable: bool) -> Any:
        return from_json(self._adapter.relation_schema_json(relation, describable))

    def deployed(
        self, table: str, describable: bool, schema: bool = True
    ) -> Tuple[Optional[Struct], Dict[str, str]]:
        """One catalog lookup on the embedded session; SHOW TBLPROPERTIES and the schema read
        over thrift and Spark Connect (over thrift, with `schema` False, the schema is left
        to be read beside the model's view: `relation_schemas`)."""
        handle = self._handle()
        if hasattr(handle, "table_with_properties"):
            with self._adapter.connections.exception_handler(f"-- load table {table}"):
                loaded = handle.table_with_properties(table)
            if loaded is not None:
                logger.debug(f"Read the schema and properties of {table} from its catalog")
                return from_json(loaded[0]), loaded[1]
        listed = self._adapter._listed_properties(table)
        if not schema and hasattr(handle, "relation_schemas"):
            return None, listed
        return self.relation_schema(table, describable), listed

    def relation_schemas(self, relations: Sequence[str]) -> List[Struct]:
        """Over thrift, one read of them all (the connection's `relation_schemas`); else one
        read each."""
        handle = self._handle()
        if not hasattr(handle, "relation_schemas"):
            return [self.relation_schema(r, False) for r in relations]
        with self._adapter.connections.exception_handler(f"-- schemas of {', '.join(relations)}"):
            return [from_json(s) for s in handle.relation_schemas(list(relations))]

    def _handle(self) -> Any:
        return self._adapter.connections.get_thread_connection().handle

    def set_conf(self, key: str, value: Optional[str]) -> None:
        handle = self._handle()
        if hasattr(handle, "set_conf"):
            with self._adapter.connections.exception_handler(f"set {key}"):
                handle.set_conf(key, value)

    def get_conf(self, key: str) -> Optional[str]:
        handle = self._handle()
        if not hasattr(handle, "get_conf"):
            return None
        with self._adapter.connections.exception_handler(f"get {key}"):
            return handle.get_conf(key)

    def leave_session(self, carried: Sequence[str] = ()) -> bool:
        handle = self._handle()
        if not hasattr(handle, "leave_session"):
            return False
        with self._adapter.connections.exception_handler("a new session"):
            return bool(handle.leave_session(carried))

    def application(self) -> Application:
        """Where this connection's statements run (core/recovery/pending.Application): this process's
        embedded session, or the server the profile names, with its Spark application id."""
        credentials = self._adapter.config.credentials
        if self.runs_here():
            endpoint = f"{SESSION_ENDPOINT}{socket.gethostname()}/{os.getpid()}"
        else:
            method = str(credentials.method)
            endpoint = f"{method}://{credentials.host}:{getattr(credentials, 'port', '')}"
        try:
            app_id = self.get_conf("spark.app.id") or ""
        except DbtDatabaseError as exc:  # unknown: a table it records is never provably gone
            logger.debug(f"could not read spark.app.id: {exc}")
            app_id = ""
        return Application(endpoint, app_id)

    def runs_here(self) -> bool:
        """The profile's method is `session` (`application` names this process then)."""
        return (
            str(getattr(self._adapter.config.credentials, "method", "") or "session") == "session"
        )

    def can_observe(self) -> bool:
        handle = self._handle()
        return bool(getattr(handle, "can_observe", lambda: False)())

    def observe(self, view: str, source: str, metrics: Tuple[Tuple[str, str], ...]) -> Any:
        return self._handle().observe(view, source, metrics)

    @contextmanager
    def own_connection(self, name: str) -> Iterator[_ConnectionSpark]:
        """A connection of the calling thread's own, released at the end (dbt opens one per
        thread: a new session on the embedded method, a new server session over the wire)."""
        with self._adapter.connection_named(name):
            yield _ConnectionSpark(self._adapter)


def answers(spark: Spark, sql: str) -> bool:
    """`sql` (a read) runs without a database error on `spark`: a table that can be read, a
    catalog that is configured."""
    try:
        spark.fetch(sql)
    except DbtDatabaseError:
        return False
    return True


def process_running(pid: int) -> bool:
    """A process of that id runs on this host (one we may not signal runs too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
