"""One cast renderer: SQL turning a value of one Spark type into another, recursing through
structs (by field name; a field new in the target is NULL), arrays and maps. What happens at a
leaf is the caller's: a plain CAST for a rewrite (render.py), a checked `try_cast` that also
reports the values that do not coerce for a contract's load (load_select.py). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dbt.adapters.spark_contracts.core.schema.types import (
    Array,
    Map,
    SparkType,
    Struct,
    quote_identifier,
    sql_string,
)


@dataclass(frozen=True)
class Built:
    """A value expression plus predicates: `bad` (value does not coerce), `new` (discarded field
    holds a value). Predicates never evaluate to NULL."""

    value: str
    bad: tuple[str, ...] = ()
    new: tuple[str, ...] = ()


Leaf = Callable[[str, SparkType, SparkType], Built]
Same = Callable[[SparkType, SparkType], bool]


def plain_cast(expr: str, source: SparkType, target: SparkType) -> Built:
    return Built(f"CAST({expr} AS {target.to_sql()})")


def _any(collection: str, var: str, predicates: tuple[str, ...]) -> tuple[str, ...]:
    if not predicates:
        return ()
    return (f"coalesce(exists({collection}, {var} -> {' OR '.join(predicates)}), false)",)


def coerce(
    expr: str, source: SparkType, target: SparkType, leaf: Leaf, same: Same, depth: int = 0
) -> Built:
    """`expr` (of type `source`) as `target`; `same(source, target)`: nothing to do."""
    if same(source, target):
        return Built(expr)
    if isinstance(source, Struct) and isinstance(target, Struct):
        return _struct(expr, source, target, leaf, same, depth)
    if isinstance(source, Array) and isinstance(target, Array):
        var = f"x{depth}"
        inner = coerce(var, source.element, target.element, leaf, same, depth + 1)
        value = expr if inner.value == var else f"transform({expr}, {var} -> {inner.value})"
        return Built(value, _any(expr, var, inner.bad), _any(expr, var, inner.new))
    if isinstance(source, Map) and isinstance(target, Map):
        return _map(expr, source, target, leaf, same, depth)
    return leaf(expr, source, target)


def _struct(expr: str, source: Struct, target: Struct, leaf: Leaf, same: Same, depth: int) -> Built:
    parts: list[str] = []
    bad: list[str] = []
    new: list[str] = []
    for field in target.fields:
        old = source.field(field.name)
        if old is None:
            value = f"CAST(NULL AS {field.type.to_sql()})"
        else:
            access = f"{expr}.{quote_identifier(old.name)}"
            built = coerce(access, old.type, field.type, leaf, same, depth)
            value, bad, new = built.value, [*bad, *built.bad], [*new, *built.new]
        parts += [sql_string(field.name), value]
    for field in source.fields:
        if target.field(field.name) is None:
            new.append(f"{expr}.{quote_identifier(field.name)} IS NOT NULL")
    value = f"IF({expr} IS NULL, NULL, named_struct({', '.join(parts)}))"
    return Built(value, tuple(bad), tuple(new))


def _map(expr: str, source: Map, target: Map, leaf: Leaf, same: Same, depth: int) -> Built:
    key, var = f"k{depth}", f"v{depth}"
    out = expr
    if not same(source.key, target.key):
        new_key = coerce(key, source.key, target.key, leaf, same, depth + 1)
        out = f"transform_keys({out}, ({key}, {var}) -> {new_key.value})"
    inner = coerce(var, source.value, target.value, leaf, same, depth + 1)
    if inner.value != var:
        out = f"transform_values({out}, ({key}, {var}) -> {inner.value})"
    values = f"map_values({expr})"
    return Built(out, _any(values, var, inner.bad), _any(values, var, inner.new))
