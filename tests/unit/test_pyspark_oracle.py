"""pyspark's pure-Python type model (`pyspark.sql.types`, no JVM) as an oracle for this
project's type parser: random nested types, written as Spark's schema JSON, read by both."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from pyspark.sql import types as T
from pyspark.sql.types import DataType, _parse_datatype_json_value

from dbt.adapters.spark_contracts.core.schema.parse import from_spark_json, parse_type
from dbt.adapters.spark_contracts.core.schema.types import (
    Array,
    Char,
    Decimal,
    Map,
    Primitive,
    SparkType,
    Struct,
    Varchar,
)
from tests.unit.spark_type_strategies import simple_names, spark_types

# Spark's JSON names the integral types as the JVM does
JSON_NAMES = {"bigint": "long", "int": "integer", "smallint": "short", "tinyint": "byte"}


def spark_json(t: SparkType) -> Any:
    """`t` as Spark writes a schema (`DataType.json`), built here from the type's parts."""
    if isinstance(t, Struct):
        return {
            "type": "struct",
            "fields": [
                {
                    "name": f.name,
                    "type": spark_json(f.type),
                    "nullable": f.nullable,
                    "metadata": {"comment": f.comment} if f.comment is not None else {},
                }
                for f in t.fields
            ],
        }
    if isinstance(t, Array):
        return {
            "type": "array",
            "elementType": spark_json(t.element),
            "containsNull": t.contains_null,
        }
    if isinstance(t, Map):
        return {
            "type": "map",
            "keyType": spark_json(t.key),
            "valueType": spark_json(t.value),
            "valueContainsNull": t.value_contains_null,
        }
    if isinstance(t, Decimal):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, (Char, Varchar)):
        return t.simple_string()
    assert isinstance(t, Primitive)
    return JSON_NAMES.get(t.name, t.name)


def shape(t: Any) -> Any:
    """A comparable tree of a type, from the project's classes or from pyspark's."""
    if isinstance(t, Struct):
        return ("struct", tuple((f.name, shape(f.type), f.nullable, f.comment) for f in t.fields))
    if isinstance(t, T.StructType):
        return (
            "struct",
            tuple(
                (f.name, shape(f.dataType), f.nullable, (f.metadata or {}).get("comment"))
                for f in t.fields
            ),
        )
    if isinstance(t, Array):
        return ("array", shape(t.element), t.contains_null)
    if isinstance(t, T.ArrayType):
        return ("array", shape(t.elementType), t.containsNull)
    if isinstance(t, Map):
        return ("map", shape(t.key), shape(t.value), t.value_contains_null)
    if isinstance(t, T.MapType):
        return ("map", shape(t.keyType), shape(t.valueType), t.valueContainsNull)
    if isinstance(t, DataType):
        return t.simpleString()  # pyspark's leaf: decimal(p,s), char(n), bigint, interval day ...
    return t.simple_string()


def oracle(t: SparkType) -> DataType:
    return _parse_datatype_json_value(spark_json(t))


@settings(max_examples=300)
@given(spark_types())
def test_the_json_reader_agrees_with_pyspark(t):
    """Any names (quotes, colons, spaces, accents): the same type, field by field."""
    ours = from_spark_json(spark_json(t))
    assert shape(ours) == shape(oracle(t))


@settings(max_examples=300)
@given(spark_types(names=simple_names))
def test_the_ddl_parser_reads_what_pyspark_writes(t):
    """pyspark's simpleString of the type, parsed by the project's DDL parser, is the type again
    (up to nullability and comments, which a simple string does not carry)."""
    written = oracle(t).simpleString()
    assert parse_type(written).simple_string() == written
