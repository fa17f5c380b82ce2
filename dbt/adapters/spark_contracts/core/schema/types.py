"""Typed model of Spark SQL data types: parse DDL, catalog strings and schema JSON, render them back.

A table schema is a `Struct`; this module and `render.py` are the only places that quote identifiers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, ClassVar

INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_INTEGRAL_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}
YEAR_MONTH_UNITS = ("year", "month")
DAY_TIME_UNITS = ("day", "hour", "minute", "second")


def _interval_names() -> frozenset[str]:
    names = {"interval"}
    for units in (YEAR_MONTH_UNITS, DAY_TIME_UNITS):
        for i, start in enumerate(units):
            names.add(f"interval {start}")
            names.update(f"interval {start} to {end}" for end in units[i + 1 :])
    return frozenset(names)


PRIMITIVE_NAMES = (
    frozenset(
        {
            *("boolean", "tinyint", "smallint", "int", "bigint", "float", "double"),
            *(
                "date",
                "timestamp",
                "timestamp_ntz",
                "string",
                "binary",
                "void",
                "variant",
            ),
        }
    )
    | _interval_names()
)
ALIASES = {
    "integer": "int",
    "long": "bigint",
    "short": "smallint",
    "byte": "tinyint",
    "real": "float",
    "timestamp_ltz": "timestamp",
    "null": "void",
}
# Spark's JSON schema spells these catalog names out (pyspark's `DataType.json()`)
_JSON_NAMES = {"tinyint": "byte", "smallint": "short", "int": "integer", "bigint": "long"}
# where Spark's JSON schema keeps a char/varchar field's type (the field itself reads `string`)
CHAR_VARCHAR_METADATA_KEY = "__CHAR_VARCHAR_TYPE_STRING"


def quote_identifier(name: str) -> str:
    """Backtick-quote a Spark identifier, doubling embedded backticks."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(value: str) -> str:
    """Render a Spark SQL single-quoted string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _simple_name(name: str) -> str:
    plain = name.replace("_", "a").isalnum() and name.isascii() and not name[:1].isdigit()
    return name if plain else quote_identifier(name)


class _Atomic:
    """A type that holds no other type: its DDL is its catalog string in capitals, its JSON
    (Spark's `jsonValue()`) that string."""

    def simple_string(self) -> str:
        raise NotImplementedError

    def to_sql(self) -> str:
        return self.simple_string().upper()

    def to_json(self) -> Any:
        return self.simple_string()


@dataclass(frozen=True)
class Primitive(_Atomic):
    """A type without parameters, by canonical catalog name (`int`, `interval day to second`)."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in PRIMITIVE_NAMES:
            raise ValueError(f"unknown Spark primitive type {self.name!r}")

    def simple_string(self) -> str:
        return self.name

    def to_json(self) -> Any:
        return _JSON_NAMES.get(self.name, self.name)


@dataclass(frozen=True)
class _Sized(_Atomic):
    """A string type of `length` characters (`char`: exactly, `varchar`: at most)."""

    length: int
    keyword: ClassVar[str]

    def simple_string(self) -> str:
        return f"{self.keyword}({self.length})"


class Char(_Sized):
    keyword = "char"


class Varchar(_Sized):
    keyword = "varchar"


@dataclass(frozen=True)
class Decimal(_Atomic):
    precision: int = 10
    scale: int = 0

    def __post_init__(self) -> None:
        if not (1 <= self.precision <= 38 and 0 <= self.scale <= self.precision):
            raise ValueError(f"invalid decimal({self.precision},{self.scale})")

    def simple_string(self) -> str:
        return f"decimal({self.precision},{self.scale})"


class _Nested:
    """A type of other types: its DDL and its catalog string name it and list its parts (an
    element, a key and a value, fields), each part rendered the same way."""

    keyword: ClassVar[str]

    def parts(self) -> Sequence[SparkType | Field]:
        raise NotImplementedError

    def to_sql(self) -> str:
        return f"{self.keyword.upper()}<{', '.join(p.to_sql() for p in self.parts())}>"

    def simple_string(self) -> str:
        return f"{self.keyword}<{','.join(p.simple_string() for p in self.parts())}>"


@dataclass(frozen=True)
class Array(_Nested):
    element: SparkType
    contains_null: bool = True
    keyword: ClassVar[str] = "array"

    def parts(self) -> Sequence[SparkType]:
        return (self.element,)

    def to_json(self) -> Any:
        return {
            "type": "array",
            "elementType": self.element.to_json(),
            "containsNull": self.contains_null,
        }


@dataclass(frozen=True)
class Map(_Nested):
    key: SparkType
    value: SparkType
    value_contains_null: bool = True
    keyword: ClassVar[str] = "map"

    def parts(self) -> Sequence[SparkType]:
        return (self.key, self.value)

    def to_json(self) -> Any:
        return {
            "type": "map",
            "keyType": self.key.to_json(),
            "valueType": self.value.to_json(),
            "valueContainsNull": self.value_contains_null,
        }


@dataclass(frozen=True)
class Field:
    name: str
    type: SparkType
    nullable: bool = True
    comment: str | None = None

    def to_sql(self) -> str:
        text = f"{quote_identifier(self.name)}: {self.type.to_sql()}"
        if not self.nullable:
            text += " NOT NULL"
        if self.comment is not None:
            text += f" COMMENT {sql_string(self.comment)}"
        return text

    def simple_string(self) -> str:
        return f"{_simple_name(self.name)}:{self.type.simple_string()}"

    def to_json(self) -> dict[str, Any]:
        """As Spark writes a struct field: char/varchar as `string`, the original in metadata."""
        metadata: dict[str, Any] = {}
        if self.comment is not None:
            metadata["comment"] = self.comment
        json_type = self.type.to_json()
        if isinstance(self.type, _Sized):
            metadata[CHAR_VARCHAR_METADATA_KEY] = json_type
            json_type = "string"
        return {
            "name": self.name,
            "type": json_type,
            "nullable": self.nullable,
            "metadata": metadata,
        }


@dataclass(frozen=True)
class Struct(_Nested):
    """A struct type; also the type of a whole table (its fields are the columns)."""

    fields: tuple[Field, ...] = ()
    keyword: ClassVar[str] = "struct"

    def parts(self) -> Sequence[Field]:
        return self.fields

    def to_json(self) -> dict[str, Any]:
        """Spark's JSON schema (`StructType.jsonValue()`), as the session and connect methods
        return it."""
        return {"type": "struct", "fields": [f.to_json() for f in self.fields]}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> Field | None:
        """The field called `name`, compared case-insensitively as Spark resolves names."""
        return self._by_lower_name.get(name.lower())

    @cached_property
    def _by_lower_name(self) -> dict[str, Field]:
        return {f.name.lower(): f for f in reversed(self.fields)}


SparkType = Primitive | Char | Varchar | Decimal | Array | Map | Struct


def is_nested(t: SparkType) -> bool:
    """`t` holds other types (an array, a map or a struct)."""
    return isinstance(t, _Nested)


def holds_variant(t: SparkType) -> bool:
    """`t` is VARIANT or holds one (an element, a key or value, a field at any depth)."""
    if isinstance(t, Primitive):
        return t.name == "variant"
    if isinstance(t, Array):
        return holds_variant(t.element)
    if isinstance(t, Map):
        return holds_variant(t.key) or holds_variant(t.value)
    if isinstance(t, Struct):
        return any(holds_variant(f.type) for f in t.fields)
    return False


def through_structs(t: SparkType, path: Sequence[str]) -> tuple[SparkType, tuple[str, ...]] | None:
    """How far `path` goes down the struct fields of `t`: the type reached and the segments left
    (from the first one under a type that is no struct); None where a struct lacks a segment."""
    for i, segment in enumerate(path):
        if not isinstance(t, Struct):
            return t, tuple(path[i:])
        found = t.field(segment)
        if found is None:
            return None
        t = found.type
    return t, ()


def has_path(t: SparkType, path: Sequence[str]) -> bool:
    """`path` names a field of `t`, through structs, array elements (`element`) and map values
    (`value`)."""
    for segment in path:
        if isinstance(t, Struct):
            found = t.field(segment)
            if found is None:
                return False
            t = found.type
        elif segment == "element" and isinstance(t, Array):
            t = t.element
        elif segment == "value" and isinstance(t, Map):
            t = t.value
        else:
            return False
    return True


def as_nullable(t: SparkType) -> SparkType:
    """`t` with every field, array element and map value nullable (Spark's `asNullable`)."""
    if isinstance(t, Struct):
        return Struct(tuple(replace(f, type=as_nullable(f.type), nullable=True) for f in t.fields))
    if isinstance(t, Array):
        return Array(as_nullable(t.element), True)
    if isinstance(t, Map):
        return Map(as_nullable(t.key), as_nullable(t.value), True)
    return t


def compiled_schema(schema: Struct, not_null_columns: tuple[str, ...]) -> Struct:
    """The model's output schema as a table built from it would store it: nullable, except
    the columns the model declares `not_null` (Spark marks literals NOT NULL; CTAS does not)."""
    analysed = as_nullable(schema)
    assert isinstance(analysed, Struct)
    declared = {name.lower() for name in not_null_columns}
    return Struct(
        tuple(
            Field(f.name, f.type, nullable=f.name.lower() not in declared, comment=f.comment)
            for f in analysed.fields
        )
    )


def type_kind(t: SparkType) -> str:
    """Coarse kind used by capability tables: primitive name, `decimal`, `char`, `struct`, ..."""
    if isinstance(t, Primitive):
        return t.name
    return type(t).__name__.lower()


def is_widening(from_type: SparkType, to_type: SparkType) -> bool:
    """True when every value of `from_type` converts losslessly into `to_type` (and they differ)."""
    if from_type == to_type:
        return False
    src, dst = type_kind(from_type), type_kind(to_type)
    if src in INTEGRAL:
        if dst in INTEGRAL:
            return INTEGRAL.index(src) < INTEGRAL.index(dst)
        if isinstance(to_type, Decimal):
            return to_type.precision - to_type.scale >= _INTEGRAL_DIGITS[src]
        return dst == "double" and src != "bigint"
    if isinstance(from_type, Decimal) and isinstance(to_type, Decimal):
        grow_scale = to_type.scale - from_type.scale
        return to_type.precision - from_type.precision >= grow_scale >= 0
    if isinstance(from_type, Varchar) and isinstance(to_type, Varchar):
        return to_type.length >= from_type.length
    pairs = {("float", "double"), ("date", "timestamp"), ("date", "timestamp_ntz")}
    return (src, dst) in pairs or (src in ("char", "varchar") and dst == "string")


__all__ = [
    "Array",
    "Char",
    "Decimal",
    "Field",
    "Map",
    "Primitive",
    "SparkType",
    "Struct",
    "Varchar",
    "as_nullable",
    "is_nested",
    "is_widening",
    "quote_identifier",
    "sql_string",
    "type_kind",
]
