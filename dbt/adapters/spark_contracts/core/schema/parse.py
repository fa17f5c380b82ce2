"""Parsers for Spark types: DDL / DESCRIBE / catalogString text, Spark's JSON schema and the
columns of Spark 4's `DESCRIBE ... AS JSON` (one reader for both JSON spellings)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from dbt.adapters.spark_contracts.core.schema.types import (
    ALIASES,
    CHAR_VARCHAR_METADATA_KEY,
    DAY_TIME_UNITS,
    PRIMITIVE_NAMES,
    YEAR_MONTH_UNITS,
    Array,
    Char,
    Decimal,
    Field,
    Map,
    Primitive,
    SparkType,
    Struct,
    Varchar,
)

_DECIMAL_WORDS = ("decimal", "dec", "numeric")


class _Parser:
    """Recursive-descent parser over one type string; positions are 0-based character offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str, pos: int | None = None) -> ValueError:
        at = self.pos if pos is None else pos
        near = self.text[at : at + 20] or "end of input"
        return ValueError(
            f"cannot parse Spark type {self.text!r}: {message} at position {at} (near {near!r})"
        )

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos : self.pos + 1]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self.fail(f"expected {char!r}")
        self.pos += 1

    def word(self) -> str:
        self.skip_ws()
        start = self.pos
        while self.pos < len(self.text) and (
            self.text[self.pos].isalnum() or self.text[self.pos] == "_"
        ):
            self.pos += 1
        if start == self.pos:
            raise self.fail("expected a type name or keyword")
        return self.text[start : self.pos]

    def peek_word(self) -> str:
        start = self.pos
        try:
            return self.word().lower()
        except ValueError:
            return ""
        finally:
            self.pos = start

    def number(self) -> int:
        self.skip_ws()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        if start == self.pos:
            raise self.fail("expected a number")
        return int(self.text[start : self.pos])

    def quoted(self, quote: str) -> str:
        """Read a backticked identifier (`` escapes `) or a string literal (backslash escapes)."""
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == quote and quote == "`" and self.text[self.pos + 1 : self.pos + 2] == "`":
                out.append("`")
                self.pos += 2
            elif char == quote:
                self.pos += 1
                return "".join(out)
            elif char == "\\" and quote != "`" and self.pos + 1 < len(self.text):
                out.append(self.text[self.pos + 1])
                self.pos += 2
            else:
                out.append(char)
                self.pos += 1
        raise self.fail(f"unterminated {quote}")

    def field_name(self) -> str:
        if self.peek() == "`":
            return self.quoted("`")
        # catalogString prints names unquoted (`struct<weird name:int>`): read up to the colon.
        end = self.pos
        while end < len(self.text) and self.text[end] not in ":,<>`'\"":
            end += 1
        if self.text[end : end + 1] == ":" and self.text[self.pos : end].strip():
            name, self.pos = self.text[self.pos : end].strip(), end
            return name
        return self.word()

    def parse_field(self) -> Field:
        name = self.field_name()
        if self.peek() == ":":
            self.pos += 1
        field = Field(name, self.parse_type())
        while True:
            keyword = self.peek_word()
            if keyword == "not":
                self.word()
                if self.word().lower() != "null":
                    raise self.fail("expected NULL after NOT")
                field = replace(field, nullable=False)
            elif keyword == "comment":
                self.word()
                if self.peek() not in ("'", '"'):
                    raise self.fail("expected a string after COMMENT")
                field = replace(field, comment=self.quoted(self.text[self.pos]))
            else:
                return field

    def parse_struct(self) -> Struct:
        self.expect("<")
        fields: list[Field] = []
        if self.peek() != ">":
            fields.append(self.parse_field())
            while self.peek() == ",":
                self.pos += 1
                fields.append(self.parse_field())
        self.expect(">")
        return Struct(tuple(fields))

    def parenthesized(self, count_max: int) -> list[int]:
        if self.peek() != "(":
            return []
        self.pos += 1
        numbers = [self.number()]
        while self.peek() == "," and len(numbers) < count_max:
            self.pos += 1
            numbers.append(self.number())
        self.expect(")")
        return numbers

    def parse_interval(self) -> Primitive:
        name = "interval"
        units = YEAR_MONTH_UNITS + DAY_TIME_UNITS
        if self.peek_word() in units:
            name += " " + self.word().lower()
            if self.peek_word() == "to":
                self.word()
                name += " to " + self.word().lower()
        if name not in PRIMITIVE_NAMES:
            raise self.fail(f"invalid interval type {name!r}")
        return Primitive(name)

    def parse_type(self) -> SparkType:
        start = self.pos
        word = self.word().lower()
        if word == "array":
            self.expect("<")
            element = self.parse_type()
            self.expect(">")
            return Array(element)
        if word == "map":
            self.expect("<")
            key = self.parse_type()
            self.expect(",")
            value = self.parse_type()
            self.expect(">")
            return Map(key, value)
        if word == "struct":
            return self.parse_struct()
        if word in _DECIMAL_WORDS:
            args = self.parenthesized(2)
            try:
                return Decimal(*args) if args else Decimal()
            except ValueError as exc:
                raise self.fail(str(exc), start) from None
        if word in ("char", "character", "varchar"):
            args = self.parenthesized(1)
            if not args:
                raise self.fail(f"{word} needs a length, e.g. {word}(10)")
            return Varchar(args[0]) if word == "varchar" else Char(args[0])
        if word == "interval":
            return self.parse_interval()
        name = ALIASES.get(word, word)
        if name not in PRIMITIVE_NAMES:
            raise self.fail(f"unknown type {word!r}", start)
        return Primitive(name)


def parse_type(text: str) -> SparkType:
    """Parse a Spark type as DESCRIBE, catalogString or DDL prints it; raise ValueError if bad."""
    parser = _Parser(text)
    result = parser.parse_type()
    if parser.peek():
        raise parser.fail("unexpected trailing text")
    return result


def parse_columns(
    columns: list[tuple[str, str]] | tuple[tuple[str, str], ...],
) -> Struct:
    """Build a table schema from (column name, type string) pairs, e.g. DESCRIBE rows."""
    return Struct(tuple(Field(name, parse_type(type_text)) for name, type_text in columns))


@dataclass(frozen=True)
class _Spelling:
    """How a JSON form names a type's kind and the parts of an array and a map, and how it
    writes a type object of another kind (`atomic`: the kind's name and the object)."""

    kind: str
    element: str
    contains_null: str
    key: str
    value: str
    value_contains_null: str
    atomic: Callable[[str, dict[str, Any]], SparkType]


def _spark_object(kind: str, obj: dict[str, Any]) -> SparkType:
    """Spark's JSON writes an atomic type as its name (a string); the one other object is a
    user-defined type, read as the SQL type it stores."""
    if kind == "udt" and "sqlType" in obj:
        return _json_type(obj["sqlType"], _SPARK_JSON)
    raise ValueError(f"not a Spark JSON type: {obj!r}")


def _described_atomic(name: str, obj: dict[str, Any]) -> SparkType:
    """An atomic type of `DESCRIBE ... AS JSON`: an object naming it, with its parameters."""
    if name == "decimal":
        return Decimal(int(obj.get("precision", 10)), int(obj.get("scale", 0)))
    if name == "char":
        return Char(int(obj["length"]))
    if name == "varchar":
        return Varchar(int(obj["length"]))
    if name == "interval" and "start_unit" in obj:
        start, end = str(obj["start_unit"]).lower(), str(obj.get("end_unit", "")).lower()
        return Primitive(
            f"interval {start}" if end in ("", start) else f"interval {start} to {end}"
        )
    return parse_type(name)  # atomic names; parse_type knows the aliases (timestamp_ltz, ...)


# Spark's JSON schema (`StructType.jsonValue()`)
_SPARK_JSON = _Spelling(
    "type",
    "elementType",
    "containsNull",
    "keyType",
    "valueType",
    "valueContainsNull",
    _spark_object,
)
# the `columns` of Spark 4's `DESCRIBE EXTENDED ... AS JSON`: every type an object
_DESCRIBE_JSON = _Spelling(
    "name",
    "element_type",
    "element_nullable",
    "key_type",
    "value_type",
    "value_nullable",
    _described_atomic,
)


def from_spark_json(obj: str | dict[str, Any]) -> SparkType:
    """Parse Spark's JSON schema (`StructType.jsonValue()` or `.json()`) into a typed schema."""
    if isinstance(obj, str):
        text = obj.strip()
        return _json_type(json.loads(text) if text[:1] in ("{", '"') else text, _SPARK_JSON)
    return _json_type(obj, _SPARK_JSON)


def from_describe_json(columns: Iterable[dict[str, Any]]) -> Struct:
    """The `columns` of Spark 4's `DESCRIBE EXTENDED <view> AS JSON` as a typed schema. Unlike
    DESCRIBE's type strings, this form carries nullability (top level and nested)."""
    return Struct(tuple(_json_field(c, _DESCRIBE_JSON) for c in columns))


def _json_type(obj: Any, spelled: _Spelling) -> SparkType:
    if isinstance(obj, str):
        return parse_type(obj)
    if not isinstance(obj, dict):
        raise TypeError(f"not a Spark JSON type: {obj!r}")
    kind = str(obj.get(spelled.kind)).lower()
    if kind == "struct":
        return Struct(tuple(_json_field(f, spelled) for f in obj.get("fields", [])))
    if kind == "array":
        element = _json_type(obj[spelled.element], spelled)
        return Array(element, bool(obj.get(spelled.contains_null, True)))
    if kind == "map":
        return Map(
            _json_type(obj[spelled.key], spelled),
            _json_type(obj[spelled.value], spelled),
            bool(obj.get(spelled.value_contains_null, True)),
        )
    return spelled.atomic(kind, obj)


def _json_field(obj: dict[str, Any], spelled: _Spelling) -> Field:
    """A struct field; Spark's form keeps the comment (and a char/varchar type) in `metadata`,
    DESCRIBE's form the comment beside the name."""
    metadata = obj.get("metadata") or {}
    original = metadata.get(CHAR_VARCHAR_METADATA_KEY)
    field_type = parse_type(original) if original else _json_type(obj["type"], spelled)
    return Field(
        str(obj["name"]),
        field_type,
        bool(obj.get("nullable", True)),
        metadata.get("comment", obj.get("comment")),
    )
