"""core/recovery/record.py: a run's record read back from its table's properties (property-tested):
who holds it, the intent and the steps done with their versions, a swap under way; only a
record that says its run was changing a table holds work (a repair reads it, no takeover drops
it)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.evolution.steps import DropTable, Step
from dbt.adapters.spark_contracts.core.recovery.intent import INTENT_PROPERTY, Intent
from dbt.adapters.spark_contracts.core.recovery.pending import BEAT_PROPERTY, RUN_PROPERTY
from dbt.adapters.spark_contracts.core.recovery.record import (
    DONE_PROPERTY,
    PENDING_PROPERTY,
    SHARED_PROPERTY,
    SWAP_PROPERTY,
    TAKEN_PROPERTY,
    Done,
    RunRecord,
    done_property,
    parse_done,
    pending_properties,
)

versions = st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
done_lists = st.lists(st.builds(Done, st.integers(0, 50), versions), max_size=8).map(tuple)


@given(done_lists)
def test_the_steps_done_read_back_as_written(done):
    assert parse_done(done_property(done)) == done


def test_an_unreadable_done_list_is_left_out_not_guessed():
    assert parse_done("0@12,garbled,x@3,2@") == (Done(0, 12), Done(2, None))
    assert parse_done(None) == ()


@given(done_lists, st.booleans(), st.booleans(), st.none() | st.text("abc.`", min_size=1))
def test_a_record_reads_back_what_its_run_wrote(done, with_intent, taken, swap):
    intent = Intent("inv", "model.p.m", "db.t", "delta", 7, "tag", (), (Step("x", DropTable("t")),))
    properties = {RUN_PROPERTY: "inv", BEAT_PROPERTY: "12.5", DONE_PROPERTY: done_property(done)}
    if with_intent:
        properties[INTENT_PROPERTY.upper()] = intent.to_property()  # keys: any case
    if taken:
        properties[TAKEN_PROPERTY] = "inv2"
    if swap is not None:
        properties[SWAP_PROPERTY] = swap
    record = RunRecord.from_properties("db.t__dbt_lease_inv", properties)
    assert record.run == "inv" and record.done == done
    assert record.intent == (intent if with_intent else None)
    assert record.taken_by == ("inv2" if taken else None) and record.swap == swap
    # work a later run must repair: never dropped by a takeover, only by its repairer
    assert record.holds_work == (with_intent or swap is not None)
    assert not record.released
    assert RunRecord.from_properties("t", {BEAT_PROPERTY: "0"}).released


def test_a_lease_its_run_let_go_of_is_told_from_one_a_taker_marked():
    """A taker's mark releases the lease too (heartbeat "0"): only a release without it says
    that the run itself (or a person) let go."""
    let_go = RunRecord.from_properties("t", {BEAT_PROPERTY: "0"})
    marked = RunRecord.from_properties("t", {BEAT_PROPERTY: "0", TAKEN_PROPERTY: "inv2"})
    running = RunRecord.from_properties("t", {BEAT_PROPERTY: "12.5"})
    assert let_go.let_go and not marked.let_go and not running.let_go
    assert marked.released


@given(
    st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    st.booleans(),
)
def test_a_record_names_its_runs_pending_rows(version, with_intent, shared):
    """A quarantining run's record says which pending table holds its discarded rows, its
    commit tag and the model table's version before it (none: the run was creating the table);
    the settler decides from exactly that (core/recovery/pending.decide_pending)."""
    intent = Intent("inv", "model.p.m", "db.t", "delta", 7, "tag", (), ())
    properties = {RUN_PROPERTY: "inv", BEAT_PROPERTY: "12.5"}
    properties.update(pending_properties("db.t__quarantine__pending_inv", "tag:1", version))
    if with_intent:
        properties[INTENT_PROPERTY] = intent.to_property()
    if shared:
        properties[SHARED_PROPERTY] = "true"
    record = RunRecord.from_properties("db.t__dbt_lease_inv", properties)
    pending = record.pending
    assert pending is not None and pending.name == "db.t__quarantine__pending_inv"
    assert pending.tag == "tag:1" and pending.run == "inv" and pending.heartbeat == 12.5
    assert pending.created_version == (None if version is None else str(version))
    assert pending.before_any_version == (version is None)
    assert record.holds_work and record.shared == shared
    assert (record.intent is not None) == with_intent


def test_a_record_without_pending_rows_names_none():
    record = RunRecord.from_properties("t", {RUN_PROPERTY: "inv", BEAT_PROPERTY: "1"})
    assert record.pending is None and not record.shared and not record.holds_work
    cleared = {RUN_PROPERTY: "inv", BEAT_PROPERTY: "1", INTENT_PROPERTY: "", PENDING_PROPERTY: ""}
    assert not RunRecord.from_properties("t", cleared).holds_work  # an intent cleared
