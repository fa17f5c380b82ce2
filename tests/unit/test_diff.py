"""Recursive schema diff: each change kind, nesting paths, case-insensitivity, grouping."""

from __future__ import annotations

import pytest

from dbt.adapters.spark_contracts.core.schema.diff import (
    ColumnAdded,
    ColumnRemoved,
    FieldAdded,
    FieldRemoved,
    FieldsReordered,
    MapKeyChanged,
    NullabilityRelaxed,
    NullabilityTightened,
    TypeChanged,
    TypeNarrowed,
    TypeWidened,
    diff_schemas,
    same_type,
)
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.schema.types import Field, Struct

INT, BIGINT, STRING, DOUBLE = (parse_type(t) for t in ("int", "bigint", "string", "double"))


def S(columns: str) -> Struct:
    """A table schema from DDL column text, e.g. S("id int, s struct<a:int>")."""
    schema = parse_type(f"struct<{columns}>")
    assert isinstance(schema, Struct)
    return schema


CASES = [
    ("identical", "a int, b string", "a int, b string", []),
    ("top-level order is not a change", "a int, b string", "b string, a int", []),
    (
        "case-insensitive names",
        "Id int, S struct<A:int>",
        "id int, s struct<a:int>",
        [],
    ),
    (
        "column added",
        "a int",
        "a int, b string",
        [ColumnAdded(("b",), Field("b", STRING))],
    ),
    (
        "not null column added",
        "a int",
        "a int, b string not null",
        [ColumnAdded(("b",), Field("b", STRING, False))],
    ),
    (
        "column removed",
        "a int, b string",
        "a int",
        [ColumnRemoved(("b",), Field("b", STRING))],
    ),
    (
        "struct field added keeps its position",
        "s struct<a:int,b:int>",
        "s struct<a:int,c:string,b:int>",
        [FieldAdded(("s", "c"), Field("c", STRING), after="a")],
    ),
    (
        "struct field added first",
        "s struct<a:int>",
        "s struct<z:int,a:int>",
        [FieldAdded(("s", "z"), Field("z", INT), after=None)],
    ),
    (
        "struct field removed",
        "s struct<a:int,b:int>",
        "s struct<a:int>",
        [FieldRemoved(("s", "b"), Field("b", INT))],
    ),
    (
        "struct fields reordered",
        "s struct<a:int,b:int>",
        "s struct<b:int,a:int>",
        [FieldsReordered(("s",), ("a", "b"), ("b", "a"))],
    ),
    ("widened", "a int", "a bigint", [TypeWidened(("a",), INT, BIGINT)]),
    ("narrowed", "a bigint", "a int", [TypeNarrowed(("a",), BIGINT, INT)]),
    (
        "lossy numeric is narrowing",
        "a bigint",
        "a double",
        [TypeNarrowed(("a",), BIGINT, DOUBLE)],
    ),
    ("incompatible", "a string", "a int", [TypeChanged(("a",), STRING, INT)]),
    (
        "struct to scalar",
        "a struct<x:int>",
        "a string",
        [TypeChanged(("a",), parse_type("struct<x:int>"), STRING)],
    ),
    (
        "array to map",
        "a array<int>",
        "a map<int,int>",
        [TypeChanged(("a",), parse_type("array<int>"), parse_type("map<int,int>"))],
    ),
    ("nullability relaxed", "a int not null", "a int", [NullabilityRelaxed(("a",))]),
    (
        "nullability tightened",
        "a int",
        "a int not null",
        [NullabilityTightened(("a",))],
    ),
    (
        "array element widened",
        "a array<int>",
        "a array<bigint>",
        [TypeWidened(("a", "element"), INT, BIGINT)],
    ),
    (
        "array of struct field added",
        "items array<struct<id:int>>",
        "items array<struct<id:int,score:double>>",
        [FieldAdded(("items", "element", "score"), Field("score", DOUBLE), after="id")],
    ),
    (
        "array of struct field widened",
        "items array<struct<score:int>>",
        "items array<struct<score:bigint>>",
        [TypeWidened(("items", "element", "score"), INT, BIGINT)],
    ),
    (
        "map value struct field added",
        "lookup map<string,struct<f:int>>",
        "lookup map<string,struct<f:int,g:string>>",
        [FieldAdded(("lookup", "value", "g"), Field("g", STRING), after="f")],
    ),
    (
        "map value widened",
        "m map<string,int>",
        "m map<string,bigint>",
        [TypeWidened(("m", "value"), INT, BIGINT)],
    ),
    (
        "map key changed (even widened)",
        "m map<int,string>",
        "m map<bigint,string>",
        [MapKeyChanged(("m", "key"), INT, BIGINT)],
    ),
    (
        "map key differing only in case is no change",
        "m map<struct<A:int>,int>",
        "m map<struct<a:int>,int>",
        [],
    ),
    (
        "combined changes to one struct",
        "s struct<a:int,b:string>",
        "s struct<a:bigint,b:string,c:boolean>",
        [
            TypeWidened(("s", "a"), INT, BIGINT),
            FieldAdded(("s", "c"), Field("c", parse_type("boolean")), after="b"),
        ],
    ),
    (
        "deep nesting through struct, array and map",
        "x struct<m:map<string,array<struct<v:int>>>>",
        "x struct<m:map<string,array<struct<v:decimal(12,2)>>>>",
        [TypeWidened(("x", "m", "value", "element", "v"), INT, parse_type("decimal(12,2)"))],
    ),
    (
        "deployed spelling is kept for existing paths",
        "S struct<A:int>",
        "s struct<a:bigint, New:int>",
        [
            TypeWidened(("S", "A"), INT, BIGINT),
            FieldAdded(("S", "New"), Field("New", INT), after="A"),
        ],
    ),
]


@pytest.mark.parametrize(
    ("deployed", "compiled", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_diff_cases(deployed, compiled, expected):
    assert list(diff_schemas(S(deployed), S(compiled)).changes) == expected


def test_containsnull_changes_are_nullability_changes_at_the_element_path():
    from dbt.adapters.spark_contracts.core.schema.types import Array, Map

    deployed = Struct((Field("a", Array(INT, contains_null=False)), Field("m", Map(STRING, INT))))
    compiled = Struct((Field("a", Array(INT)), Field("m", Map(STRING, INT, False))))
    assert diff_schemas(deployed, compiled).changes == (
        NullabilityRelaxed(("a", "element")),
        NullabilityTightened(("m", "value")),
    )


def test_by_column_groups_all_changes_of_a_column():
    diff = diff_schemas(
        S("s struct<a:int,b:string>, x int, y string"),
        S("s struct<a:bigint,c:int>, x bigint, z int"),
    )
    groups = diff.by_column()
    assert list(groups) == ["s", "x", "z", "y"]
    assert [c.dotted for c in groups["s"]] == ["s.a", "s.c", "s.b"]
    assert [type(c) for c in groups["s"]] == [TypeWidened, FieldAdded, FieldRemoved]
    assert not diff.is_empty and len(diff) == 6


def test_dotted_and_describe():
    change = TypeWidened(("items", "element", "score"), INT, BIGINT)
    assert change.dotted == "items.element.score"
    assert change.column == "items"
    assert change.describe() == "type widened `items.element.score`: INT -> BIGINT"


def test_empty_diff():
    diff = diff_schemas(S("a int"), S("A int"))
    assert diff.is_empty and list(diff) == []


def test_same_type_ignores_case_nullability_and_comments():
    assert same_type(parse_type("struct<A:int not null comment 'x'>"), parse_type("struct<a:int>"))
    assert not same_type(parse_type("struct<a:int>"), parse_type("struct<a:bigint>"))
