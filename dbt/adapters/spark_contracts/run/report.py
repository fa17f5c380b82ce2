"""`target/schema_changes.json` of one dbt invocation, written atomically."""

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.core.evolution.capabilities import row_of
from dbt.adapters.spark_contracts.core.report.outcome import (
    history_relation,
    history_rows,
    plan_markdown,
    run_summary,
)

logger = AdapterLogger("SparkContracts")


class RunReport:
    """`target/schema_changes.json` of one dbt invocation: per model, the diff, the plan, what
    ran, repairs, any violation. A new invocation id starts a new report; written atomically."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._invocation: Optional[str] = None
        self._entries: Dict[str, Dict[str, Any]] = {}
        self._summarized = False
        self._history: Dict[Tuple[str, str], List[str]] = {}
        self._left: Dict[str, str] = {}  # relation -> the step a run left it half changed at

    def start(self, invocation_id: str) -> None:
        with self._lock:
            if invocation_id != self._invocation:
                self._invocation, self._entries = invocation_id, {}
                self._summarized = False
                self._left = {}

    def left_half_changed(self, relation: str, step: str) -> None:
        """A run of this invocation left `relation` half changed for the next invocation to
        repair (a `step` Spark gave no answer for, which may still commit: run/undo.undo; or a
        statement of its repair of a dead run: Runner.repair). Its record is its own
        invocation's, which a later microbatch batch does not read
        (run/record_io.records_of): this is how that batch learns of it
        (Runner.hold_if_left)."""
        with self._lock:
            self._left[relation.lower()] = step

    def half_changed(self, relation: str) -> Optional[str]:
        """The step at which a run of this invocation left `relation` half changed, if one did."""
        with self._lock:
            return self._left.get(relation.lower())

    def queue_history(self, table: str, using: str, rows: Tuple[str, ...]) -> None:
        """A run's schema-history rows, written with every other model's at the end of the
        invocation (`take_history`): one statement per history table, none on a model's run."""
        with self._lock:
            self._history.setdefault((table, using), []).extend(rows)

    def queue_run_history(self, run: Any, out: Any) -> None:
        """A carried-out run's applied changes, discards and repairs (`run`: a ModelRun, `out`:
        its RunOutcome), queued for its schema's history table (`queue_history`)."""
        rows = history_rows(
            run.unique_id,
            run.relation,
            run.invocation_id,
            run.plan.operations,
            out.rows_discarded,
            out.values_discarded,
            out.repairs,
        )
        if rows:
            using = row_of(run.table_format).history_format
            self.queue_history(history_relation(run.relation), using, rows)

    def take_history(self) -> List[Tuple[str, str, Tuple[str, ...]]]:
        """(table, format, rows) queued since the last call, once."""
        with self._lock:
            pending, self._history = self._history, {}
        return [(table, using, tuple(rows)) for (table, using), rows in pending.items()]

    def take_summary(self) -> Optional[str]:
        """The run's summary line, once per invocation (None when no model had news)."""
        with self._lock:
            if self._summarized or not self._entries:
                return None
            self._summarized = True
            return run_summary(self._entries)

    def record(self, target_path: Path, unique_id: str, entry: Dict[str, Any]) -> None:
        with self._lock:
            self._entries.setdefault(unique_id, {}).update(entry)
            body = json.dumps(
                {"invocation_id": self._invocation, "models": self._entries}, indent=2, default=str
            )
            target_path.mkdir(parents=True, exist_ok=True)
            _write_atomically(target_path, "schema_changes.json", body)
            planned = {k: e for k, e in self._entries.items() if e.get("dry_run")}
            if planned:  # a dry run: the plan a pull request can show
                invocation = self._invocation or ""
                plan = {"invocation_id": invocation, "models": planned}
                _write_atomically(
                    target_path, "schema_plan.json", json.dumps(plan, indent=2, default=str)
                )
                _write_atomically(target_path, "schema_plan.md", plan_markdown(invocation, planned))


def _write_atomically(directory: Path, name: str, body: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
    with os.fdopen(fd, "w") as handle:
        handle.write(body)
    os.replace(tmp, directory / name)
