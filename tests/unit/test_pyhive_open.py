"""connection/pyhive_open.py: which PyHive connection `hive.connect` makes, per thread (the
thrift functional test, test_thrift_statements.py, shows the `USE` gone on a real server)."""

import threading
from typing import Any, List

import pytest
from pyhive import hive

from dbt.adapters.spark_contracts.connection import pyhive_open


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> List[str]:
    """What each `hive.connect` call made: PyHive's own connection or the one without `USE`."""
    calls: List[str] = []
    monkeypatch.setattr(pyhive_open, "_pyhive_connect", lambda *a, **k: calls.append("pyhive"))
    monkeypatch.setattr(pyhive_open, "Connection", lambda *a, **k: calls.append("without use"))
    return calls


def test_connect_is_pyhives_own_outside_the_switch(made: List[str]) -> None:
    hive.connect(host="h")
    with pyhive_open.without_use():
        hive.connect(host="h")
    hive.connect(host="h")
    assert made == ["pyhive", "without use", "pyhive"]


def test_another_threads_connection_inside_the_switch_is_pyhives(made: List[str]) -> None:
    """dbt opens connections on several threads at once; plain dbt-spark may share the
    process: only the thread inside `without_use` gets the connection without `USE`."""
    inside, other_done = threading.Event(), threading.Event()

    def other() -> None:
        inside.wait(10)
        hive.connect(host="other")
        other_done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with pyhive_open.without_use():
        inside.set()
        assert other_done.wait(10)
        hive.connect(host="mine")
    thread.join(10)
    assert made == ["pyhive", "without use"]


def test_the_constructors_cursor_sends_nothing_and_later_ones_are_pyhives() -> None:
    """The one cursor PyHive's constructor asks for (its `USE`) is a no-op; once the
    connection is made, `cursor()` is PyHive's."""
    connection: Any = pyhive_open.Connection.__new__(pyhive_open.Connection)
    opening = connection.cursor()
    assert opening.execute("USE `default`") is None and opening.close() is None
    assert not isinstance(opening, hive.Cursor)
    with pytest.raises(RuntimeError, match="as it opened"):  # anything else is not dropped
        opening.execute("SET x=1")
    connection._opened = True
    assert isinstance(connection.cursor(), hive.Cursor)


def test_importing_again_does_not_wrap_twice() -> None:
    import importlib

    before = pyhive_open._pyhive_connect
    importlib.reload(pyhive_open)
    assert pyhive_open._pyhive_connect is before
    assert hive.connect.__wrapped_pyhive_connect__ is before


def test_the_switch_off_leaves_pyhives_own(made: List[str]) -> None:
    """An http connection opens inside `without_use(False)`: PyHive's own connection."""
    with pyhive_open.without_use(False):
        hive.connect(host="h")
    assert made == ["pyhive"]
