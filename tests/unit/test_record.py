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
    SWAP_PROPERTY,
    TAKEN_PROPERTY,
    Done,
    RunRecord,
    done_property,
    parse_done,
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
