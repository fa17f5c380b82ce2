"""core/recovery/swap.py and run/swap.py: a rebuild built beside the relation and swapped in by two
renames. The swap runs against an in-memory catalog (relations with their kind and
properties) that fails at each statement in turn: after the undo the old relation is back
under its name, or the new table holds it, never neither; a statement of the wrong kind (DROP
TABLE on a view) fails as Spark's does."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.evolution.plan import Policy, plan_schema_change
from dbt.adapters.spark_contracts.core.evolution.render import render_plan
from dbt.adapters.spark_contracts.core.evolution.steps import (
    DropTable,
    Rename,
    Step,
    UnsetProperty,
    undo,
)
from dbt.adapters.spark_contracts.core.recovery.intent import INTENT_PROPERTY, Intent, find_intent
from dbt.adapters.spark_contracts.core.recovery.swap import (
    SWAP_PROPERTY,
    Recovery,
    Swap,
    put_back,
    recovery,
)
from dbt.adapters.spark_contracts.core.schema.diff import diff_schemas
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.run import swap as swaps
from dbt.adapters.spark_contracts.run.run_errors import SwapFailed, SwapUndone

REL = "`db`.`t`"
BACKUP = "`db`.`t__dbt_backup`"


class Catalog:
    """Relations by name: kind (TABLE / VIEW), label, properties. Runs the swap's statements
    (a `fail_at`-th statement, counted from 0, raises instead of running)."""

    def __init__(self, relations, fail_at=None):
        self.relations = {k: dict(v) for k, v in relations.items()}
        self.fail_at, self.count = fail_at, 0

    def run(self, sql: str) -> None:
        self.count += 1
        if self.count - 1 == self.fail_at:
            raise RuntimeError(f"failed: {sql}")
        words = sql.split()
        kind = words[1]
        if words[0] == "DROP":
            name = words[-1]
            if name not in self.relations:
                if "IF EXISTS" not in sql:
                    raise KeyError(name)
                return
            assert self.relations[name]["kind"] == kind, sql
            del self.relations[name]
            return
        name = words[2]
        assert self.relations[name]["kind"] == kind, sql
        if "RENAME TO" in sql:
            new = words[-1]
            if new in self.relations:
                raise KeyError(f"{new} exists")
            self.relations[new] = self.relations.pop(name)
        elif "UNSET TBLPROPERTIES" in sql:
            self.relations[name].pop(SWAP_PROPERTY, None)
        elif "SET TBLPROPERTIES" in sql:
            self.relations[name][SWAP_PROPERTY] = "marker"
        else:
            raise AssertionError(sql)

    def fetch(self, sql: str):
        return []  # no lease tables: the marking run is gone


def start(old_is_view: bool, stale_backup: bool | None) -> dict:
    swap = Swap(REL, old_is_view)
    relations = {
        REL: {"kind": "VIEW" if old_is_view else "TABLE", "label": "old"},
        swap.beside: {"kind": "TABLE", "label": "new"},
    }
    if stale_backup is not None:  # a finished swap's leftover: a table or a view
        relations[swap.backup] = {"kind": "VIEW" if stale_backup else "TABLE", "label": "stale"}
    return relations


@given(st.booleans(), st.none() | st.booleans(), st.integers(min_value=0, max_value=5))
def test_a_swap_failing_anywhere_leaves_the_old_relation_or_the_new_table(
    old_is_view, stale_backup, fail_at
):
    swap = Swap(REL, old_is_view, bool(stale_backup))
    catalog = Catalog(start(old_is_view, stale_backup), fail_at)
    finished = fail_at >= 4  # the second rename (statement 3) ran: the new table stands
    if finished:
        swaps.swap_in(catalog, swap, "inv")  # a failed last drop only warns
    else:
        with pytest.raises(SwapUndone):
            swaps.swap_in(catalog, swap, "inv")
    held = catalog.relations[REL]
    assert held["label"] == ("new" if finished else "old")
    assert SWAP_PROPERTY not in held
    if not finished:
        assert swap.beside not in catalog.relations  # the unfinished build is dropped
    if fail_at == 5:
        assert set(catalog.relations) == {REL}


@given(st.booleans(), st.integers(min_value=0, max_value=2))
def test_a_failing_undo_names_both_failures_and_the_steps_left_in_order(old_is_view, undo_fail):
    swap = Swap(REL, old_is_view)
    # statement 3 (the second rename) fails, then the undo's `undo_fail`-th step
    catalog = Catalog(start(old_is_view, None), fail_at=3)
    failing = catalog.run

    def run(sql, calls=[0]):  # noqa: B006 - counts the undo's steps
        if catalog.count >= 4:
            calls[0] += 1
            if calls[0] - 1 == undo_fail:
                raise RuntimeError("undo step failed")
        return failing(sql)

    catalog.run = run
    with pytest.raises(SwapFailed) as raised:
        swaps.swap_in(catalog, swap, "inv")
    error = raised.value
    assert "the swap failed" in str(error) and "undo step failed" in str(error)
    undo = swap.undo(swap.steps("inv")[:3])
    assert [type(u) for u in undo] == [Rename, UnsetProperty, DropTable]
    assert error.remaining == tuple(u.sql for u in undo)[undo_fail:]


@pytest.mark.parametrize("old_is_view", [False, True])
def test_statements_name_the_kind_of_each_relation(old_is_view):
    kind = "VIEW" if old_is_view else "TABLE"
    statements = tuple(step.sql for step in Swap(REL, old_is_view).steps("inv"))
    assert statements == (
        f"ALTER {kind} `db`.`t` SET TBLPROPERTIES ('{SWAP_PROPERTY}' = 'inv')",
        "DROP TABLE IF EXISTS `db`.`t__dbt_backup`",
        f"ALTER {kind} `db`.`t` RENAME TO `db`.`t__dbt_backup`",
        "ALTER TABLE `db`.`t__dbt_rewrite` RENAME TO `db`.`t`",
        f"DROP {kind} `db`.`t__dbt_backup`",
    )


def rewrite_intent(renames: bool) -> dict:
    rename = Step(f"ALTER TABLE {REL} RENAME TO `db`.`t__dbt_backup`", Rename(BACKUP, REL))
    steps = (rename,) if renames else ()
    intent = Intent("dead", "model.x", REL, "parquet", None, "tag", (), steps)
    return {INTENT_PROPERTY: intent.to_property()}


def legacy_rewrite_intent(statements: tuple[str, ...]) -> dict:
    """An intent as runs wrote it before steps were values: its statements as text."""
    intent = json.loads(Intent("dead", "model.x", REL, "parquet", None, "tag").to_json())
    del intent["steps"]
    return {INTENT_PROPERTY: json.dumps(intent | {"statements": list(statements)})}


def test_only_the_backups_own_evidence_is_a_recovery():
    marked = {SWAP_PROPERTY.upper(): "inv"}
    assert recovery(marked, beside_exists=True) is Recovery.SWAP
    # a finished swap whose last drop did not run: marked, nothing beside
    assert recovery(marked, beside_exists=False) is None
    assert recovery({"other": "x"}, beside_exists=True) is None
    assert recovery(rewrite_intent(True), beside_exists=False) is Recovery.REWRITE
    assert recovery(rewrite_intent(False), beside_exists=True) is None
    # another rename's inverse (a relation that is not the intent's) is no evidence
    other = Step("ALTER TABLE `db`.`u` RENAME TO `db`.`t__dbt_backup`", Rename(BACKUP, "`db`.`u`"))
    foreign = Intent("dead", "model.x", REL, "parquet", None, "tag", (), (other,))
    assert recovery({INTENT_PROPERTY: foreign.to_property()}, beside_exists=True) is None


@pytest.mark.parametrize("completed", range(8))
def test_an_intent_written_as_text_is_read_with_the_rewrites_inverses(completed):
    """An intent a run of the previous version left (its statements as text) is read back into
    the steps the renderer makes now: the same evidence for the recovery, the same undo."""
    d, c = parse_type("struct<a:int,b:int>"), parse_type("struct<a:bigint>")
    policy = Policy(allow_full_refresh=True, allow_column_removal=True)
    plan = plan_schema_change(diff_schemas(d, c), "parquet", {}, policy, d, c)
    steps = render_plan(plan, REL, "parquet")
    legacy = find_intent(legacy_rewrite_intent(tuple(s.sql for s in steps)))
    assert legacy is not None and [s.sql for s in legacy.steps] == [s.sql for s in steps]
    assert undo(legacy.steps[:completed]) == undo(steps[:completed])
    assert recovery(legacy_rewrite_intent(tuple(s.sql for s in steps)), False) is Recovery.REWRITE
    assert recovery(legacy_rewrite_intent(("ALTER TABLE x ADD COLUMNS (c INT)",)), True) is None


@pytest.mark.parametrize("backup_is_view", [False, True])
@pytest.mark.parametrize("found", list(Recovery))
def test_recovery_renames_back_before_it_drops_the_new_table(backup_is_view, found):
    swap = Swap(REL)
    kind = "VIEW" if backup_is_view else "TABLE"
    relations = {
        swap.backup: {"kind": kind, "label": "old", SWAP_PROPERTY: "inv"},
        swap.beside: {"kind": "TABLE", "label": "new"},
    }
    catalog = Catalog(relations)
    properties = {SWAP_PROPERTY: "inv"} if found is Recovery.SWAP else rewrite_intent(True)
    swaps._recover(catalog, REL, properties, backup_is_view, found, "model.x")
    assert set(catalog.relations) == {REL}
    assert catalog.relations[REL]["label"] == "old"
    assert (SWAP_PROPERTY in catalog.relations[REL]) == (found is Recovery.REWRITE)
    steps = put_back(REL, backup_is_view, found)
    assert steps[0] == Rename(swap.backup, REL, backup_is_view)
    assert steps[0].sql.startswith(f"ALTER {kind} `db`.`t__dbt_backup` RENAME TO")
    assert steps[-1] == DropTable(swap.beside)


def test_a_failed_recovery_keeps_the_new_table_and_names_what_is_left():
    swap = Swap(REL)
    relations = {
        swap.backup: {"kind": "TABLE", "label": "old", SWAP_PROPERTY: "inv"},
        swap.beside: {"kind": "TABLE", "label": "new"},
    }
    catalog = Catalog(relations, fail_at=0)  # the rename back fails
    with pytest.raises(SwapFailed) as raised:
        swaps._recover(catalog, REL, {SWAP_PROPERTY: "inv"}, False, Recovery.SWAP, "model.x")
    assert swap.beside in catalog.relations and swap.backup in catalog.relations
    assert raised.value.remaining == tuple(u.sql for u in put_back(REL, False, Recovery.SWAP))


def test_a_swap_whose_run_holds_its_lease_is_left_alone(monkeypatch):
    """The run that left the swap renews its lease while the recovering run watches it (its
    process runs): the recovery fails naming it, and nothing is renamed."""
    import itertools
    import os
    import socket

    from dbt.adapters.spark_contracts.core.recovery.pending import BEAT_PROPERTY, RUN_PROPERTY
    from dbt.adapters.spark_contracts.core.recovery.record import CLIENT_PROPERTY
    from dbt.adapters.spark_contracts.run.lease import LEASE_ENV, ModelKey
    from dbt.adapters.spark_contracts.run.run_errors import RunInProgress

    monkeypatch.setenv(LEASE_ENV, "3")
    swap = Swap(REL)
    relations = {
        swap.backup: {"kind": "TABLE", "label": "old", SWAP_PROPERTY: "inv"},
        swap.beside: {"kind": "TABLE", "label": "new"},
    }
    catalog = Catalog(relations)
    beats = itertools.count(1)
    sent = []

    def fetch(sql: str):  # the marking run's lease, renewed between two reads
        if sql.startswith("show tables"):
            return [{"tableName": "t__dbt_lease_inv"}]
        return [
            {"key": BEAT_PROPERTY, "value": str(next(beats))},
            {"key": RUN_PROPERTY, "value": "inv"},
            {"key": CLIENT_PROPERTY, "value": f"{socket.gethostname()}/{os.getpid()}"},
        ]

    catalog.fetch = fetch
    catalog.run = sent.append  # the recovering run's own lease (taken, let go)
    key = ModelKey(REL, "other", "delta", "model.x")
    with pytest.raises(RunInProgress) as raised:
        swaps.recover(catalog, key, {SWAP_PROPERTY: "inv"}, False, Recovery.SWAP)
    assert raised.value.invocation_id == "inv"
    assert set(catalog.relations) == {swap.backup, swap.beside}  # nothing touched
    assert not any("RENAME" in s.upper() for s in sent), sent


def test_a_swap_whose_relation_is_gone_drops_nothing_but_its_own_build():
    """A run that read dbt's cache before another run died between its renames: the marked
    backup (the only copy of the old table) survives; only this run's build is dropped."""
    swap = Swap(REL)
    relations = {
        swap.backup: {"kind": "TABLE", "label": "old", SWAP_PROPERTY: "dead"},
        swap.beside: {"kind": "TABLE", "label": "new"},
    }
    catalog = Catalog(relations)
    with pytest.raises((SwapUndone, KeyError)):
        swaps.swap_in(catalog, swap, "inv")
    assert catalog.relations[swap.backup]["label"] == "old"
