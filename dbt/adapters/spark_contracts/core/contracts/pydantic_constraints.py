"""Pydantic field constraints as SQL rules (`checks.Rule`): annotated_types bounds, lengths,
multiples, Pydantic's pattern and decimal digits, and the literals a Literal or Enum allows. A
constraint with no SQL check is `Unmappable`. Pure."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any

import annotated_types as at

from dbt.adapters.spark_contracts.core.contracts.checks import (
    COLLECTION,
    TEXT,
    Compare,
    Length,
    MultipleOf,
    OneOf,
    Rule,
)
from dbt.adapters.spark_contracts.core.schema.types import Decimal, sql_string

# Pydantic's general metadata that constrains no value
_GENERAL_IGNORED = {"strict", "allow_inf_nan", "coerce_numbers_to_str", "union_mode", "fail_fast"}


class Unmappable(Exception):
    """An annotation or constraint with no Spark type or SQL check, at a field's dotted path."""

    def __init__(self, path: str, what: str):
        self.path, self.what = path, what
        super().__init__(f"{path}: {what}")


def one_of(values: tuple[Any, ...]) -> OneOf:
    literals = tuple(sql_literal(v) for v in values)
    return OneOf(literals, f"one of {list(values)!r}")


def sql_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"CAST({sql_string(repr(value))} AS DOUBLE)"
    if isinstance(value, decimal.Decimal):
        return f"CAST({sql_string(str(value))} AS DECIMAL(38,{max(0, -value.as_tuple().exponent)}))"  # type: ignore[operator]
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP {sql_string(value.isoformat(sep=' '))}"
    if isinstance(value, dt.date):
        return f"DATE {sql_string(value.isoformat())}"
    if isinstance(value, str):
        return sql_string(value)
    raise TypeError(f"no SQL literal for {value!r}")


def general_metadata(metadata: list[Any]) -> dict[str, Any]:
    """Pydantic's own general metadata (pattern, max_digits, decimal_places, ...)."""
    out: dict[str, Any] = {}
    for item in metadata:
        if type(item).__name__ == "_PydanticGeneralMetadata":
            out.update(vars(item))
    return out


_BOUNDS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))


def field_constraints(metadata: list[Any], path: str, of: str) -> tuple[Rule, ...]:
    """Comparison and length rules of annotated_types metadata; unknown metadata is an error."""
    rules: list[Rule] = []
    for item in metadata:
        if item is None or isinstance(item, at.Interval) and not any(vars(item).values()):
            continue
        if isinstance(item, (at.Gt, at.Ge, at.Lt, at.Le, at.Interval)):
            for attr, op in _BOUNDS:
                bound = getattr(item, attr, None)
                if bound is not None:
                    rules.append(Compare(op, _bound(bound, path), f"{attr}={bound!r}"))
        elif isinstance(item, (at.MinLen, at.MaxLen, at.Len)):
            rules += _lengths(item, path, of)
        elif isinstance(item, at.MultipleOf):
            rules.append(
                MultipleOf(_bound(item.multiple_of, path), f"multiple_of={item.multiple_of!r}")
            )
        elif type(item).__name__ == "_PydanticGeneralMetadata":
            unknown = set(vars(item)) - {"pattern", "max_digits", "decimal_places"}
            unknown -= _GENERAL_IGNORED
            if unknown:
                raise Unmappable(path, f"has constraint(s) {sorted(unknown)} with no SQL check")
        elif type(item).__name__ in ("Strict", "FieldInfo"):
            rules += field_constraints(list(getattr(item, "metadata", [])), path, of)
        else:
            raise Unmappable(path, f"has {item!r}, which cannot run in SQL")
    return tuple(rules)


def _lengths(item: Any, path: str, of: str) -> list[Rule]:
    if of not in (TEXT, COLLECTION):
        raise Unmappable(path, "has a length constraint on a type without a length")
    low = getattr(item, "min_length", None)
    high = getattr(item, "max_length", None)
    out: list[Rule] = []
    if low:
        out.append(Length(">=", int(low), of, f"min_length={low}"))
    if high is not None:
        out.append(Length("<=", int(high), of, f"max_length={high}"))
    return out


def _bound(value: Any, path: str) -> str:
    try:
        return sql_literal(value)
    except TypeError as exc:
        raise Unmappable(path, f"has a bound {value!r} with no SQL literal") from exc


def decimal_type(general: Mapping[str, Any], path: str) -> Decimal:
    digits, places = general.get("max_digits"), general.get("decimal_places")
    if digits is None and places is None:
        return Decimal(38, 18)
    if places is None:
        raise Unmappable(path, "is a Decimal with max_digits but no decimal_places")
    precision = digits if digits is not None else 38
    try:
        return Decimal(int(precision), int(places))
    except ValueError as exc:
        raise Unmappable(path, f"is Decimal({precision}, {places}), not a Spark DECIMAL") from exc
