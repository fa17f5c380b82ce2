"""core/swap.py: a rebuild built beside the relation and swapped in by two renames. The swap is
run against an in-memory catalog that fails at each statement in turn; after the undo the old
relation is back under its name, or the new table holds it, never neither."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.swap import SWAP_PROPERTY, Swap, between_renames


class Catalog:
    """Relations by name (each a label and its properties); runs the swap's statements."""

    def __init__(self, relations):
        self.relations = {k: dict(v) for k, v in relations.items()}

    def run(self, sql: str) -> None:
        words = sql.split()
        if words[0] == "DROP":
            name = words[-1]
            if "IF EXISTS" not in sql and name not in self.relations:
                raise KeyError(name)
            self.relations.pop(name, None)
        elif "RENAME TO" in sql:
            old, new = words[2], words[-1]
            if new in self.relations:
                raise KeyError(f"{new} exists")
            self.relations[new] = self.relations.pop(old)
        elif "UNSET TBLPROPERTIES" in sql:
            self.relations[words[2]].pop(SWAP_PROPERTY, None)
        elif "SET TBLPROPERTIES" in sql:
            self.relations[words[2]][SWAP_PROPERTY] = "marker"
        else:
            raise AssertionError(sql)


def run_until(swap: Swap, catalog: Catalog, fail_at: int | None) -> list[str]:
    executed = []
    for i, sql in enumerate(swap.statements("tag")):
        if i == fail_at:
            return executed
        catalog.run(sql)
        executed.append(sql)
    return executed


@given(st.booleans(), st.booleans(), st.integers(min_value=0, max_value=5))
def test_a_swap_stopped_anywhere_leaves_the_old_relation_or_the_new_table(
    old_is_view, stale_backup, fail_at
):
    swap = Swap("`db`.`t`", old_is_view)
    relations = {"`db`.`t`": {"label": "old"}, swap.beside: {"label": "new"}}
    if stale_backup:
        relations[swap.backup] = {"label": "stale"}
    catalog = Catalog(relations)
    executed = run_until(swap, catalog, fail_at)
    for sql in swap.undo(executed):
        catalog.run(sql)
    held = catalog.relations["`db`.`t`"]
    finished = len(executed) >= 4  # the second rename ran: the new table stands
    assert held["label"] == ("new" if finished else "old")
    assert SWAP_PROPERTY not in held
    if not finished:
        assert swap.beside not in catalog.relations  # the half-swapped table is dropped
    if len(executed) == 5:
        assert set(catalog.relations) == {"`db`.`t`"}


@pytest.mark.parametrize("old_is_view", [False, True])
def test_statements_name_the_kind_of_the_old_relation(old_is_view):
    kind = "VIEW" if old_is_view else "TABLE"
    statements = Swap("`db`.`t`", old_is_view).statements("tag")
    assert statements == (
        "DROP TABLE IF EXISTS `db`.`t__dbt_backup`",
        f"ALTER {kind} `db`.`t` SET TBLPROPERTIES ('{SWAP_PROPERTY}' = 'tag')",
        f"ALTER {kind} `db`.`t` RENAME TO `db`.`t__dbt_backup`",
        "ALTER TABLE `db`.`t__dbt_rewrite` RENAME TO `db`.`t`",
        f"DROP {kind} `db`.`t__dbt_backup`",
    )


def test_only_a_marked_backup_with_the_new_table_beside_is_between_renames():
    marked = {SWAP_PROPERTY.upper(): "tag"}
    assert between_renames(marked, beside_exists=True)
    # a finished swap whose last drop did not run: the backup is marked, nothing beside
    assert not between_renames(marked, beside_exists=False)
    assert not between_renames({"other": "x"}, beside_exists=True)
    assert not between_renames(None, beside_exists=True)
