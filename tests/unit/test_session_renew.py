"""A connection's session left for a write Spark gave no answer for (connection/cursor.py:
`SparkSessionHandle.renew`): its statements go on in a new session, a cursor made before
follows, and where the new one cannot be opened no statement runs in the old one again (each
tries a new session first). Every session opened is stopped with the connection. Fake sessions:
no Spark."""

from __future__ import annotations

from typing import Any, Callable, List, Optional

import pytest

from dbt.adapters.spark_contracts.connection.cursor import SparkSessionHandle


class Server:
    """Opens fake sessions (`make`'s, else numbered names); `down`: opening one fails."""

    def __init__(self, make: Optional[Callable[[], Any]] = None) -> None:
        self.made: List[Any] = []
        self.down = False
        self.make = make

    def open(self) -> Any:
        if self.down:
            raise ConnectionError("server out of reach")
        self.made.append(self.make() if self.make else f"s{len(self.made)}")
        return self.made[-1]


def test_statements_go_on_in_a_new_session_and_a_cursor_made_before_follows():
    server = Server()
    first = server.open()
    handle = SparkSessionHandle(lambda: first, renew=server.open)
    cursor = handle.cursor()
    assert cursor.session == "s0"
    assert handle.renew()
    assert cursor.session == "s1" and handle.cursor().session == "s1"
    assert handle.left == ["s0"] and handle.opened() == ["s0", "s1"]


def test_where_no_new_session_opens_no_statement_runs_in_the_old_one():
    server = Server()
    first = server.open()
    handle = SparkSessionHandle(lambda: first, renew=server.open)
    cursor = handle.cursor()
    server.down = True
    with pytest.raises(ConnectionError):
        handle.renew()
    with pytest.raises(ConnectionError):  # tried again, and refused: never the old session
        _ = cursor.session
    assert handle.opened() == ["s0"]  # to stop with the connection; none opened since
    server.down = False
    assert cursor.session == "s1" and handle.left == ["s0"]
    assert handle.renew() and handle.left == ["s0", "s1"]  # left again: both kept to stop


def test_a_handle_with_no_way_to_renew_stays_on_its_session():
    handle = SparkSessionHandle(lambda: "embedded")
    assert not handle.renew()
    assert handle.cursor().session == "embedded" and handle.left == []


class Conf:
    def __init__(self) -> None:
        self.values: dict = {}

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)

    def get(self, key: str, default: Any = None) -> Any:
        raise AssertionError("the session left is asked nothing")


class Session:
    def __init__(self) -> None:
        self.conf = Conf()


def test_the_settings_carried_are_set_in_the_new_session_and_the_others_are_not():
    server = Server(Session)
    server.down = True
    first = Session()
    handle = SparkSessionHandle(lambda: first, renew=server.open)
    handle.settings = {"tag": "t-1", "txn": "app-1"}  # as the wrapper's set_conf records them
    with pytest.raises(ConnectionError):
        handle.renew(("tag",))
    server.down = False
    assert server.made == []  # nothing opened while it was down
    fresh = handle.cursor().session  # opened on the next statement
    assert server.made == [fresh]
    assert fresh.conf.values == {"tag": "t-1"} and handle.settings == {"tag": "t-1"}


class AnsweringConf(Conf):
    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def test_the_connect_wrapper_carries_what_it_set_and_never_asks_the_session_left(monkeypatch):
    """`SparkSessionConnectionWrapper.leave_session` over a (fake) Connect session: the node's
    tag, set through the wrapper, is set in the new session; the transaction id is not; the
    old session keeps both and is asked nothing after."""
    from dbt.adapters.spark_contracts.connection import cursor as cursor_module

    monkeypatch.setattr(cursor_module, "is_connect", lambda session: True)
    opened: List[Session] = []

    def open_one() -> Session:
        opened.append(Session())
        opened[-1].conf = AnsweringConf()
        return opened[-1]

    first = open_one()
    wrapper = cursor_module.SparkSessionConnectionWrapper(
        SparkSessionHandle(lambda: first, renew=open_one)
    )
    wrapper.set_conf("tag", "t-1")
    wrapper.set_conf("txn", "app-1")
    first.conf.get = Conf.get.__get__(first.conf)  # type: ignore[method-assign]  # asked nothing
    assert wrapper.leave_session(("tag",))
    assert opened[1].conf.values == {"tag": "t-1"}
    assert first.conf.values == {"tag": "t-1", "txn": "app-1"}
    assert wrapper.handle.cursor().session is opened[1]


class Interruptible(Session):
    def __init__(self) -> None:
        super().__init__()
        self.interrupted = 0

    def interruptAll(self) -> List[str]:  # noqa: N802 (pyspark's name)
        self.interrupted += 1
        return ["op-1"]


def test_a_cancel_while_the_session_is_renewed_opens_none_and_interrupts_none(monkeypatch):
    """dbt cancels from its main thread. While the node's thread has left its session and the
    new one is not open yet, a cancel neither opens one (it would race the node's thread for
    it, and leak one) nor interrupts the session left (its write may still commit there); once
    the new one is open, a cancel interrupts it."""
    from dbt.adapters.spark_contracts.connection import cursor as cursor_module

    monkeypatch.setattr(cursor_module, "is_connect", lambda session: True)
    server = Server(Interruptible)
    opened = server.made
    first = server.open()
    wrapper = cursor_module.SparkSessionConnectionWrapper(
        SparkSessionHandle(lambda: first, renew=server.open)
    )
    wrapper.cancel()
    assert first.interrupted == 1  # the control: a cancel interrupts the session in use
    server.down = True
    with pytest.raises(ConnectionError):
        wrapper.leave_session()
    wrapper.cancel()
    assert len(opened) == 1 and first.interrupted == 1  # nothing opened, the left one untouched
    assert wrapper.handle.opened() == [first]
    server.down = False
    assert wrapper.handle.cursor().session is opened[1]  # the node's next statement opens it
    wrapper.cancel()
    assert opened[1].interrupted == 1 and first.interrupted == 1
