"""A snapshot's run on an existing snapshot table: the planner's schema changes, then dbt's
merge, taken back together when either fails. Delta and Iceberg record the version before the
first change (Delta: RESTORE to it; Iceberg: the added columns dropped, rolled back to it),
never over another writer's commit; a table without a log (none: snapshots need Delta or
Iceberg) is left as the statements left it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

from dbt.adapters.spark_contracts.core.evolution.steps import Step
from dbt.adapters.spark_contracts.core.recovery.intent import Intent
from dbt.adapters.spark_contracts.run.restore import Restorer
from dbt.adapters.spark_contracts.run.run_errors import ForeignCommits, RestoreFailed, RunUndone


@dataclass(frozen=True)
class SnapshotRun:
    """What Jinja is handed between the snapshot's schema changes and its merge."""

    unique_id: str
    insert_columns: Tuple[str, ...]  # the quoted staging columns the merge inserts
    restore: Optional[Intent] = None  # where a failure goes back to, once the table changed
    executed: Tuple[Step, ...] = ()  # the steps that completed


def changed(
    run: SnapshotRun, steps: Tuple[Step, ...], execute: Callable[[str], Any], undo: Restorer
) -> SnapshotRun:
    """The schema changes run in order; a failure takes back the ones that ran."""
    done: list = []
    for step in steps:
        try:
            execute(step.sql)
        except Exception as exc:
            take_back(SnapshotRun(run.unique_id, (), run.restore, tuple(done)), undo, exc, step.sql)
        done.append(step)
    return SnapshotRun(run.unique_id, run.insert_columns, run.restore, tuple(done))


def merged(run: SnapshotRun, sql: str, execute: Callable[[str], Any], undo: Restorer) -> Any:
    """dbt's merge; a failure takes the run's schema changes back."""
    try:
        return execute(sql)
    except Exception as exc:
        take_back(run, undo, exc, "the snapshot's merge")


def take_back(run: SnapshotRun, undo: Restorer, exc: BaseException, step: str) -> None:
    """Put the table back to the run's restore point (if it changed the table), then raise:
    `RunUndone`, `ForeignCommits` (another writer committed: nothing undone) or `RestoreFailed`
    (names both failures and the repair by hand)."""
    if run.restore is None or not run.executed:
        raise exc
    try:
        restored = undo.restore(run.restore, list(run.executed))
    except ForeignCommits:
        raise
    except Exception as restore_exc:
        raise RestoreFailed(
            run.unique_id, step, exc, restore_exc, undo.manual_repair(run.restore)
        ) from exc
    raise RunUndone(run.unique_id, step, restored, exc) from exc
