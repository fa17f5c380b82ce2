"""A thrift connection's session left for a write Spark gave no answer for (connection/
thrift.py: `ContractsPyhiveConnectionWrapper.leave_session`). The Thrift server answers a cancel
(Ctrl-C) at once, while the statement may still commit: unsetting the transaction id in that
session then would let it commit with none, which no marker fences off. So later statements run
in a new session, with the node's commit tag the wrapper itself set copied over (the old session
is never asked), no statement runs in the old one again (where the new one cannot open, each
later statement tries again first), and both are closed with the connection. Fake PyHive
connections: no Spark."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any, List, Optional

import pytest
from TCLIService.ttypes import TOperationState

from dbt.adapters.spark_contracts.connection.closes import BackgroundCloses
from dbt.adapters.spark_contracts.connection.session_sql import set_sql
from dbt.adapters.spark_contracts.connection.thrift import ContractsPyhiveConnectionWrapper

TAG = "spark.databricks.delta.commitInfo.userMetadata"
TXN = "spark.databricks.delta.write.txnAppId"


class FakeCursor:
    def __init__(self, conn: FakePyhive) -> None:
        self.conn = conn

    def execute(self, sql: str, bindings: Any = None, async_: bool = False) -> None:
        if self.conn.closed:
            raise AssertionError(f"a statement in a closed session: {sql}")
        self.conn.sent.append(sql)

    def poll(self) -> Any:
        return SimpleNamespace(operationState=TOperationState.FINISHED_STATE, errorMessage=None)

    def fetchall(self) -> List[Any]:
        return []

    def close(self) -> None:
        pass


class FakePyhive:
    """One PyHive connection: one server session, the statements it got."""

    def __init__(self, name: str) -> None:
        self.name, self.sent, self.closed = name, [], False

    def cursor(self) -> FakeCursor:
        return FakeCursor(self)

    def close(self) -> None:
        self.closed = True


class Server:
    def __init__(self) -> None:
        self.opened: List[FakePyhive] = []
        self.down = False

    def open(self) -> FakePyhive:
        if self.down:
            raise ConnectionError("server out of reach")
        self.opened.append(FakePyhive(f"s{len(self.opened)}"))
        return self.opened[-1]


def wrapper(server: Server, renew: Optional[bool] = True) -> ContractsPyhiveConnectionWrapper:
    handle = ContractsPyhiveConnectionWrapper(server.open(), poll_interval=0)
    handle.closes = BackgroundCloses()  # its closes apart from any other test's
    if renew:
        handle.renew = server.open
    return handle


def run(handle: ContractsPyhiveConnectionWrapper, sql: str) -> None:
    handle.cursor()
    handle.execute(sql)


def test_after_leaving_statements_run_in_a_new_session_with_the_tag_and_not_the_txn_id():
    server = Server()
    handle = wrapper(server)
    handle.set_conf(TAG, "tag-1")
    handle.set_conf(TXN, "app-1")
    run(handle, "insert into t select 1")
    old = server.opened[0]
    sent_before = list(old.sent)
    assert handle.leave_session((TAG,))
    run(handle, "restore table t to version as of 3")
    new = server.opened[1]
    assert old.sent == sent_before  # nothing more in the old one: the txn id stays set there
    assert not old.closed  # left open for the statement that may still run there
    assert new.sent == [set_sql(TAG, "tag-1"), "restore table t to version as of 3"]


def test_where_the_new_session_cannot_open_no_statement_runs_in_the_old_one():
    server = Server()
    handle = wrapper(server)
    handle.set_conf(TAG, "tag-1")
    old = server.opened[0]
    sent_before = list(old.sent)
    server.down = True
    with pytest.raises(ConnectionError):
        handle.leave_session((TAG,))
    with pytest.raises(ConnectionError):  # tried again first, and refused
        run(handle, "select 1")
    assert old.sent == sent_before
    server.down = False
    run(handle, "select 1")
    assert server.opened[1].sent == [set_sql(TAG, "tag-1"), "select 1"]


def test_every_session_opened_is_closed_with_the_connection():
    server = Server()
    handle = wrapper(server)
    handle.leave_session(())
    run(handle, "select 1")
    handle.close()
    assert handle.closes.finish(5) is None  # the sessions close on threads of their own
    assert [c.closed for c in server.opened] == [True, True]


def test_a_connection_with_no_way_to_renew_stays_in_its_session():
    server = Server()
    handle = wrapper(server, renew=False)
    assert not handle.leave_session((TAG,))
    run(handle, "select 1")
    assert server.opened[0].sent == ["select 1"] and len(server.opened) == 1


class RefusingServer(Server):
    """Opens sessions whose first `SET` fails while `refuse_set` is on."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse_set = False

    def open(self) -> FakePyhive:
        conn = super().open()
        if self.refuse_set:
            conn.cursor = lambda: RefusingCursor(conn)  # type: ignore[method-assign]
        return conn


class RefusingCursor(FakeCursor):
    def execute(self, sql: str, bindings: Any = None, async_: bool = False) -> None:
        raise ConnectionError("the server refused the setting")


def test_a_new_session_whose_settings_fail_is_closed_and_tried_again():
    """The commit tag is never lost: a new session in which it could not be set is closed,
    not used, and the next statement opens another."""
    server = RefusingServer()
    handle = wrapper(server)
    handle.set_conf(TAG, "tag-1")
    server.refuse_set = True
    with pytest.raises(ConnectionError):
        handle.leave_session((TAG,))
    assert server.opened[1].closed
    server.refuse_set = False
    run(handle, "select 1")
    assert server.opened[2].sent == [set_sql(TAG, "tag-1"), "select 1"]
    assert server.opened[0].sent == [set_sql(TAG, "tag-1")]  # never anything more


def test_closing_while_renewing_closes_each_session_once():
    server = Server()
    handle = wrapper(server)
    closes: List[str] = []
    server.down = True
    with pytest.raises(ConnectionError):
        handle.leave_session(())
    for conn in server.opened:
        conn.close = lambda c=conn: closes.append(c.name)  # type: ignore[method-assign]
    handle.close()
    assert handle.closes.finish(5) is None  # the sessions close on threads of their own
    assert closes == ["s0"]


def test_a_cancel_while_renewing_cancels_nothing():
    server = Server()
    handle = wrapper(server)
    cancelled: List[str] = []
    run(handle, "insert into t select 1")
    handle._cursor.cancel = lambda: cancelled.append("old")  # type: ignore[union-attr]
    server.down = True
    with pytest.raises(ConnectionError):
        handle.leave_session(())
    handle.cancel()
    assert cancelled == []


def test_the_manager_renews_a_thrift_connection_as_it_opened_the_first(monkeypatch):
    """`SparkContractsConnectionManager.open` wires `renew` to open another PyHive connection
    the same way (the profile's settings SET there too, the client serialized), and leaves the
    dbt connection it opened with the first alone."""
    from dbt.adapters.contracts.connection import Connection, ConnectionState
    from dbt.adapters.spark.connections import PyhiveConnectionWrapper, SparkConnectionManager

    from dbt.adapters.spark_contracts.connection import connections as manager_module
    from dbt.adapters.spark_contracts.connection.credentials import SparkContractsCredentials
    from dbt.adapters.spark_contracts.connection.thrift import SerializedThriftClient

    server = Server()

    def open_pyhive(cls, connection):
        conn = server.open()
        conn._client = object()  # type: ignore[attr-defined]
        connection.handle = PyhiveConnectionWrapper(conn, poll_interval=0)
        connection.state = ConnectionState.OPEN
        return connection

    monkeypatch.setattr(SparkConnectionManager, "open", classmethod(open_pyhive))
    creds = SparkContractsCredentials(
        method="thrift",
        host="localhost",
        schema="s",
        server_side_parameters={"spark.sql.shuffle.partitions": "3"},
    )
    connection = Connection(type="spark_contracts", name="m", credentials=creds)
    opened = manager_module.SparkContractsConnectionManager.open(connection)
    handle = opened.handle
    first = handle.handle
    assert handle.leave_session(())
    assert (
        opened.handle is handle and handle.handle is server.opened[1] and first is server.opened[0]
    )
    assert opened.credentials is creds and opened.state == ConnectionState.OPEN
    for conn in server.opened:  # each session got the profile's setting, on a serialized client
        assert conn.sent == [set_sql("spark.sql.shuffle.partitions", "3")], conn.sent
        assert isinstance(conn._client, SerializedThriftClient)  # type: ignore[attr-defined]


def test_a_node_does_not_wait_for_the_servers_close_and_the_run_waits_for_it_at_its_end():
    """The server's close of a session can take a tenth of a second and more under load: the
    connection's close returns at once, and `finish` (the adapter's `cleanup_connections`,
    and at exit) waits until every session is closed."""
    server = Server()
    handle = wrapper(server)
    handle.leave_session(())
    release = threading.Event()
    closed: List[str] = []

    def slow_close(conn: FakePyhive) -> None:
        release.wait(5)
        closed.append(conn.name)

    for conn in server.opened:
        conn.close = lambda c=conn: slow_close(c)  # type: ignore[method-assign]
    handle.close()
    assert closed == []  # returned while the server still closes
    threading.Timer(0.3, release.set).start()
    assert handle.closes.finish(5) is None
    assert sorted(closed) == ["s0", "s1"]


def test_a_close_that_hangs_is_reported_once_and_not_waited_for_again():
    server = Server()
    handle = wrapper(server)
    release = threading.Event()
    server.opened[0].close = lambda: release.wait(10)  # type: ignore[method-assign]
    handle.close()
    told = handle.closes.finish(0.2)
    assert told is not None and "1 Thrift session(s) still closing" in told, told
    started = time.monotonic()
    assert handle.closes.finish(5) is None  # reported: the next run's end does not wait again
    assert time.monotonic() - started < 1
    release.set()


def test_a_refused_close_is_reported_and_every_other_session_still_closed():
    """A server's error answer to a close (not a server gone) is no longer dbt's to report
    (the close runs after the node): it is logged and counted, and the sessions left are
    still asked to close."""
    server = Server()
    handle = wrapper(server)
    handle.leave_session(())

    def refused() -> None:
        raise RuntimeError("Invalid SessionHandle")

    server.opened[1].close = refused  # type: ignore[method-assign]
    handle.close()
    told = handle.closes.finish(5)
    assert told is not None and "1 Thrift connection close(s) failed" in told, told
    assert server.opened[0].closed  # the session left, closed all the same
    assert handle.closes.finish(5) is None  # told once


def test_a_cursor_whose_close_is_refused_still_has_its_session_closed():
    """The close of the node's last statement (CloseOperation) refused: the session is still
    asked to close (CloseSession), and the failure is counted."""
    server = Server()
    handle = wrapper(server)
    run(handle, "select 1")

    def refused() -> None:
        raise RuntimeError("Invalid OperationHandle")

    handle._cursor.close = refused  # type: ignore[union-attr]
    handle.close()
    told = handle.closes.finish(5)
    assert told is not None and "1 Thrift connection close(s) failed" in told, told
    assert server.opened[0].closed
