"""core/recovery/swap.py and run/swap.py: a rebuild built beside the relation and swapped in by two
renames. The swap runs against an in-memory catalog (relations with their kind and
properties) that fails at each statement in turn: after the undo the old relation is back
under its name, or the new table holds it, never neither; a statement of the wrong kind (DROP
TABLE on a view) fails as Spark's does."""

from __future__ import annotations

import json
import re

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
from dbt.adapters.spark_contracts.core.recovery.record import SWAP_PROPERTY, RunRecord
from dbt.adapters.spark_contracts.core.recovery.swap import (
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
        self.recorded = False

    def under_way(self) -> None:
        """What `building` yields: the run's record told (here a statement of its own, that
        can fail as any other)."""
        self.run("RECORD swap under way")

    def run(self, sql: str) -> None:
        self.count += 1
        if self.count - 1 == self.fail_at:
            raise RuntimeError(f"failed: {sql}")
        words = sql.split()
        if words[0] == "RECORD":  # the run's record told the swap is under way
            self.recorded = True
            return
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
        """`show tables in <schema> like '<name>'`: the relation, if it is there (no lease
        tables: the run that left a swap is gone)."""
        listed = re.match(r"show tables in (\S+) like '([^*']+)'$", sql)
        if listed and f"{listed.group(1)}.`{listed.group(2)}`" in self.relations:
            return [{"tableName": listed.group(2)}]
        return []


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
        swaps.swap_in(catalog, swap, catalog.under_way)  # a failed last drop only warns
    else:
        with pytest.raises(SwapUndone):
            swaps.swap_in(catalog, swap, catalog.under_way)
    held = catalog.relations[REL]
    assert held["label"] == ("new" if finished else "old")
    assert catalog.recorded == (fail_at > 0)  # told before anything is renamed
    if not finished:
        assert swap.beside not in catalog.relations  # the unfinished build is dropped
    if fail_at == 5:
        assert set(catalog.relations) == {REL}


@given(st.booleans(), st.integers(min_value=0, max_value=1))
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
        swaps.swap_in(catalog, swap, catalog.under_way)
    error = raised.value
    assert "the swap failed" in str(error) and "undo step failed" in str(error)
    undo = swap.undo(swap.steps()[:2])
    assert [type(u) for u in undo] == [Rename, DropTable]
    assert error.remaining == tuple(u.sql for u in undo)[undo_fail:]


@pytest.mark.parametrize("old_is_view", [False, True])
def test_statements_name_the_kind_of_each_relation(old_is_view):
    kind = "VIEW" if old_is_view else "TABLE"
    statements = tuple(step.sql for step in Swap(REL, old_is_view).steps())
    assert statements == (
        "DROP TABLE IF EXISTS `db`.`t__dbt_backup`",
        f"ALTER {kind} `db`.`t` RENAME TO `db`.`t__dbt_backup`",
        "ALTER TABLE `db`.`t__dbt_rewrite` RENAME TO `db`.`t`",
        f"DROP {kind} `db`.`t__dbt_backup`",
    )


def rewrite(renames: bool) -> Intent:
    rename = Step(f"ALTER TABLE {REL} RENAME TO `db`.`t__dbt_backup`", Rename(BACKUP, REL))
    steps = (rename,) if renames else ()
    return Intent("dead", "model.x", REL, "parquet", None, "tag", (), steps)


def rewrite_intent(renames: bool) -> dict:
    """An intent on the table's properties, as earlier builds wrote it."""
    return {INTENT_PROPERTY: rewrite(renames).to_property()}


def legacy_rewrite_intent(statements: tuple[str, ...]) -> dict:
    """An intent as runs wrote it before steps were values: its statements as text."""
    intent = json.loads(Intent("dead", "model.x", REL, "parquet", None, "tag").to_json())
    del intent["steps"]
    return {INTENT_PROPERTY: json.dumps(intent | {"statements": list(statements)})}


def record(**work) -> RunRecord:
    """A dead run's record (released: it binds no one) saying what it was changing."""
    return RunRecord("db.t__dbt_lease_inv", "inv", "0", **work)


def test_only_positive_evidence_is_a_recovery():
    """The run's record saying its swap of the relation was under way, with the new table
    beside; or its intent renaming the table to the backup (a Parquet rewrite); or, from an
    earlier build, the backup's own marker or intent. Nothing else is renamed back."""
    assert recovery(REL, [record(swap=REL)], {}, True) == (Recovery.SWAP, "inv")
    # a finished swap whose record and last drop were left: nothing beside
    assert recovery(REL, [record(swap=REL)], {}, False) is None
    assert recovery(REL, [record(swap="`db`.`u`")], {}, True) is None  # another relation's
    assert recovery(REL, [], {}, True) is None  # no record: nothing proves a swap was under way
    assert recovery(REL, [record(intent=rewrite(True))], {}, False) == (Recovery.REWRITE, "inv")
    assert recovery(REL, [record(intent=rewrite(False))], {}, True) is None
    # earlier builds: the backup's own marker (with the table beside), or its intent
    marked = {SWAP_PROPERTY.upper(): "old-run"}
    assert recovery(REL, [], marked, True) == (Recovery.MARKED, "old-run")
    assert recovery(REL, [], marked, False) is None
    assert recovery(REL, [], {"other": "x"}, True) is None
    assert recovery(REL, [], rewrite_intent(True), False) == (Recovery.REWRITE, "dead")
    assert recovery(REL, [], rewrite_intent(False), True) is None
    # another rename's inverse (a relation that is not the intent's) is no evidence
    other = Step("ALTER TABLE `db`.`u` RENAME TO `db`.`t__dbt_backup`", Rename(BACKUP, "`db`.`u`"))
    foreign = Intent("dead", "model.x", REL, "parquet", None, "tag", (), (other,))
    assert recovery(REL, [record(intent=foreign)], {}, True) is None
    assert recovery(REL, [], {INTENT_PROPERTY: foreign.to_property()}, True) is None


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
    found = recovery(REL, [], legacy_rewrite_intent(tuple(s.sql for s in steps)), False)
    assert found is not None and found[0] is Recovery.REWRITE
    assert (
        recovery(REL, [], legacy_rewrite_intent(("ALTER TABLE x ADD COLUMNS (c INT)",)), True)
        is None
    )


@pytest.mark.parametrize("backup_is_view", [False, True])
@pytest.mark.parametrize("found", list(Recovery))
def test_recovery_renames_back_before_it_drops_the_new_table(backup_is_view, found):
    swap = Swap(REL)
    kind = "VIEW" if backup_is_view else "TABLE"
    relations = {
        swap.backup: {"kind": kind, "label": "old"},
        swap.beside: {"kind": "TABLE", "label": "new"},
    }
    if found is Recovery.MARKED:  # an earlier build marked the old relation itself
        relations[swap.backup][SWAP_PROPERTY] = "inv"
    catalog = Catalog(relations)
    swaps._put_back(catalog, REL, backup_is_view, found, "inv")
    assert set(catalog.relations) == {REL}
    assert catalog.relations[REL]["label"] == "old"
    assert SWAP_PROPERTY not in catalog.relations[REL]  # an earlier build's marker goes too
    steps = put_back(REL, backup_is_view, found)
    assert steps[0] == Rename(swap.backup, REL, backup_is_view)
    assert steps[0].sql.startswith(f"ALTER {kind} `db`.`t__dbt_backup` RENAME TO")
    assert steps[-1] == DropTable(swap.beside)
    assert any(isinstance(s, UnsetProperty) for s in steps) == (found is Recovery.MARKED)


def test_a_failed_recovery_keeps_the_new_table_and_names_what_is_left():
    swap = Swap(REL)
    relations = {
        swap.backup: {"kind": "TABLE", "label": "old"},
        swap.beside: {"kind": "TABLE", "label": "new"},
    }
    catalog = Catalog(relations, fail_at=0)  # the rename back fails
    with pytest.raises(SwapFailed) as raised:
        swaps._put_back(catalog, REL, False, Recovery.SWAP, "inv")
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
        swap.backup: {"kind": "TABLE", "label": "old"},
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
            {"key": SWAP_PROPERTY, "value": REL},
        ]

    catalog.fetch = fetch
    catalog.run = sent.append  # the recovering run's own lease (taken, let go)
    key = ModelKey(REL, "other", "delta", "model.x")
    with pytest.raises(RunInProgress) as raised:
        swaps.recover(catalog, key, {}, False)
    assert raised.value.invocation_id == "inv"
    assert set(catalog.relations) == {swap.backup, swap.beside}  # nothing touched
    assert not any("RENAME" in s.upper() for s in sent), sent


def test_a_swap_whose_relation_is_gone_drops_nothing_but_its_own_build():
    """A run that read dbt's cache before another run died between its renames: the backup
    (the only copy of the old table) survives; only this run's build is dropped."""
    swap = Swap(REL)
    relations = {
        swap.backup: {"kind": "TABLE", "label": "old"},
        swap.beside: {"kind": "TABLE", "label": "new"},
    }
    catalog = Catalog(relations)
    with pytest.raises((SwapUndone, KeyError)):
        swaps.swap_in(catalog, swap, catalog.under_way)
    assert catalog.relations[swap.backup]["label"] == "old"


def test_a_swap_that_lost_its_lease_renames_nothing_more_and_undoes_nothing():
    """The swap's statements go behind the lease's fence (run/swap.building): a swapper that
    stalled past its lease between its two renames sends neither the second rename nor an
    undo; the backup and the table beside stay as they are, with its record, for the run that
    took the model over."""
    from dbt.adapters.spark_contracts.run.record_io import Fenced
    from dbt.adapters.spark_contracts.run.run_errors import LeaseLost

    swap = Swap(REL)
    catalog = Catalog(start(False, None))
    checks: list[int] = []

    def check() -> None:  # before the drop of a stale backup, the first rename, the second
        checks.append(1)
        if len(checks) == 3:
            raise LeaseLost("model.x", REL, "inv3")

    with pytest.raises(LeaseLost):
        swaps.swap_in(Fenced(catalog, check), swap, catalog.under_way)
    assert catalog.relations[swap.backup]["label"] == "old"
    assert catalog.relations[swap.beside]["label"] == "new"
    assert REL not in catalog.relations and len(checks) == 3
