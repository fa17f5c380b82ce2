"""Target schema and per-column casts of a row-keeping table rewrite (used by the planner)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from enum import Enum

from .capabilities import FormatCapabilities
from .operations import ColumnCast, Rewrite
from .types import Array, Field, Map, SparkType, Struct, as_nullable


class Mode(Enum):
    """Which semantics drive the planner: SPEC §4, or one of dbt's `on_schema_change` values."""

    EVOLVE = "schema_evolution"
    APPEND = "append_new_columns"
    SYNC = "sync_all_columns"


def in_collection(schema: Struct, path: tuple[str, ...]) -> bool:
    """True when `path` passes through an array element or a map key/value."""
    current: SparkType = schema
    for segment in path:
        if isinstance(current, (Array, Map)):
            return True
        if not isinstance(current, Struct):
            return False
        found = current.field(segment)
        if found is None:
            return False
        current = found.type
    return False


def target_schema(deployed: Struct, compiled: Struct, mode: Mode) -> Struct:
    """The table after the change: deployed column order and spelling, new columns last.

    APPEND keeps removed fields and deployed types; EVOLVE and SYNC take the compiled ones.
    """
    apply_types = mode is not Mode.APPEND
    fields: list[Field] = []
    for old in deployed.fields:
        new = compiled.field(old.name)
        if new is None:
            if mode is Mode.APPEND:
                fields.append(old)
            continue
        merged = _merge(old.type, new.type, apply_types)
        fields.append(replace(old, type=merged, nullable=old.nullable or new.nullable))
    for new in compiled.fields:
        if deployed.field(new.name) is None:
            fields.append(Field(new.name, as_nullable(new.type), True, new.comment))
    return Struct(tuple(fields))


def _merge(old: SparkType, new: SparkType, apply_types: bool) -> SparkType:
    if isinstance(old, Struct) and isinstance(new, Struct):
        return _merge_struct(old, new, apply_types)
    if isinstance(old, Array) and isinstance(new, Array):
        element = _merge(old.element, new.element, apply_types)
        return Array(element, old.contains_null or new.contains_null)
    if isinstance(old, Map) and isinstance(new, Map):
        key = new.key if apply_types else old.key
        value = _merge(old.value, new.value, apply_types)
        return Map(key, value, old.value_contains_null or new.value_contains_null)
    return new if apply_types else old


def _merge_struct(old: Struct, new: Struct, apply_types: bool) -> Struct:
    """Nested fields: compiled order when types apply, else deployed order plus insertions."""
    merged: list[Field] = []
    for field in new.fields:
        existing = old.field(field.name)
        if existing is None:
            merged.append(Field(field.name, as_nullable(field.type), True, field.comment))
        else:
            both = _merge(existing.type, field.type, apply_types)
            merged.append(
                replace(existing, type=both, nullable=existing.nullable or field.nullable)
            )
    if apply_types:
        return Struct(tuple(merged))
    result = list(old.fields)
    for index, field in enumerate(merged):
        if old.field(field.name) is not None:
            result[_index(result, field.name)] = field
            continue
        anchor = merged[index - 1].name if index else None
        result.insert(_index(result, anchor) + 1 if anchor else 0, field)
    return Struct(tuple(result))


def _index(fields: list[Field], name: str) -> int:
    return next(i for i, f in enumerate(fields) if f.name.lower() == name.lower())


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
