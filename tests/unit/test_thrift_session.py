"""A thrift connection's session left for a write Spark gave no answer for (connection/
thrift.py: `ContractsPyhiveConnectionWrapper.leave_session`). The Thrift server answers a cancel
(Ctrl-C) at once, while the statement may still commit: unsetting the transaction id in that
session then would let it commit with none, which no marker fences off. So later statements run
in a new session, with the node's commit tag the wrapper itself set copied over (the old session
is never asked), no statement runs in the old one again (where the new one cannot open, each
later statement tries again first), and both are closed with the connection. Fake PyHive
connections: no Spark."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, List, Optional

import pytest
from TCLIService.ttypes import TOperationState

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
    assert [c.closed for c in server.opened] == [True, True]


def test_a_connection_with_no_way_to_renew_stays_in_its_session():
    server = Server()
    handle = wrapper(server, renew=False)
    assert not handle.leave_session((TAG,))
    run(handle, "select 1")
    assert server.opened[0].sent == ["select 1"] and len(server.opened) == 1
