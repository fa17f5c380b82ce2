"""The processes a local cluster started: who they are (pid, start time, command line), whether a
pid still names the same process, and stopping them with everything they spawned (Linux /proc)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Protocol, Sequence


@dataclass(frozen=True)
class ProcessRecord:
    """One process the cluster started, as written to cluster.json."""

    name: str  # "derby", "master", "worker-1", "thrift", ...
    pid: int
    start_time: int  # /proc/<pid>/stat field 22: clock ticks after boot; a reused pid differs
    marker: str  # a string its command line contains (its main class)
    log: str


@dataclass(frozen=True)
class ProcessInfo:
    """A live process as /proc shows it."""

    pid: int
    ppid: int
    pgid: int
    start_time: int
    state: str
    cmdline: str
    cwd: str


def parse_stat(text: str) -> tuple[str, int, int, int]:
    """(state, ppid, pgid, start_time) from the text of /proc/<pid>/stat. The command name (field
    2, in parentheses) may itself hold spaces and parentheses: split after its last ')'."""
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state); field N is fields[N - 3]
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def read_process(pid: int, proc: Path = Path("/proc")) -> Optional[ProcessInfo]:
    """The process `pid`, or None when there is none (or it is a zombie: it has ended)."""
    base = proc / str(pid)
    try:
        state, ppid, pgid, start_time = parse_stat((base / "stat").read_text())
        cmdline = (base / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        try:
            cwd = os.readlink(base / "cwd")
        except OSError:
            cwd = ""
    except (OSError, ValueError, IndexError):
        return None
    if state in ("Z", "X"):
        return None
    return ProcessInfo(pid, ppid, pgid, start_time, state, cmdline.strip(), cwd)


def process_table(proc: Path = Path("/proc")) -> list[ProcessInfo]:
    table = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            info = read_process(int(entry.name), proc)
            if info is not None:
                table.append(info)
    return table


def record_of(name: str, pid: int, marker: str, log: Path) -> ProcessRecord:
    """The record of a process just started (it must still be alive to be read)."""
    info = read_process(pid)
    if info is None:
        raise ProcessLookupError(f"{name} (pid {pid}) exited right after its start; see {log}")
    return ProcessRecord(name, pid, info.start_time, marker, str(log))


def is_same_process(record: ProcessRecord, info: Optional[ProcessInfo]) -> bool:
    """Whether the live `info` is the process `record` names: a pid may have been reused by an
    unrelated process since, which then has another start time or command line. An empty
    command line is a process in the middle of an exec (the launcher scripts exec java): its
    pid and start time still name it."""
    return (
        info is not None
        and info.pid == record.pid
        and info.start_time == record.start_time
        and (not info.cmdline or record.marker in info.cmdline)
    )


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def processes_to_stop(
    records: Sequence[ProcessRecord], table: Iterable[ProcessInfo], folder: str
) -> list[int]:
    """The pids to signal for `records`: each recorded process that is still the same one, and
    every process of its process group or below it whose working directory is inside the
    cluster's `folder` (a worker's executors, also once orphaned by a killed worker). Every
    recorded process leads its own group (started in a new session)."""
    table = list(table)
    by_pid = {info.pid: info for info in table}
    chosen = [r.pid for r in records if is_same_process(r, by_pid.get(r.pid))]
    # a group whose leader is gone is still ours (Linux hands out no pid that names a live
    # group); one whose leader's pid now runs another program is that program's
    groups = {r.pid for r in records if r.pid in chosen or r.pid not in by_pid}
    children: dict[int, list[ProcessInfo]] = {}
    for info in table:
        children.setdefault(info.ppid, []).append(info)
    todo = list(chosen)
    while todo:
        for child in children.get(todo.pop(), []):
            if child.pid not in chosen and _inside(child.cwd, folder):
                chosen.append(child.pid)
                todo.append(child.pid)
    for info in table:
        if info.pgid in groups and info.pid not in chosen and _inside(info.cwd, folder):
            chosen.append(info.pid)
    return chosen


def _alive(pid: int) -> bool:
    try:  # reap it when it is our own child (a test that started the cluster in-process)
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return read_process(pid) is not None


def signal_and_wait(pids: Sequence[int], timeout: float = 30.0) -> list[int]:
    """SIGTERM `pids`, then SIGKILL whichever still runs after `timeout`; the pids killed."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    killed = [p for p in pids if _alive(p)]
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in killed):
        time.sleep(0.1)
    return killed


class Served(Protocol):
    """A server started as a child process (servers.Server, rest_catalog.RestCatalog)."""

    process: subprocess.Popen

    def stop(self) -> None: ...


def serve_until_interrupted(server: Served) -> int:
    """Wait on a server run in the foreground; Ctrl-C stops it. The exit status of `main`."""
    try:
        server.process.wait()
    except KeyboardInterrupt:
        server.stop()
    return 0
