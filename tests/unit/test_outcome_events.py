"""run/outcome_events.py: a run's outcome is computed from what happened, in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.evolution.steps import Step
from dbt.adapters.spark_contracts.run.outcome_events import (
    Counted,
    Executed,
    Loaded,
    Quarantined,
    Repaired,
    Restored,
    RunEvents,
    RunOutcome,
)

EVENTS = st.lists(
    st.one_of(
        st.builds(Repaired, st.text(max_size=5)),
        st.builds(Executed, st.builds(Step, st.text(max_size=5))),
        st.builds(Counted, st.integers(0, 9), st.integers(0, 9)),
        st.builds(Quarantined, st.none() | st.integers(0, 9)),
        st.just(Loaded()),
        st.builds(Restored, st.text(max_size=5)),
    ),
    max_size=12,
)


def test_a_run_that_counted_quarantined_and_loaded():
    events = RunEvents(["repaired a dead run"])
    events.add(Executed(Step("ALTER TABLE t ADD COLUMNS (c INT)")))
    events.add(Counted(3, 1))
    events.add(Quarantined(3))
    events.add(Loaded())
    assert events.outcome == RunOutcome(
        executed=(Step("ALTER TABLE t ADD COLUMNS (c INT)"),),
        rows_discarded=3,
        values_discarded=1,
        quarantined=3,
        loaded=True,
        repairs=("repaired a dead run",),
    )


def test_rows_taken_out_of_the_quarantine_again_are_not_reported_quarantined():
    events = RunEvents()
    events.add(Counted(2, 0))
    events.add(Quarantined(2))
    events.add(Restored("restored version 4"))
    events.add(Quarantined(None))
    outcome = events.outcome
    assert outcome.quarantined is None and not outcome.loaded
    assert outcome.restored == "restored version 4" and outcome.rows_discarded == 2


@given(EVENTS)
def test_the_outcome_is_the_fold_of_the_events_in_order(events):
    outcome = RunOutcome.of(events)
    assert outcome.executed == tuple(e.step for e in events if isinstance(e, Executed))
    assert outcome.repairs == tuple(e.text for e in events if isinstance(e, Repaired))
    assert outcome.loaded == any(isinstance(e, Loaded) for e in events)
    counted = [e for e in events if isinstance(e, Counted)]
    assert outcome.rows_discarded == (counted[-1].rows if counted else None)
    quarantined = [e for e in events if isinstance(e, Quarantined)]
    assert outcome.quarantined == (quarantined[-1].rows if quarantined else None)
    assert RunOutcome.repaired(["a", "b"]).repairs == ("a", "b")
