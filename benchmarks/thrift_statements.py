"""The statements a Spark Thrift Server received, read from its event log, per dbt model.

The Thrift server posts one `SparkListenerThriftServerOperationStart` event per operation a
client sends (a statement, or a metadata call such as GetTables), with its session id, its text
and its start time, and the event log writes (and flushes) each such event as it happens
(`spark.eventLog.enabled`). dbt prepends its query comment to the statements it sends through
`add_query` (`/* {"app": "dbt", ..., "node_id": "model.p.m"} */`); statements an adapter sends
on the same connection without it (a SET, a schema read) carry no node id. A dbt thread's
connection is one Thrift session per node, so a session whose commented statements name one
node is that node's: its uncommented statements are counted for that node too. A session that
names no node is the run's own (listing relations, run-level bookkeeping).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

OPERATION_START = (
    "org.apache.spark.sql.hive.thriftserver.ui.SparkListenerThriftServerOperationStart"
)
NODE_ID = re.compile(r'"node_id":\s*"([^"]+)"')


@dataclass(frozen=True)
class Operation:
    session: str
    start_ms: int
    statement: str

    @property
    def node(self) -> Optional[str]:
        found = NODE_ID.search(self.statement[:2000])
        return found.group(1) if found else None


@dataclass
class EventLog:
    """Reads the operations a Thrift server's event log gained since the last read."""

    folder: Path
    offset: int = 0
    path: Optional[Path] = None

    def file(self) -> Optional[Path]:
        if self.path is None:
            found = sorted(p for p in self.folder.iterdir() if p.is_file())
            self.path = found[0] if found else None
        elif not self.path.exists():  # renamed from .inprogress when the server stopped
            self.path = self.path.with_name(self.path.name.removesuffix(".inprogress"))
        return self.path

    def new_operations(self) -> List[Operation]:
        path = self.file()
        if path is None or not path.exists():
            return []
        with path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next read
        self.offset += end
        return list(parse(data[:end].decode("utf-8", errors="replace").splitlines()))


def parse(lines: Iterable[str]) -> Iterable[Operation]:
    for line in lines:
        if OPERATION_START not in line:
            continue
        event = json.loads(line)
        yield Operation(str(event["sessionId"]), int(event["startTime"]), str(event["statement"]))


@dataclass
class Counts:
    """One dbt run's operations: per model, and those of sessions that named no model."""

    per_model: Dict[str, int] = field(default_factory=dict)
    run_level: int = 0
    # per model: (statements carrying its node id, statements counted by their session)
    by_comment: Dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.per_model.values()) + self.run_level


def count(operations: Iterable[Operation], start_ms: int, end_ms: int) -> Counts:
    """The operations started within [start_ms, end_ms] (one dbt run), per model."""
    sessions: Dict[str, List[Operation]] = defaultdict(list)
    for op in operations:
        if start_ms <= op.start_ms <= end_ms:
            sessions[op.session].append(op)
    counts = Counts()
    per_model: Dict[str, int] = defaultdict(int)
    by_comment: Dict[str, int] = defaultdict(int)
    for ops in sessions.values():
        ops.sort(key=lambda op: op.start_ms)
        for op, node in zip(ops, session_nodes(ops), strict=True):
            if node is None:
                counts.run_level += 1
                continue
            model = node.rsplit(".", 1)[-1]
            per_model[model] += 1
            if op.node is not None:
                by_comment[model] += 1
    counts.per_model = dict(sorted(per_model.items()))
    counts.by_comment = dict(sorted(by_comment.items()))
    return counts


def session_nodes(ops: List[Operation]) -> List[Optional[str]]:
    """The node each of one session's operations belongs to: its own node id, else the node of
    the nearest commented operation before it in the session (else the first one after it);
    None when the session names no node."""
    nodes: List[Optional[str]] = [op.node for op in ops]
    last: Optional[str] = None
    for i, node in enumerate(nodes):
        if node is None:
            nodes[i] = last
        else:
            last = node
    following: Optional[str] = None
    for i in range(len(nodes) - 1, -1, -1):
        if ops[i].node is not None:
            following = ops[i].node
        elif nodes[i] is None:
            nodes[i] = following
    return nodes


def compare(ours: Counts, theirs: Counts) -> List[Tuple[str, Optional[int], Optional[int]]]:
    """(model, our statements, dbt-spark's) for every model either run sent statements for."""
    models = sorted(set(ours.per_model) | set(theirs.per_model))
    return [(m, ours.per_model.get(m), theirs.per_model.get(m)) for m in models]
