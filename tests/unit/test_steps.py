"""core/evolution/steps.py: steps as values, their undo computed from the steps that ran (newest
first, each inverse once, nothing once a step stands), and their record in the intent."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.evolution.steps import (
    DropAdded,
    DropTable,
    Rename,
    Step,
    UnsetProperty,
    undo,
)
from dbt.adapters.spark_contracts.core.recovery.intent import Intent

NAMES = st.sampled_from(["`db`.`t`", "`db`.`t__dbt_backup`", "`db`.`t__dbt_rewrite`", "c.d.t"])
PATHS = st.lists(
    st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=3).map(tuple),
    min_size=1,
    max_size=3,
).map(tuple)
INVERSES = st.one_of(
    st.builds(Rename, NAMES, NAMES, st.booleans()),
    st.builds(DropTable, NAMES),
    st.builds(DropAdded, NAMES, PATHS),
    st.builds(UnsetProperty, NAMES, st.text(max_size=6), st.booleans()),
)
STEPS = st.builds(Step, st.text(max_size=12), st.none() | INVERSES, st.booleans())


@given(st.lists(STEPS, max_size=8))
def test_undo_is_the_inverses_newest_first_each_once_or_nothing_once_a_step_stands(done):
    inverses = undo(done)
    if any(s.stands for s in done):
        assert inverses == ()
        return
    assert len(set(inverses)) == len(inverses)
    assert set(inverses) == {s.inverse for s in done if s.inverse is not None}
    # newest first: each inverse sits where its latest step puts it
    latest = {s.inverse: i for i, s in enumerate(done) if s.inverse is not None}
    assert [latest[i] for i in inverses] == sorted(latest.values(), reverse=True)


@given(st.lists(STEPS, max_size=8))
def test_undo_of_more_steps_only_adds_in_front_until_one_stands(done):
    """A run that got further takes back more: the undo of a prefix is the tail of the undo of
    the whole, unless a step of the whole stands."""
    for k in range(len(done) + 1):
        whole, part = undo(done), undo(done[:k])
        if not any(s.stands for s in done):
            assert set(part) <= set(whole)


@given(st.lists(STEPS, max_size=6))
def test_steps_round_trip_through_the_intent(steps):
    intent = Intent("inv", "model.p.m", "`db`.`t`", "parquet", None, "tag", (), tuple(steps))
    assert Intent.from_property(intent.to_property()) == intent
    assert [Step.from_dict(json.loads(json.dumps(s.to_dict()))) for s in steps] == steps


def test_each_inverse_is_the_statement_that_takes_its_step_back():
    assert Rename("`db`.`b`", "`db`.`t`").sql == "ALTER TABLE `db`.`b` RENAME TO `db`.`t`"
    assert Rename("`db`.`b`", "`db`.`t`", True).sql == "ALTER VIEW `db`.`b` RENAME TO `db`.`t`"
    assert DropTable("`db`.`x`").sql == "DROP TABLE IF EXISTS `db`.`x`"
    assert (
        DropAdded("c.d.t", (("s", "c"), ("we`ird",))).sql
        == "alter table c.d.t drop columns (`s`.`c`, `we``ird`)"
    )
    assert (
        UnsetProperty("`db`.`t`", "a.b", True).sql
        == "ALTER VIEW `db`.`t` UNSET TBLPROPERTIES IF EXISTS ('a.b')"
    )
