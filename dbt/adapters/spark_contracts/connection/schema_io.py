"""The two schema forms a thrift server gives, as Spark's JSON schema (`StructType.jsonValue()`).

Used where a server gives no JSON schema (thrift's `DESCRIBE QUERY` rows, Spark 4's `DESCRIBE ...
AS JSON`): read into the typed schema of `core` (`core/schema/parse.py`) and handed on in the same
JSON form the session and connect methods return (`Struct.to_json`), so the planner reads every
method's answer the same way.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple

from dbt.adapters.spark_contracts.core.schema.parse import from_describe_json, parse_columns


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
    return parse_columns(columns).to_json()


def describe_json_to_json(columns: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
    """The `columns` of Spark 4's `DESCRIBE EXTENDED <view> AS JSON` as a Spark JSON schema.

    Unlike DESCRIBE's type strings, this form carries nullability (top level and nested).
    """
    return from_describe_json(columns).to_json()
