"""Target schema and per-column casts of a row-keeping table rewrite (used by the planner)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from dbt.adapters.spark_contracts.core.evolution.capabilities import FormatCapabilities
from dbt.adapters.spark_contracts.core.evolution.operations import ColumnCast, Rewrite
from dbt.adapters.spark_contracts.core.schema.merge import MergeRules, Order, merge_structs
from dbt.adapters.spark_contracts.core.schema.types import Array, Map, Struct, through_structs


class Mode(Enum):
    """Which semantics drive the planner: SPEC §4, or one of dbt's `on_schema_change` values."""

    EVOLVE = "schema_evolution"
    APPEND = "append_new_columns"
    SYNC = "sync_all_columns"


def in_collection(schema: Struct, path: tuple[str, ...]) -> bool:
    """True when `path` passes through an array element or a map key/value."""
    reached = through_structs(schema, path)
    return reached is not None and bool(reached[1]) and isinstance(reached[0], (Array, Map))


def target_schema(deployed: Struct, compiled: Struct, mode: Mode) -> Struct:
    """The table after the change: deployed column order and spelling, new columns last.

    APPEND keeps removed fields and deployed types (nested new fields inserted after their
    predecessor); EVOLVE and SYNC take the compiled types (and nested order)."""
    apply = mode is not Mode.APPEND
    rules = MergeRules(
        top=Order.DEPLOYED_NEW_LAST,
        nested=Order.NEW if apply else Order.DEPLOYED_NEW_INSERTED,
        leaf=lambda path, old, new: new if apply else old,
        map_key=lambda old, new: new if apply else old,
        keeps=not apply,
    )
    return merge_structs(deployed, compiled, rules)


def build_rewrite(
    deployed: Struct,
    compiled: Struct,
    mode: Mode,
    caps: FormatCapabilities,
    properties: Mapping[str, str],
    reason: str,
    fills: Mapping[str, str],
    defaults: Mapping[str, str],
) -> Rewrite:
    """A Rewrite op: each target column cast from its deployed column (new ones filled)."""
    target = target_schema(deployed, compiled, mode)
    casts = []
    for column in target.fields:
        source = deployed.field(column.name)
        key = column.name.lower()
        fill = None if source else fills.get(key)
        default = None if source else defaults.get(key)
        old_type = source.type if source else None
        casts.append(ColumnCast(column.name, old_type, column.type, fill, default))
    carried = tuple(sorted(caps.carried_properties(properties).items()))
    return Rewrite(target, tuple(casts), caps.atomic_rewrite, carried, reason)
