"""Spark type model: parsing every type and alias, round trips, errors, JSON, widening."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from spark_type_strategies import simple_names, spark_types

from dbt.adapters.spark_contracts.core.schema.parse import (
    from_describe_json,
    from_spark_json,
    parse_columns,
    parse_type,
)
from dbt.adapters.spark_contracts.core.schema.types import (
    PRIMITIVE_NAMES,
    Array,
    Char,
    Decimal,
    Field,
    Map,
    Primitive,
    Struct,
    Varchar,
    as_nullable,
    holds_variant,
    is_nested,
    is_widening,
    quote_identifier,
    through_structs,
)

INT, BIGINT, STRING = Primitive("int"), Primitive("bigint"), Primitive("string")

PARSE_CASES = [
    ("int", INT),
    ("INTEGER", INT),
    ("long", BIGINT),
    ("BIGINT", BIGINT),
    ("short", Primitive("smallint")),
    ("byte", Primitive("tinyint")),
    ("real", Primitive("float")),
    ("timestamp_ltz", Primitive("timestamp")),
    ("TIMESTAMP_NTZ", Primitive("timestamp_ntz")),
    ("void", Primitive("void")),
    ("null", Primitive("void")),
    ("variant", Primitive("variant")),
    ("decimal", Decimal(10, 0)),
    ("dec(5)", Decimal(5, 0)),
    ("NUMERIC(12, 4)", Decimal(12, 4)),
    ("decimal(38,38)", Decimal(38, 38)),
    ("char(3)", Char(3)),
    ("character(4)", Char(4)),
    ("VARCHAR( 10 )", Varchar(10)),
    ("interval", Primitive("interval")),
    ("interval day to second", Primitive("interval day to second")),
    ("INTERVAL YEAR TO MONTH", Primitive("interval year to month")),
    ("interval hour", Primitive("interval hour")),
    ("array<int>", Array(INT)),
    ("ARRAY < BIGINT >", Array(BIGINT)),
    ("map<string,decimal(10,2)>", Map(STRING, Decimal(10, 2))),
    ("struct<>", Struct()),
    (
        "struct<a:int,b:array<map<string,decimal(10,2)>>>",
        Struct((Field("a", INT), Field("b", Array(Map(STRING, Decimal(10, 2)))))),
    ),
    (
        "STRUCT<a: INT NOT NULL COMMENT 'x', `weird name`: STRING>",
        Struct((Field("a", INT, False, "x"), Field("weird name", STRING))),
    ),
    ("struct<`a``b`:int>", Struct((Field("a`b", INT),))),
    ("STRUCT<a INT, b STRING>", Struct((Field("a", INT), Field("b", STRING)))),
    (
        "struct<weird name:int,x-y:string>",
        Struct((Field("weird name", INT), Field("x-y", STRING))),
    ),
    (
        "struct<a:int COMMENT 'it\\'s: ok'>",
        Struct((Field("a", INT, True, "it's: ok"),)),
    ),
    ('struct<a:int comment "dq" not null>', Struct((Field("a", INT, False, "dq"),))),
    (
        "struct<a:interval day,to:int>",
        Struct((Field("a", Primitive("interval day")), Field("to", INT))),
    ),
    (
        "struct<comment:string,not:int>",
        Struct((Field("comment", STRING), Field("not", INT))),
    ),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_CASES)
def test_parse_type(text, expected):
    assert parse_type(text) == expected


@pytest.mark.parametrize("name", sorted(PRIMITIVE_NAMES))
def test_every_primitive_round_trips(name):
    t = Primitive(name)
    assert parse_type(t.to_sql()) == t
    assert parse_type(t.simple_string()) == t
    assert parse_type(name.upper()) == t


@pytest.mark.parametrize(
    ("t", "sql", "simple"),
    [
        (Decimal(10, 2), "DECIMAL(10,2)", "decimal(10,2)"),
        (Char(5), "CHAR(5)", "char(5)"),
        (Varchar(7), "VARCHAR(7)", "varchar(7)"),
        (Map(STRING, INT), "MAP<STRING, INT>", "map<string,int>"),
        (Array(BIGINT), "ARRAY<BIGINT>", "array<bigint>"),
        (
            Struct((Field("a", INT), Field("b", Array(BIGINT)))),
            "STRUCT<`a`: INT, `b`: ARRAY<BIGINT>>",
            "struct<a:int,b:array<bigint>>",
        ),
        (
            Struct((Field("x y", INT, False, "c'm"),)),
            "STRUCT<`x y`: INT NOT NULL COMMENT 'c\\'m'>",
            "struct<`x y`:int>",
        ),
        (
            Primitive("interval day to second"),
            "INTERVAL DAY TO SECOND",
            "interval day to second",
        ),
    ],
)
def test_render_type(t, sql, simple):
    assert t.to_sql() == sql
    assert t.simple_string() == simple


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a type name or keyword at position 0"),
        ("integr", "unknown type 'integr' at position 0"),
        ("array<int", "expected '>' at position 9"),
        ("map<string>", "expected ',' at position 10"),
        ("struct<a:int,>", "expected a type name or keyword at position 13"),
        ("decimal(40,2)", "invalid decimal(40,2) at position 0"),
        ("decimal(5,6)", "invalid decimal(5,6) at position 0"),
        ("varchar", "varchar needs a length"),
        ("int int", "unexpected trailing text at position 4"),
        ("struct<`a:int>", "unterminated `"),
        ("interval month to year", "invalid interval type 'interval month to year'"),
        ("struct<a:int not nul>", "expected NULL after NOT"),
        ("struct<a:int comment x>", "expected a string after COMMENT"),
        ("array<int>>", "unexpected trailing text at position 10"),
    ],
)
def test_parse_errors_name_text_and_position(text, message):
    with pytest.raises(ValueError) as info:
        parse_type(text)
    assert message in str(info.value)
    assert repr(text) in str(info.value)


def test_primitive_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown Spark primitive type 'integer'"):
        Primitive("integer")


def test_parse_columns():
    schema = parse_columns([("id", "int"), ("tags", "array<string>")])
    assert schema == Struct((Field("id", INT), Field("tags", Array(STRING))))
    assert schema.field("ID") == Field("id", INT)
    assert schema.field("nope") is None


@given(spark_types(collection_nulls=False))
def test_to_sql_round_trips(t):
    assert parse_type(t.to_sql()) == t


@given(spark_types(nullability=False, comments=False, collection_nulls=False))
def test_simple_string_round_trips(t):
    assert parse_type(t.simple_string()) == t


@given(spark_types())
def test_to_sql_round_trips_up_to_collection_nullability(t):
    """DDL cannot say containsNull=false: the round trip is exact once collections allow NULL."""
    assert as_nullable(parse_type(t.to_sql())) == as_nullable(t)


def test_quote_identifier_escapes_backticks():
    assert quote_identifier("a`b") == "`a``b`"
    assert quote_identifier("x y") == "`x y`"


# --- Spark JSON schema (StructType.jsonValue()) ---

PYSPARK_JSON = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "amount", "type": "decimal(10,2)", "nullable": True, "metadata": {"comment": "eur"}},
        {"name": "code", "type": "string", "nullable": True,
         "metadata": {"__CHAR_VARCHAR_TYPE_STRING": "varchar(10)"}},
        {"name": "items", "nullable": True, "metadata": {},
         "type": {"type": "array", "containsNull": False, "elementType": {
             "type": "struct", "fields": [
                 {"name": "score", "type": "integer", "nullable": True, "metadata": {}},
                 {"name": "at", "type": "timestamp_ntz", "nullable": True, "metadata": {}},
             ]}}},
        {"name": "lookup", "nullable": True, "metadata": {},
         "type": {"type": "map", "keyType": "string", "valueType": "short",
                  "valueContainsNull": True}},
        {"name": "flags", "nullable": True, "metadata": {
            "__CHAR_VARCHAR_TYPE_STRING": "array<char(2)>"},
         "type": {"type": "array", "elementType": "string", "containsNull": True}},
        {"name": "b", "type": "byte", "nullable": True, "metadata": {}},
        {"name": "f", "type": "float", "nullable": True, "metadata": {}},
        {"name": "n", "type": "void", "nullable": True, "metadata": {}},
        {"name": "d", "type": "interval day to second", "nullable": True, "metadata": {}},
        {"name": "bare", "type": "decimal", "nullable": True, "metadata": {}},
    ],
}  # fmt: skip

EXPECTED_FROM_JSON = Struct(
    (
        Field("id", BIGINT, False),
        Field("amount", Decimal(10, 2), True, "eur"),
        Field("code", Varchar(10)),
        Field(
            "items",
            Array(
                Struct((Field("score", INT), Field("at", Primitive("timestamp_ntz")))),
                contains_null=False,
            ),
        ),
        Field("lookup", Map(STRING, Primitive("smallint"))),
        Field("flags", Array(Char(2))),
        Field("b", Primitive("tinyint")),
        Field("f", Primitive("float")),
        Field("n", Primitive("void")),
        Field("d", Primitive("interval day to second")),
        Field("bare", Decimal(10, 0)),
    )
)


def test_from_spark_json_dict_and_string():
    assert from_spark_json(PYSPARK_JSON) == EXPECTED_FROM_JSON
    assert from_spark_json(json.dumps(PYSPARK_JSON)) == EXPECTED_FROM_JSON


def test_from_spark_json_leaf_and_udt():
    assert from_spark_json("integer") == INT
    assert from_spark_json('"long"') == BIGINT
    assert from_spark_json({"type": "udt", "class": "x.V", "sqlType": "double"}) == Primitive(
        "double"
    )


@pytest.mark.parametrize("bad", [{"type": "tensor"}, {"fields": []}])
def test_from_spark_json_rejects_unknown(bad):
    with pytest.raises(ValueError, match="not a Spark JSON type"):
        from_spark_json(bad)


@given(spark_types(names=simple_names, comments=False))
def test_json_round_trip_through_a_generated_json(t):
    assert from_spark_json(json.dumps(t.to_json())) == t


def test_describe_json_reads_as_spark_json():
    """Spark 4's `DESCRIBE ... AS JSON` columns and Spark's JSON schema read into one schema:
    nested parts, nullability, comments and char/varchar in either spelling."""
    described = [
        {"name": "c", "type": {"name": "varchar", "length": 5}, "comment": "k", "nullable": False},
        {
            "name": "m",
            "type": {
                "name": "map",
                "key_type": {"name": "char", "length": 2},
                "value_type": {
                    "name": "array",
                    "element_type": {"name": "decimal", "precision": 12, "scale": 3},
                    "element_nullable": False,
                },
                "value_nullable": False,
            },
        },
        {"name": "i", "type": {"name": "interval", "start_unit": "hour", "end_unit": "hour"}},
    ]
    expected = Struct(
        (
            Field("c", Varchar(5), False, "k"),
            Field("m", Map(Char(2), Array(Decimal(12, 3), False), False)),
            Field("i", Primitive("interval hour")),
        )
    )
    assert from_describe_json(described) == expected
    assert from_spark_json(json.dumps(expected.to_json())) == expected


# --- widening ---

WIDENINGS = [
    ("tinyint", "smallint", True),
    ("tinyint", "bigint", True),
    ("int", "bigint", True),
    ("bigint", "int", False),
    ("int", "double", True),
    ("smallint", "double", True),
    ("bigint", "double", False),
    ("int", "float", False),
    ("float", "double", True),
    ("double", "float", False),
    ("int", "decimal(10,0)", True),
    ("int", "decimal(11,2)", False),
    ("int", "decimal(12,2)", True),
    ("bigint", "decimal(20,0)", True),
    ("bigint", "decimal(19,0)", False),
    ("smallint", "decimal(5,0)", True),
    ("tinyint", "decimal(3,0)", True),
    ("tinyint", "decimal(2,0)", False),
    ("decimal(10,2)", "decimal(12,2)", True),
    ("decimal(10,2)", "decimal(12,4)", True),
    ("decimal(10,2)", "decimal(12,5)", False),
    ("decimal(10,2)", "decimal(10,1)", False),
    ("decimal(10,2)", "decimal(10,2)", False),
    ("date", "timestamp_ntz", True),
    ("date", "timestamp", True),
    ("timestamp", "date", False),
    ("char(3)", "string", True),
    ("varchar(3)", "string", True),
    ("varchar(3)", "varchar(5)", True),
    ("varchar(5)", "varchar(3)", False),
    ("string", "varchar(5)", False),
    ("int", "string", False),
    ("array<int>", "array<bigint>", False),
]


@pytest.mark.parametrize(("src", "dst", "expected"), WIDENINGS)
def test_is_widening(src, dst, expected):
    assert is_widening(parse_type(src), parse_type(dst)) is expected


@given(spark_types(), spark_types())
def test_widening_is_antisymmetric(a, b):
    assert not (is_widening(a, b) and is_widening(b, a))


@pytest.mark.parametrize(
    "table_format, expected",
    [
        ("iceberg", "drop table if exists db.t__dbt_stage_x purge"),
        ("delta", "drop table if exists db.t__dbt_stage_x"),
        ("parquet", "drop table if exists db.t__dbt_stage_x"),
    ],
)
def test_own_tables_beside_an_iceberg_model_are_purged(table_format: str, expected: str) -> None:
    """A REST catalog's DROP leaves an Iceberg table's files in the warehouse; PURGE deletes
    them. The adapter's own tables beside Delta and Parquet models are dropped as before."""
    from dbt.adapters.spark_contracts.core.evolution.capabilities import drop_sql

    assert drop_sql("db.t__dbt_stage_x", table_format) == expected


@pytest.mark.parametrize(
    "text, holds",
    [
        ("variant", True),
        ("struct<a:int,b:array<map<string,struct<v:variant>>>>", True),
        ("map<string,variant>", True),
        ("array<variant>", True),
        ("struct<a:int,b:array<string>>", False),
        ("string", False),
    ],
)
def test_holds_variant_at_any_depth(text, holds):
    assert holds_variant(parse_type(text)) is holds


@given(spark_types())
def test_holds_variant_sees_through_every_container(t):
    inside = holds_variant(t)
    assert holds_variant(Array(t, True)) is inside
    assert holds_variant(Map(Primitive("string"), t, True)) is inside
    assert (
        holds_variant(Struct((Field("a", Primitive("int"), True), Field("b", t, True)))) is inside
    )
    assert holds_variant(Struct((Field("v", Primitive("variant"), True), Field("b", t, True))))


_NESTED = Struct(
    (
        Field("s", Struct((Field("a", INT), Field("xs", Array(Struct((Field("b", INT),))))))),
        Field("m", Map(STRING, INT)),
    )
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ((), (_NESTED, ())),
        (("s", "a"), (INT, ())),
        (("S", "A"), (INT, ())),  # Spark's names compare case-insensitively
        (("s", "xs", "element", "b"), (Array(Struct((Field("b", INT),))), ("element", "b"))),
        (("m", "value"), (Map(STRING, INT), ("value",))),
        (("s", "a", "x"), (INT, ("x",))),
        (("s", "missing"), None),
        (("missing",), None),
    ],
)
def test_through_structs_stops_where_the_structs_end(path, expected):
    assert through_structs(_NESTED, path) == expected


def test_is_nested_names_the_types_of_other_types():
    nested = [Array(INT), Map(STRING, INT), Struct((Field("a", INT),))]
    atomic = [INT, Decimal(5, 2), Char(3), Varchar(4), Primitive("variant")]
    assert [is_nested(t) for t in nested + atomic] == [True] * 3 + [False] * 5
