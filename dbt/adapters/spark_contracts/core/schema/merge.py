"""One struct merge: the schema a table has once a new schema is merged into the deployed one,
recursing through structs, arrays and maps. What differs between its users is a `MergeRules`:

- an evolving write (write_path.py): deployed order, new fields last, in-write widenings only;
- a row-keeping rewrite (rewrite.py): compiled types and order, or deployed ones (APPEND);
- a schema contract's target (enforce.py): the accepted additions and widenings only.
Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum

from dbt.adapters.spark_contracts.core.schema.types import (
    Array,
    Field,
    Map,
    SparkType,
    Struct,
    as_nullable,
)

Path = tuple[str, ...]  # lower-cased names; `element` / `value` inside arrays and maps


class Order(Enum):
    NEW = "the new schema's order; fields only in the deployed one are dropped"
    DEPLOYED_NEW_LAST = "the deployed order, new fields last"
    DEPLOYED_NEW_INSERTED = (
        "the deployed order, each new field after its predecessor in the new one"
    )


@dataclass(frozen=True)
class MergeRules:
    """`leaf(path, old, new)`: the type where both sides have a non-nested type; `map_key(old,
    new)`: a map's key type; `adds(path)`: a field only in the new schema is kept; `keeps`:
    fields only in the deployed schema stay (for the two deployed orders); `deep_nullable`: a new
    field's nested types become nullable too (else only the field)."""

    top: Order
    nested: Order
    leaf: Callable[[Path, SparkType, SparkType], SparkType]
    map_key: Callable[[SparkType, SparkType], SparkType]
    adds: Callable[[Path], bool] = lambda path: True
    keeps: bool = True
    deep_nullable: bool = True


def merge_structs(old: Struct, new: Struct, rules: MergeRules, path: Path = ()) -> Struct:
    """`new` merged into `old`: a field on both sides keeps the deployed name, comment and
    properties, its type merged and nullable if either side is."""
    order = rules.top if not path else rules.nested
    both: dict[str, Field] = {}
    for field in old.fields:
        other = new.field(field.name)
        if other is not None:
            merged = merge_types(field.type, other.type, rules, (*path, field.name.lower()))
            nullable = field.nullable or other.nullable
            both[field.name.lower()] = replace(field, type=merged, nullable=nullable)
    added = [
        _added(f, rules)
        for f in new.fields
        if old.field(f.name) is None and rules.adds((*path, f.name.lower()))
    ]
    if order is Order.NEW:
        added_by_name = {f.name.lower(): f for f in added}
        in_new = (both.get(f.name.lower()) or added_by_name.get(f.name.lower()) for f in new.fields)
        return Struct(tuple(f for f in in_new if f is not None))
    kept = [both.get(f.name.lower()) or (f if rules.keeps else None) for f in old.fields]
    fields = [f for f in kept if f is not None]
    if order is Order.DEPLOYED_NEW_LAST:
        return Struct(tuple(fields + added))
    for field in added:  # after the field before it in the new schema (first: at the front)
        names = [f.name.lower() for f in new.fields]
        before = names[: names.index(field.name.lower())]
        anchor = next((n for n in reversed(before) if _index(fields, n) is not None), None)
        at = 0 if anchor is None else (_index(fields, anchor) or 0) + 1
        fields.insert(at, field)
    return Struct(tuple(fields))


def merge_types(old: SparkType, new: SparkType, rules: MergeRules, path: Path = ()) -> SparkType:
    if isinstance(old, Struct) and isinstance(new, Struct):
        return merge_structs(old, new, rules, path)
    if isinstance(old, Array) and isinstance(new, Array):
        element = merge_types(old.element, new.element, rules, (*path, "element"))
        return Array(element, old.contains_null or new.contains_null)
    if isinstance(old, Map) and isinstance(new, Map):
        value = merge_types(old.value, new.value, rules, (*path, "value"))
        nulls = old.value_contains_null or new.value_contains_null
        return Map(rules.map_key(old.key, new.key), value, nulls)
    return rules.leaf(path, old, new)


def _added(field: Field, rules: MergeRules) -> Field:
    kind = as_nullable(field.type) if rules.deep_nullable else field.type
    return Field(field.name, kind, True, field.comment)


def _index(fields: list[Field], name: str) -> int | None:
    return next((i for i, f in enumerate(fields) if f.name.lower() == name), None)
