"""The fault-injection point (connection/failpoint.py): a run stops itself before the write a
test names, by its number or by how its text starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dbt.adapters.spark_contracts.connection import failpoint


@pytest.fixture
def stops(monkeypatch: pytest.MonkeyPatch) -> list:
    sent: list = []
    monkeypatch.setattr(failpoint, "_COUNTER", failpoint._Counter())

    def pthread_kill(thread: int, sig: int) -> None:
        assert thread == threading.get_ident()  # the sending thread itself
        sent.append(sig)

    monkeypatch.setattr(failpoint.signal, "pthread_kill", pthread_kill)
    return sent


COMMENT = '/* {"app": "dbt", "node_id": "model.p.m"} */ '


def test_stops_before_the_first_write_whose_text_starts_so(monkeypatch, stops):
    monkeypatch.setenv(failpoint.STOP_BEFORE_ENV, "sql:update iceberg.s.m ")
    failpoint.before_statement(COMMENT + "ALTER TABLE iceberg.s.m ADD COLUMNS (x INT)")
    failpoint.before_statement(COMMENT + "select * from iceberg.s.m")  # a read: never
    failpoint.before_statement(COMMENT + "update iceberg.s.m_2 set x = 1")  # another table
    assert stops == []
    failpoint.before_statement(COMMENT + "UPDATE  iceberg.s.m SET `x` = id * 10")
    assert stops == [signal.SIGSTOP]
    failpoint.before_statement(COMMENT + "UPDATE iceberg.s.m SET `x` = 1")  # once only
    assert stops == [signal.SIGSTOP]


def test_stops_before_the_nth_write(monkeypatch, stops):
    monkeypatch.setenv(failpoint.STOP_BEFORE_ENV, "2")
    failpoint.before_statement("insert into s.m values (1)")
    failpoint.after_statement("insert into s.m values (1)")
    assert stops == []
    failpoint.before_statement("update s.m set x = 1")
    assert stops == [signal.SIGSTOP]


def test_a_beat_is_never_counted_nor_stopped_before_whichever_thread_sends_it(
    monkeypatch, stops, tmp_path
):
    """A heartbeat comes when a clock says: counted, the n-th write of a stopped run would
    differ from its control's (a run's own thread beats before a step when its lease is due)."""
    from dbt.adapters.spark_contracts.run.heartbeat import beat_sql

    writes = tmp_path / "writes.log"
    monkeypatch.setenv(failpoint.WRITES_LOG_ENV, str(writes))
    monkeypatch.setenv(failpoint.STOP_BEFORE_ENV, "2")
    beat = COMMENT + beat_sql("s.m__dbt_lease_ab12")
    failpoint.before_statement("insert into s.m values (1)")
    failpoint.after_statement("insert into s.m values (1)")
    failpoint.before_statement(beat)
    failpoint.after_statement(beat)
    assert stops == []
    release = beat_sql("s.m__dbt_lease_ab12", 0)  # the release comes at its place: counted
    failpoint.before_statement(release)
    assert stops == [signal.SIGSTOP]
    assert [line.split("\t")[0] for line in writes.read_text().splitlines()] == ["1"]


STOPPED_THREAD = """
import sys, threading, time
from dbt.adapters.spark_contracts.connection import failpoint

def send():
    failpoint.before_statement("insert into s.m values (1)")
    open(sys.argv[1], "w").write("sent")  # the statement, had the stop not held

worker = threading.Thread(target=send, name="Thread-1 (worker)")
worker.start()
worker.join()
"""


def test_the_thread_that_stops_sends_nothing_more(tmp_path: Path):
    """The stop holds the thread that asked for it before it returns, not a moment later, when
    another thread of the process takes the signal (as dbt's main thread did: the load went out
    while the process stopped). A real process, stopped for a second, then sent on."""
    sent = tmp_path / "sent"
    env = dict(os.environ, **{failpoint.STOP_BEFORE_ENV: "1"})
    process = subprocess.Popen([sys.executable, "-c", STOPPED_THREAD, str(sent)], env=env)
    try:
        deadline = time.monotonic() + 60
        state = ""
        while state != "T" and process.poll() is None and time.monotonic() < deadline:
            stat = Path(f"/proc/{process.pid}/stat").read_text()
            state = stat.rsplit(")", 1)[1].split()[0]
            time.sleep(0.01)
        assert state == "T", "the process never stopped"
        time.sleep(1.0)
        assert not sent.exists(), "the statement went out after the stop"
    finally:
        os.kill(process.pid, signal.SIGCONT)
    assert process.wait(timeout=60) == 0
    assert sent.read_text() == "sent"
