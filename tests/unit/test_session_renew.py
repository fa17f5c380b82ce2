"""A connection's session left for a write Spark gave no answer for (connection/cursor.py:
`SparkSessionHandle.renew`): its statements go on in a new session, a cursor made before
follows, and where the new one cannot be opened no statement runs in the old one again (each
tries a new session first). Every session opened is stopped with the connection. Fake sessions:
no Spark."""

from __future__ import annotations

from typing import Any, List

import pytest

from dbt.adapters.spark_contracts.connection.cursor import SparkSessionHandle


class Server:
    """Makes numbered fake sessions; `down`: opening one fails."""

    def __init__(self) -> None:
        self.made: List[str] = []
        self.down = False

    def open(self) -> Any:
        if self.down:
            raise ConnectionError("server out of reach")
        self.made.append(f"s{len(self.made)}")
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
