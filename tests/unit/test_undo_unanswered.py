"""The runner's undo (run/runner.Runner.undo) when a statement of the run's to its table got no
answer (`unanswered`: it may still commit), by format and by whether the statement carried the
lease's transaction id (`fenced`: Delta's writes of rows). The table is put back at once only
where the table's log is final for the statement (Delta's marker sent under that id); anywhere
else a restore could be overtaken by the statement, so the run puts nothing back, keeps its
record, leaves its lease unreleased (`abandon`) and fails with `StepUnanswered`, the next run
repairing. The whole runs over a scripted Delta table are in test_fault_matrix.py; here each
branch, by its collaborators, for the formats that scripted table does not cover."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, List

import pytest

from dbt.adapters.spark_contracts.connection.errors import ConnectionLostError
from dbt.adapters.spark_contracts.run.report import RunReport
from dbt.adapters.spark_contracts.run.run_errors import RunUndone, StepUnanswered
from dbt.adapters.spark_contracts.run.runner import LOAD_STEP, Runner

ALTER = "alter table db.m add columns (`x` bigint)"


class Leases:
    """The run's leases as undo uses them, noting what it asked."""

    def __init__(self, marker_final: bool) -> None:
        self.marker_final, self.asked = marker_final, []  # type: ignore[var-annotated]
        self.held, self.swapping = "db.m__dbt_lease_inv1", False

    def check(self, run: Any) -> None:
        self.asked.append("check")

    def fence_off_own(self, run: Any) -> bool:
        self.asked.append("marker")
        return self.marker_final

    def abandon(self) -> None:
        self.asked.append("abandon")

    def release(self, run: Any, keep: bool) -> None:
        self.asked.append(f"release keep={keep}")

    def live_runs(self, *args: Any) -> tuple:
        return ()


def undo(
    tmp_path: Path, table_format: str, step: str, fenced: bool, marker_final: bool
) -> tuple[BaseException, List[str], List[str]]:
    runner = Runner(SimpleNamespace(), RunReport(), tmp_path)  # type: ignore[arg-type]
    leases, restores = Leases(marker_final), []
    runner.leases = leases  # type: ignore[assignment]
    runner.restorer = SimpleNamespace(  # type: ignore[assignment]
        restore=lambda intent, executed, fence: restores.append(intent) or "restored"
    )
    runner.quarantine = SimpleNamespace(settle_own=lambda *a, **k: None)  # type: ignore[assignment]
    runner.record = lambda run: None  # type: ignore[method-assign]
    runner.state.intent = SimpleNamespace(table_format=table_format)  # type: ignore[assignment]
    run = SimpleNamespace(unique_id="model.p.m", relation="db.m", table_format=table_format)
    run.invocation_id = "inv-1"
    lost = ConnectionLostError("read timed out")
    with pytest.raises((RunUndone, StepUnanswered)) as failed:
        runner.undo(run, lost, step, unanswered=True, fenced=fenced)  # type: ignore[arg-type]
    return failed.value, leases.asked, restores


@pytest.mark.parametrize("table_format", ["delta", "iceberg", "parquet"])
@pytest.mark.parametrize("step", [LOAD_STEP, ALTER])
def test_a_change_is_put_back_at_once_only_where_the_log_is_final_for_the_statement(
    tmp_path: Path, table_format: str, step: str
):
    fenced = step == LOAD_STEP  # a write of rows carries the id; an ALTER none
    final = table_format == "delta"  # only Delta fences inside the commit
    error, asked, restores = undo(tmp_path, table_format, step, fenced, marker_final=final)
    if fenced and final:
        assert isinstance(error, RunUndone) and restores, (error, asked)
        assert "abandon" not in asked
    else:
        assert isinstance(error, StepUnanswered) and not restores, (error, asked)
        assert asked[-1] == "abandon" and not [a for a in asked if a.startswith("release")]
        assert error.step == step and "db.m" in str(error)
    assert ("marker" in asked) == fenced, asked  # an ALTER: no marker fences it


def test_a_marker_that_is_not_sent_puts_nothing_back(tmp_path: Path):
    """Delta, the load: the marker cannot be sent either (the connection is down still)."""
    error, asked, restores = undo(tmp_path, "delta", LOAD_STEP, True, marker_final=False)
    assert isinstance(error, StepUnanswered) and not restores and asked[-1] == "abandon"
