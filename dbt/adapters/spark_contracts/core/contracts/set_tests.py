"""The set tests' part of the gates (core/contracts/data_tests.py, issue 42): what `unique` and
`relationships` read besides the load's rows, as subqueries of their gate's column that Spark
runs as joins in the load's one pass (never through the driver). Pure: rendering only."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dbt.adapters.spark_contracts.core.schema.types import quote_identifier

NARROWED_MERGE = (
    "a set test: the merge is narrowed (incremental_predicates, merge_update_columns or "
    "merge_exclude_columns), so a key it brings may be inserted beside the table's row of it, "
    "or the row left as it was"
)
REPLACES_PART = (
    "a set test: the load replaces part of the table (insert_overwrite, microbatch), so which "
    "of the table's keys stay is not known before it"
)
_REF = re.compile(r"""^\s*ref\(\s*['"]([^'"]+)['"]\s*(?:,\s*['"]([^'"]+)['"]\s*)?\)\s*$""")
_SOURCE = re.compile(r"""^\s*source\(\s*['"]([^'"]+)['"]\s*,\s*['"]([^'"]+)['"]\s*\)\s*$""")


@dataclass(frozen=True)
class GatedLoad:
    """What a set test must know of the load it gates. `whole`: the load writes the whole table
    (a rebuild, the creating run): its rows are all the table holds. Else `table`: the table
    the load adds its rows to (None: the load replaces part of it), `merge_keys` the merge's
    unique_key (empty: an append), `narrowed`: the merge has incremental_predicates or a column
    list (`unique` is checked after it)."""

    whole: bool = False
    table: str | None = None
    merge_keys: tuple[str, ...] = ()
    narrowed: bool = False


def gated_load(
    strategy: str,
    relation: str,
    unique_key: tuple[str, ...],
    rebuild: str,
    merge: str = "merge",
    narrowed: bool = False,
) -> GatedLoad:
    """The load of an incremental run or rebuild by its strategy (`rebuild`: the strategy of a
    load that writes the whole table; `merge`: of one that merges on the model's `unique_key`,
    `narrowed` as `LoadOptions.narrowed`; any other but `append` replaces part of the table)."""
    if strategy == rebuild:
        return GatedLoad(whole=True)
    if strategy == "append":
        return GatedLoad(table=relation)
    if strategy == merge:
        return GatedLoad(table=relation, merge_keys=unique_key, narrowed=narrowed)
    return GatedLoad()


def set_test_why_not(unique: bool, parent: str | None, load: GatedLoad) -> str | None:
    """Why a `unique` (else `relationships`) test cannot gate this load, or None."""
    if not unique:
        if parent is None:
            return (
                "its parent (`to`) is the model itself, or not a model, seed, snapshot or "
                "source of the project"
            )
        return None
    if load.whole:
        return None
    if load.table is None:
        return REPLACES_PART
    if load.merge_keys and load.narrowed:
        return NARROWED_MERGE
    return None


def bare_name(name: str) -> str:
    """A column or key name as a model's config may quote it, unquoted."""
    return name.strip('`"')


def _merges_on(column: str, merge_keys: tuple[str, ...]) -> bool:
    """The merge's unique_key is the tested column alone."""
    return [bare_name(k).lower() for k in merge_keys] == [bare_name(column).lower()]


def parent_relation(
    node: Mapping[str, Any], to: Any, model: str, nodes: Mapping[str, Mapping[str, Any]]
) -> str | None:
    """The relation a `relationships` test's `to` names: the node it depends on (besides the
    model, unless `to` names the model itself) whose name matches, by its `relation_name`."""
    text = str(to or "")
    ref, source = _REF.match(text), _SOURCE.match(text)
    for uid in (node.get("depends_on") or {}).get("nodes") or ():
        if uid == model:  # the model's own keys: a load adding rows may add both sides
            continue
        parent = nodes.get(uid) or {}
        if ref is not None:
            name = ref.group(2) or ref.group(1)
            package = ref.group(1) if ref.group(2) else None
            matches = parent.get("name") == name and package in (None, parent.get("package_name"))
        elif source is not None:
            matches = (parent.get("source_name"), parent.get("name")) == source.groups()
        else:
            matches = False
        if matches and parent.get("relation_name"):
            return str(parent["relation_name"])
    return None


def unique_failing(column: str, where: str | None, load: GatedLoad) -> str:
    """Every row of a key more than one of the load's rows holds (among the rows `where` keeps,
    as the test counts them): a window over the load's rows, in the one pass. Where the load
    appends to a table, also every row whose key the table holds (its rows `where` keeps): a
    semi-join Spark runs in the same pass. A merge on the key updates the table's row of it:
    only the load's own duplicates. A merge on another key updates the table's row of the
    row's merge key: also every row whose key the table holds on a row of another merge key (or
    a NULL one, which no merge matches). Such a table row may be one the same load changes,
    which frees its key only if the load's row for it is kept: the gate does not count on it
    (conservative: such a row is turned away, counted and quarantined, never loaded to break
    the test)."""
    counted = f"{column} IS NOT NULL"
    if where:
        counted += f" AND coalesce(({where}), false)"
    window = f"sum(CASE WHEN {counted} THEN 1 ELSE 0 END) OVER (PARTITION BY {column})"
    duplicated = f"{window} > 1"
    if load.table is not None and not _merges_on(column, load.merge_keys):
        held = f"{column} IN (SELECT {column} FROM {load.table} WHERE {counted})"
        if load.merge_keys:  # held on this row's own merge key: the merge updates that row
            keys = ", ".join(quote_identifier(bare_name(k)) for k in load.merge_keys)
            own = f"SELECT {column}, {keys} FROM {load.table} WHERE {counted}"
            held += f" AND NOT coalesce(({column}, {keys}) IN ({own}), false)"
        duplicated = f"{duplicated} OR ({held})"
    return f"{column} IS NOT NULL AND ({duplicated})"


def relationships_failing(column: str, field: str, parent: str) -> str:
    """A key the parent's `field` does not hold (NULL keys pass, as in dbt's test): the parent
    read once, Spark's null-aware semi-join over its non-NULL keys."""
    keys = f"SELECT {field} FROM {parent} WHERE {field} IS NOT NULL"
    return f"{column} IS NOT NULL AND {column} NOT IN ({keys})"
