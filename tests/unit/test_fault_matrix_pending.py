"""The scripted fault matrix of a run that quarantines what its load discards (no Spark): on the
session method the load collects the discarded rows (observed while it writes) and the quarantine
insert follows it, under the run's intent. An in-memory Delta table and its quarantine die at
each statement in turn, as a process killed by SIGKILL would. Then:

- the table is as before, or carries the dead run's intent (never a load whose discarded rows
  are not in the quarantine without it);
- the next run repairs it first (RESTORE) and runs again: the table and the quarantine end
  exactly like a run never killed, every discarded row quarantined once.

CI's real SIGKILL between the load and the quarantine insert:
tests/functional/evolution/test_kill.py::TestKillMidRun{Delta,Iceberg}.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.core.config import EvolutionSettings
from dbt.adapters.spark_contracts.core.contract import ContractMode, SchemaContract
from dbt.adapters.spark_contracts.core.intent import (
    INTENT_PROPERTY,
    JOURNAL_RUN_PROPERTY,
    Commit,
    commit_tag,
    find_intent,
    has_journal,
    journal_tag,
)
from dbt.adapters.spark_contracts.core.load_select import QUARANTINE_METRIC
from dbt.adapters.spark_contracts.core.parse import parse_type
from dbt.adapters.spark_contracts.core.plan import Policy
from dbt.adapters.spark_contracts.core.run_plan import RunInputs
from dbt.adapters.spark_contracts.model_run import DELTA_USER_METADATA
from dbt.adapters.spark_contracts.run import (
    ModelRun,
    QuarantineLost,
    QuarantineMismatch,
    Runner,
    RunReport,
    RunUndone,
)
from tests.unit.test_fault_matrix import MODEL, TABLE, FakeDelta, Killed, Version, planned_run

DEPLOYED = parse_type("struct<id:bigint,n:bigint>")
COMPILED = parse_type("struct<id:bigint,n:string>")
CONTRACT = SchemaContract(data_type=ContractMode.DISCARD_ROW, quarantine=True)
SETTINGS = EvolutionSettings(Policy(), "ignore", False, False)
QUARANTINE = f"{TABLE}__quarantine"
DISCARDED = 3  # rows the load discards, and the rows it collects for the quarantine
META = ("_contract_reason", "_dbt_run_id")


class Rows:
    """The discarded rows an observation collected (in Spark: a Scala sequence of rows)."""

    def __init__(self, count: int) -> None:
        self.count = count


@dataclass
class FakeObservingDelta(FakeDelta):
    """The fake Delta table over a connection that observes; it also keeps the quarantine
    (a Delta table: each insert one atomic commit)."""

    quarantine: Optional[List[str]] = None  # run ids, a row each; None: no table yet
    # the quarantine's columns: it lacks the model's `n` until the run adds it
    quarantine_columns: Tuple[str, ...] = ("id", "_contract_reason", "_dbt_run_id")
    n_type: str = "string"  # the quarantine's `n`, once it has one
    views: Dict[str, int] = field(default_factory=dict)
    observed: Dict[str, Any] = field(default_factory=dict)
    discards: int = DISCARDED  # rows each load discards
    quarantine_tags: List[Optional[str]] = field(default_factory=list)  # its commits' tags

    def _quarantine_commit(self) -> None:
        self.quarantine_tags.append(self.conf.get(DELTA_USER_METADATA))

    def recent_commits(self, relation: str, limit: Optional[int]) -> List[Commit]:
        """Both tables' newest commits, newest first (a read: killed only if dead)."""
        if self.dead:
            raise Killed()
        if relation == QUARANTINE:
            if self.quarantine is None:
                raise DbtDatabaseError(f"table not found: {relation}")
            rows = [Commit(i, "WRITE", t) for i, t in enumerate(self.quarantine_tags)]
        else:
            assert relation == TABLE, relation
            rows = [Commit(i, v.operation, v.tag) for i, v in enumerate(self.versions)]
        return rows[::-1][:limit]

    def run(self, sql: str) -> Any:
        text = " ".join(sql.split())
        low = text.lower()
        if low.startswith("create or replace temporary view"):
            self._statement()
            name, body = re.match(r"create or replace temporary view (\S+) as (.*)$", low).groups()  # type: ignore[union-attr]
            assert not re.search(rf"\bfrom {re.escape(name)}\b", body), f"{name} reads itself"
            return None
        if low.startswith(f"insert into {TABLE} "):  # the load: the observation fills
            response = super().run(sql)
            self.observed = {
                "rows_discarded": self.discards,
                "values_discarded": 0,
                QUARANTINE_METRIC: Rows(self.discards),
            }
            return response
        if m := re.match(
            rf"delete from {re.escape(QUARANTINE)} where `_dbt_run_id` = '([^']+)'$", low
        ):
            self._statement()
            assert self.quarantine is not None, "a delete from a quarantine never created"
            kept = [r for r in self.quarantine if r != m.group(1)]
            if len(kept) < len(self.quarantine):  # Delta commits a DELETE only if it removes
                self.quarantine = kept
                self._quarantine_commit()
            return None
        if low.startswith(f"create table if not exists {QUARANTINE} using delta"):
            self._statement()
            if self.quarantine is None:
                self.quarantine, self.quarantine_columns = [], ("id", "n", *META)
                self._quarantine_commit()
            return None
        if m := re.match(rf"alter table {re.escape(QUARANTINE)} add columns \((.*)\)$", low):
            self._statement()
            added = tuple(c.strip().split()[0].strip("`") for c in m.group(1).split(","))
            self.quarantine_columns += added
            self._quarantine_commit()
            return None
        if m := re.match(
            rf"insert into {re.escape(QUARANTINE)} by name select \*, '([^']+)' as", low
        ):
            self._statement()
            assert self.quarantine is not None, "the quarantine insert before its table"
            if "n" not in self.quarantine_columns or self.n_type != "string":
                raise DbtDatabaseError("the rows do not fit the quarantine")  # Spark refuses
            view = re.search(r"from (\S+)$", low).group(1)  # type: ignore[union-attr]
            self.quarantine += [m.group(1)] * self.views[view]
            self._quarantine_commit()
            return None
        if low.startswith(f"alter table {QUARANTINE} set tblproperties ('{JOURNAL_RUN_PROPERTY}'"):
            self._statement()
            assert self.quarantine is not None, "the journal's commit on a missing quarantine"
            self._quarantine_commit()
            return None
        return super().run(sql)

    def can_observe(self) -> bool:
        return True

    def relation_schema(self, relation: str, describable: bool) -> Any:
        assert relation == QUARANTINE and self.quarantine is not None, relation
        fields = ", ".join(
            f"{c}:{'bigint' if c == 'id' else self.n_type if c == 'n' else 'string'}"
            for c in self.quarantine_columns
        )
        return parse_type(f"struct<{fields}>")

    def observe(self, view: str, source: str, metrics: Tuple[Tuple[str, str], ...]) -> Any:
        self._statement()
        assert QUARANTINE_METRIC in dict(metrics), metrics
        self.observed = {}
        return lambda: self.observed or None

    def rows_view(self, view: str, rows: Any) -> int:
        self._statement()
        self.views[view.lower()] = rows.count
        return int(rows.count)


def model_run(table: FakeObservingDelta, invocation: str) -> ModelRun:
    """What plan_model_run builds for this run (core/run_plan.plan_run, no Spark)."""
    inputs = RunInputs(
        TABLE,
        "t__dbt_tmp",
        invocation,
        "delta",
        "append",
        DEPLOYED,
        {},
        COMPILED,
        SETTINGS,
        contract=CONTRACT,
        observable=True,
    )
    run = planned_run(inputs, MODEL)
    assert run.quarantine_in_load and run.stage is None, run
    # dbt's relation cache, as adapter_run reads it: the quarantine's format once it exists
    return replace(run, quarantine_format="delta" if table.quarantine is not None else None)


def a_run(table: FakeObservingDelta, invocation: str, tmp_path: Path) -> None:
    """As adapter_run.plan_model_run and execute_model_run do it: the repair step (a dead run's
    intent, or its journaled load), the plan, the journal's tag where the table has one."""
    runner = Runner(table, RunReport(), tmp_path)
    runner.tag_commits(commit_tag(invocation, MODEL))  # before the repair, as adapter_run does
    properties = dict(table.current.properties)
    dead = find_intent(properties)
    journal = has_journal(properties)
    if dead is None and journal:
        dead = runner.dead_journal(TABLE, QUARANTINE, MODEL)
    if dead is not None and dead.invocation_id != invocation:
        runner.repair(dead, MODEL)
        journal = has_journal(dict(table.current.properties))
    run = model_run(table, invocation)
    if journal and run.quarantine_format is not None and not run.statements:
        run = replace(run, journaled=True, commit_tag=journal_tag(invocation, MODEL, "0"))
        runner.tag_commits(run.commit_tag)
    runner.execute(run, f"insert into {TABLE} select * from {run.source}")


def new_table(quarantined_before: bool = False) -> FakeObservingDelta:
    """The table; `quarantined_before`: its quarantine exists, from before the model had `n`."""
    table = FakeObservingDelta([Version(("id", "n"), (), "v1", "CREATE TABLE AS SELECT", None)])
    if quarantined_before:
        table.quarantine = ["inv-old"]
    return table


def finished(table: FakeObservingDelta) -> Tuple[Any, ...]:
    """The table as a reader sees it, and how many rows each run quarantined."""
    runs = [r for r in table.quarantine or [] if r != "inv-old"]
    return table.current.state(), sorted(runs.count(r) for r in set(runs))


def control(tmp_path: Path, quarantined_before: bool = False) -> Tuple[Any, ...]:
    table = new_table(quarantined_before)
    a_run(table, "inv-control", tmp_path)
    return finished(table)


BEFORE = (new_table().current.state(), [])
# `created`: the run creates the quarantine (9 statements); `evolved`: an existing quarantine
# predates the model's `n`: its insert is refused, the column added, the insert run again (10)
KILL_POINTS = [(False, k) for k in range(1, 10)] + [(True, k) for k in range(1, 11)]


@pytest.mark.parametrize(
    "quarantined_before, kill_at",
    KILL_POINTS,
    ids=[f"{'evolved' if q else 'created'}-{k}" for q, k in KILL_POINTS],
)
def test_a_quarantining_run_killed_at_any_statement_is_repaired(
    kill_at: int, quarantined_before: bool, tmp_path: Path
):
    table = new_table(quarantined_before)
    table.kill_at = kill_at
    with pytest.raises(Killed):
        a_run(table, "inv-dead", tmp_path)
    intent = INTENT_PROPERTY in dict(table.current.properties)
    after = control(tmp_path, quarantined_before)
    assert after[1] == [DISCARDED]
    seen = finished(table)
    # a load without its quarantined rows is never left without the intent
    assert seen in (BEFORE, after) or intent, (kill_at, table.versions, table.quarantine)
    if seen == after:
        return  # the run had finished its work (the kill stopped its cleanup)
    table.dead, table.kill_at = False, 0  # the next dbt process
    a_run(table, "inv-next", tmp_path)
    assert finished(table) == after, (kill_at, table.versions, table.quarantine)
    assert "n" in table.quarantine_columns


@pytest.mark.parametrize("quarantined_before", [False, True], ids=["created", "evolved"])
def test_the_matrix_covers_every_statement(quarantined_before: bool, tmp_path: Path):
    """The coerced view, the observed view, the contract's view, the quarantine's table (or
    its missing column), the intent, the load, the rows' view, the quarantine insert, the
    intent cleared."""
    table = new_table(quarantined_before)
    a_run(table, "inv-count", tmp_path)
    assert table.sent == max(k for q, k in KILL_POINTS if q == quarantined_before)
    old = ["inv-old"] if quarantined_before else []
    assert table.quarantine == old + ["inv-count"] * DISCARDED
    assert "n" in table.quarantine_columns


def test_a_load_whose_discarded_rows_went_unreported_is_taken_back(tmp_path: Path):
    """No observation (Spark never reported it): the discarded rows exist nowhere else, so the
    load is taken back (RESTORE) and the run fails naming why."""
    table = new_table()
    original = table.run

    def run_without_metrics(sql: str) -> Any:
        response = original(sql)
        if sql.lower().startswith(f"insert into {TABLE} "):
            table.observed = {}
        return response

    table.run = run_without_metrics  # type: ignore[method-assign]
    with pytest.raises(RunUndone) as raised:
        a_run(table, "inv-lost", tmp_path)
    assert isinstance(raised.value.cause, QuarantineLost)
    assert table.current.state()[:2] == BEFORE[0][:2] and table.current.rows == "v1"
    assert table.current.operation == "RESTORE" and not table.quarantine


def test_a_quarantine_that_cannot_hold_the_rows_takes_the_load_back(tmp_path: Path):
    """The quarantine holds `n` as bigint (an older model's); the model now outputs strings
    there, which it could not store: the load is taken back and the run fails naming both
    types (QuarantineMismatch)."""
    table = new_table(quarantined_before=True)
    table.quarantine_columns += ("n",)
    table.n_type = "bigint"
    with pytest.raises(RunUndone) as raised:
        a_run(table, "inv-mismatch", tmp_path)
    assert isinstance(raised.value.cause, QuarantineMismatch)
    assert "`n` is BIGINT there, the model outputs STRING" in str(raised.value)
    assert table.current.state()[:2] == BEFORE[0][:2] and table.current.rows == "v1"
    assert table.current.operation == "RESTORE" and table.quarantine == ["inv-old"]


# A journaled run (the table's first quarantining run marked its journal): the coerced view,
# the observed view, the contract's view, the load, then the rows' view and the quarantine
# insert (3 discarded rows: 6 statements) or the journal's commit on the quarantine (none: 5).
# With a quarantine that lacks the model's `n` (-1 below): the refused insert, the column added
# (a commit on the quarantine that is not the journal's), the insert again: 8 statements.
JOURNALED_POINTS = (
    [(3, k) for k in range(1, 7)] + [(0, k) for k in range(1, 6)] + [(-1, k) for k in range(1, 9)]
)


def journaled_table(tmp_path: Path, discards: int) -> FakeObservingDelta:
    """A table after its first quarantining run, which created the quarantine and marked the
    table's journal; its next loads discard `discards` rows (-1: 3, and the quarantine has lost
    its `n` column since, as if made by an older model)."""
    table = new_table()
    a_run(table, "inv-first", tmp_path)
    assert has_journal(dict(table.current.properties))
    table.discards, table.sent = DISCARDED if discards < 0 else discards, 0
    if discards < 0:
        table.quarantine_columns = ("id", *META)
    return table


@pytest.mark.parametrize(
    "discards, kill_at", JOURNALED_POINTS, ids=[f"{d}-rows-{k}" for d, k in JOURNALED_POINTS]
)
def test_a_journaled_run_killed_at_any_statement_is_repaired(
    discards: int, kill_at: int, tmp_path: Path
):
    """No intent is written: the load's commit and the quarantine insert's (or its journal
    commit's) carry the journal's tag; the quarantine's own schema change carries another.
    Killed anywhere, the next run finds a load whose tag the quarantine lacks (if the kill came
    after it), takes it back, and runs: both tables end as after a run never killed."""
    control = journaled_table(tmp_path, discards)
    a_run(control, "inv-control", tmp_path)
    after = finished(control)
    table = journaled_table(tmp_path, discards)
    table.kill_at = kill_at
    with pytest.raises(Killed):
        a_run(table, "inv-dead", tmp_path)
    assert INTENT_PROPERTY not in dict(table.current.properties)  # a journaled run writes none
    table.dead, table.kill_at = False, 0  # the next dbt process
    a_run(table, "inv-next", tmp_path)
    assert finished(table) == after, (kill_at, table.versions, table.quarantine)


@pytest.mark.parametrize("discards", [3, 0, -1])
def test_the_journaled_matrix_covers_every_statement(discards: int, tmp_path: Path):
    table = journaled_table(tmp_path, discards)
    before = len(table.versions)
    a_run(table, "inv-count", tmp_path)
    assert table.sent == max(k for d, k in JOURNALED_POINTS if d == discards)
    # one commit on the table (the load, no intent, no clearing), one on the quarantine
    assert [v.operation for v in table.versions[before:]] == ["WRITE"]
    tags = [v.tag for v in table.versions[before:]] + table.quarantine_tags[-1:]
    assert tags == [journal_tag("inv-count", MODEL, "0")] * 2
    assert table.quarantine == ["inv-first"] * DISCARDED + ["inv-count"] * table.discards


def test_a_journaled_load_whose_rows_the_quarantine_cannot_hold_is_taken_back(tmp_path: Path):
    """The journaled run's quarantine insert fails for good: its load is taken back (RESTORE to
    the version before its first commit, found by its tag) and the run fails naming why."""
    table = journaled_table(tmp_path, DISCARDED)
    state = table.current.state()
    table.n_type = "bigint"  # the quarantine's `n` can no longer take the model's strings
    with pytest.raises(RunUndone) as raised:
        a_run(table, "inv-mismatch", tmp_path)
    assert isinstance(raised.value.cause, QuarantineMismatch)
    assert table.current.state() == state and table.current.operation == "RESTORE"
    assert table.quarantine == ["inv-first"] * DISCARDED
    # the next run (the quarantine fixed) finds the failed run's own RESTORE: nothing to repair
    table.n_type = "string"
    before = len(table.versions)
    a_run(table, "inv-next", tmp_path)
    assert [v.operation for v in table.versions[before:]] == ["WRITE"]
    control = journaled_table(tmp_path, DISCARDED)
    a_run(control, "inv-control", tmp_path)
    assert finished(table) == finished(control)


def test_a_finished_journaled_run_stays_however_many_commits_the_quarantine_had_since(
    tmp_path: Path,
):
    """Twelve commits on the quarantine after a journaled run's insert (people deleting triaged
    rows, OPTIMIZE): the next run reads past its newest ten and finds the tag; nothing is
    taken back."""
    table = journaled_table(tmp_path, DISCARDED)
    a_run(table, "inv-done", tmp_path)
    table.quarantine_tags += [None] * 12
    before = len(table.versions)
    a_run(table, "inv-next", tmp_path)
    assert [v.operation for v in table.versions[before:]] == ["WRITE"]


def test_the_quarantines_whole_history_is_read_only_when_the_tag_is_not_among_its_newest(
    tmp_path: Path,
):
    """In steady use the quarantine has many commits: the run reads its newest ten, finds the
    last journaled run's tag there, and reads no further."""
    table = journaled_table(tmp_path, DISCARDED)
    for i in range(11):  # eleven finished journaled runs: the quarantine has 12+ commits
        a_run(table, f"inv-{i}", tmp_path)
    assert len(table.quarantine_tags) > 10
    limits: List[Optional[int]] = []
    original = table.recent_commits

    def recording(relation: str, limit: Optional[int]) -> List[Commit]:
        limits.append(limit)
        return original(relation, limit)

    table.recent_commits = recording  # type: ignore[method-assign]
    a_run(table, "inv-next", tmp_path)
    assert limits == [10, 10], limits  # the table's newest, the quarantine's newest
