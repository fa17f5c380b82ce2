"""What happened in one run, as events: the runner and its collaborators (the quarantine steps,
the restore) append what they did, in order; the outcome the response, the console line and
`target/schema_changes.json` report is computed from them (`RunOutcome.of`), never filled in
piece by piece. The runner's working state for the run (its stage, pending table, lease,
intent) is `RunState`, which no report reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import Observed
from dbt.adapters.spark_contracts.core.contracts.data_tests import GateCount
from dbt.adapters.spark_contracts.core.evolution.steps import Step
from dbt.adapters.spark_contracts.core.recovery.intent import Intent
from dbt.adapters.spark_contracts.core.recovery.record import Done

logger = AdapterLogger("SparkContracts")


@dataclass(frozen=True)
class _Told:
    """An event told in words, as the report shows it."""

    text: str


class Repaired(_Told):
    """What the repair step before planning did (a dead run's intent, pending rows)."""


@dataclass(frozen=True)
class Executed:
    """One of the plan's multi-step steps ran."""

    step: Step


@dataclass(frozen=True)
class Counted:
    """The discard counts of the run's one read of the model's output (and each discarding
    data test's, `gates`)."""

    rows: int
    values: int
    gates: Tuple[GateCount, ...] = ()


@dataclass(frozen=True)
class Quarantined:
    """The run's discarded rows are in the quarantine (`rows`; None: not counted)."""

    rows: Optional[int]


@dataclass(frozen=True)
class Loaded:
    """The load committed: the plan's changes are in the table."""


class Restored(_Told):
    """The table was put back after a failure (or why it was not)."""


@dataclass(frozen=True)
class PathTaken:
    """How a quarantining run read the model's output (`FIRST_PASS`, `PENDING`, ...)."""

    path: str


# a quarantining run's paths: its first pass loaded (nothing discarded); its pending table,
# after the first pass met a discarded row; its pending table at once (the last run
# discarded, or the first pass is not possible for this run: run_plan.first_pass)
FIRST_PASS, PENDING_AFTER_FIRST_PASS, PENDING = (
    "first pass",
    "pending table after the first pass met a discarded row",
    "pending table",
)

Event = Union[Repaired, Executed, Counted, Quarantined, Loaded, Restored, PathTaken]


@dataclass(frozen=True)
class RunOutcome:
    """What one run did, computed from its events."""

    executed: Tuple[Step, ...] = ()
    restored: Optional[str] = None
    rows_discarded: Optional[int] = None
    values_discarded: Optional[int] = None
    quarantined: Optional[int] = None
    loaded: bool = False
    repairs: Tuple[str, ...] = ()
    quarantine_path: Optional[str] = None  # a quarantining run's (`PathTaken`)
    gate_counts: Tuple[GateCount, ...] = ()  # each discarding data test's rows (`Counted`)

    @classmethod
    def of(cls, events: Sequence[Event]) -> RunOutcome:
        rows = values = quarantined = restored = path = None
        gates: Tuple[GateCount, ...] = ()
        for event in events:
            if isinstance(event, Counted):
                rows, values, gates = event.rows, event.values, event.gates
            elif isinstance(event, Quarantined):
                quarantined = event.rows
            elif isinstance(event, Restored):
                restored = event.text
            elif isinstance(event, PathTaken):
                path = event.path
        return cls(
            executed=tuple(e.step for e in events if isinstance(e, Executed)),
            restored=restored,
            rows_discarded=rows,
            values_discarded=values,
            quarantined=quarantined,
            loaded=any(isinstance(e, Loaded) for e in events),
            repairs=tuple(e.text for e in events if isinstance(e, Repaired)),
            quarantine_path=path,
            gate_counts=gates,
        )

    @classmethod
    def repaired(cls, repairs: Sequence[str]) -> RunOutcome:
        """The outcome of a run that only planned (a dry run, a full refresh's record)."""
        return cls.of([Repaired(text) for text in repairs])


@dataclass
class RunState:
    """The runner's working state for one run: what a failure has to clean up or put back."""

    restore_version: Optional[int] = None
    intent: Optional[Intent] = None  # written into the run's record
    staged: bool = False
    observation: Optional[Observed] = field(default=None, repr=False)
    pending: Optional[str] = (
        None  # the run's pending table of discarded rows (core/recovery/pending.py)
    )
    done: List[Done] = field(default_factory=list)  # its steps done, told to its record


class RunEvents:
    """One run's events, appended as they happen."""

    def __init__(self, repairs: Sequence[str] = ()) -> None:
        self._events: List[Event] = [Repaired(text) for text in repairs]

    def add(self, event: Event) -> None:
        self._events.append(event)

    @property
    def outcome(self) -> RunOutcome:
        return RunOutcome.of(self._events)


class RunBook:
    """What the run being carried out did (`events`) and holds (`state`): one per `Runner`,
    begun again for each run, shared with the collaborators that act for it (the
    quarantine, run/quarantine_steps.py)."""

    def __init__(self) -> None:
        self.events, self.state = RunEvents(), RunState()

    def begin(self, repairs: Sequence[str] = ()) -> None:
        self.events, self.state = RunEvents(repairs), RunState()

    @property
    def out(self) -> RunOutcome:
        """What the run did so far, computed from its events."""
        return self.events.outcome

    def count(self, counts: Mapping[str, Any], load: Any) -> None:
        """The run's discard counts (a query's row, or what Spark observed), per gate too
        (`load`: the run's typed load, which names its gates)."""
        rows, values = counts["rows_discarded"], counts["values_discarded"]
        gates = load.gate_counts(counts) if load is not None else ()
        self.events.add(Counted(int(rows or 0), int(values or 0), gates))

    def take_counts(self, spark: Any, run: Any) -> None:
        """The discard counts observed in the pass that just read the model's output; where
        Spark reported none, one query over the stage or pending table it wrote."""
        observation, self.state.observation = self.state.observation, None
        if observation is None:
            return
        counts = observation()
        load = run.load_sql
        staged = self.state.staged or self.state.pending is not None
        if counts is None and staged and load is not None and load.discard_count_sql:
            counts = spark.fetch(load.discard_count_sql)[0]  # from the stage, not the model
        if counts is None:
            logger.warning(f"{run.unique_id}: Spark reported no discard counts for this run")
        else:
            self.count(counts, load)
