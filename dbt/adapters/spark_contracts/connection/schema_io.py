"""Render the typed schema model of `core` as Spark's JSON schema (`StructType.jsonValue()`).

Used where a server gives only type strings (thrift's `DESCRIBE QUERY`): the rows are parsed with
`core.schema.types.parse_columns` and handed on in the same JSON form the session and connect methods
return, so the planner reads every method's answer the same way.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple

from dbt.adapters.spark_contracts.core.schema.parse import (
    CHAR_VARCHAR_METADATA_KEY,
    parse_columns,
    parse_type,
)
from dbt.adapters.spark_contracts.core.schema.types import (
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

# Catalog names whose JSON name differs (pyspark's `DataType.json()` spells these out).
_JSON_NAMES = {"tinyint": "byte", "smallint": "short", "int": "integer", "bigint": "long"}


def type_to_json(t: SparkType) -> Any:
    """One Spark type as JSON: a string for atomic types, a dict for struct, array and map."""
    if isinstance(t, Primitive):
        return _JSON_NAMES.get(t.name, t.name)
    if isinstance(t, (Char, Varchar, Decimal)):
        return t.simple_string()
    if isinstance(t, Array):
        return {
            "type": "array",
            "elementType": type_to_json(t.element),
            "containsNull": t.contains_null,
        }
    if isinstance(t, Map):
        return {
            "type": "map",
            "keyType": type_to_json(t.key),
            "valueType": type_to_json(t.value),
            "valueContainsNull": t.value_contains_null,
        }
    if isinstance(t, Struct):
        return {"type": "struct", "fields": [field_to_json(f) for f in t.fields]}
    raise TypeError(f"not a Spark type: {t!r}")


def field_to_json(f: Field) -> Dict[str, Any]:
    """A struct field as Spark writes it: char/varchar as `string` plus the original in metadata."""
    metadata: Dict[str, Any] = {}
    if f.comment is not None:
        metadata["comment"] = f.comment
    if isinstance(f.type, (Char, Varchar)):
        metadata[CHAR_VARCHAR_METADATA_KEY] = f.type.simple_string()
        json_type: Any = "string"
    else:
        json_type = type_to_json(f.type)
    return {"name": f.name, "type": json_type, "nullable": f.nullable, "metadata": metadata}


def describe_rows_to_json(rows: Iterable[Tuple[Any, ...]]) -> Dict[str, Any]:
    """`DESCRIBE QUERY` rows (col_name, data_type, comment) as a Spark JSON struct schema.

    DESCRIBE prints no nullability: every column and nested field comes back nullable.
    """
    columns: List[Tuple[str, str]] = []
    for row in rows:
        name, data_type = (str(row[0]) if row[0] is not None else ""), row[1]
        if not name or name.startswith("#") or data_type is None:
            break  # partition / detail sections follow a blank or `# ...` row
        columns.append((name, str(data_type)))
    return type_to_json(parse_columns(columns))


def describe_json_to_json(columns: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
    """The `columns` of Spark 4's `DESCRIBE EXTENDED <view> AS JSON` as a Spark JSON schema.

    Unlike DESCRIBE's type strings, this form carries nullability (top level and nested).
    """
    return type_to_json(Struct(tuple(_describe_json_field(c) for c in columns)))


def _describe_json_field(obj: Dict[str, Any]) -> Field:
    return Field(
        str(obj["name"]),
        _describe_json_type(obj["type"]),
        bool(obj.get("nullable", True)),
        obj.get("comment"),
    )


def _describe_json_type(obj: Dict[str, Any]) -> SparkType:
    name = str(obj["name"]).lower()
    if name == "struct":
        return Struct(tuple(_describe_json_field(f) for f in obj.get("fields", [])))
    if name == "array":
        return Array(
            _describe_json_type(obj["element_type"]), bool(obj.get("element_nullable", True))
        )
    if name == "map":
        return Map(
            _describe_json_type(obj["key_type"]),
            _describe_json_type(obj["value_type"]),
            bool(obj.get("value_nullable", True)),
        )
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
