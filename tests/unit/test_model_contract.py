"""dbt model contracts on typed schemas: nested comparison, dbt's size/precision rule."""

import pytest

from dbt.adapters.spark_contracts.core.contracts.model_contract import (
    Mismatch,
    compare_model_contract,
    mismatch_table,
)
from dbt.adapters.spark_contracts.core.schema.parse import parse_columns


def schema(**columns: str):
    return parse_columns(list(columns.items()))


@pytest.mark.parametrize(
    "definition,contract,expected",
    [
        ({"id": "int"}, {"id": "int"}, []),
        ({"ID": "int"}, {"id": "int"}, []),
        ({"amount": "decimal(10,2)"}, {"amount": "decimal(38,6)"}, []),
        ({"code": "varchar(5)"}, {"code": "varchar(50)"}, []),
        ({"id": "string"}, {"id": "int"}, [("id", "STRING", "INT", "data type mismatch")]),
        (
            {"s": "struct<a:int,b:string>"},
            {"s": "struct<a:int,b:int>"},
            [("s.b", "STRING", "INT", "data type mismatch")],
        ),
        (
            {"s": "struct<a:int>"},
            {"s": "struct<a:int,c:date>"},
            [("s.c", "", "DATE", "missing in definition")],
        ),
        (
            {"items": "array<struct<k:string,v:double>>"},
            {"items": "array<struct<k:string,v:float>>"},
            [("items.element.v", "DOUBLE", "FLOAT", "data type mismatch")],
        ),
        (
            {"m": "map<string,bigint>"},
            {"m": "map<int,bigint>"},
            [("m.key", "STRING", "INT", "data type mismatch")],
        ),
        (
            {"id": "int", "extra": "string"},
            {"id": "int", "gone": "date"},
            [
                ("extra", "STRING", "", "missing in contract"),
                ("gone", "", "DATE", "missing in definition"),
            ],
        ),
        (
            {"s": "struct<a:int>"},
            {"s": "int"},
            [("s", "STRUCT<A:INT>", "INT", "data type mismatch")],
        ),
    ],
)
def test_compare(definition, contract, expected):
    found = compare_model_contract(schema(**definition), schema(**contract))
    assert [m.row() for m in found] == expected


def test_mismatch_table_has_dbt_columns():
    text = mismatch_table((Mismatch("s.b", "STRING", "INT", "data type mismatch"),))
    lines = text.splitlines()
    assert lines[0] == "| column_name | definition_type | contract_type | mismatch_reason    |"
    assert lines[1].startswith("| ----------- |")
    assert lines[2] == "| s.b         | STRING          | INT           | data type mismatch |"
