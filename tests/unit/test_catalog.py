"""The docs catalog's rows from DESCRIBE TABLE EXTENDED (pure): comments, owner, 1-based index."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.report.catalog import (
    DescribedDocs,
    catalog_rows,
    described_docs,
)

# As Spark 4.1 prints them (rows taken from real DESCRIBE TABLE EXTENDED output).
DELTA_ROWS = [
    ("id", "int", "id comment"),
    ("name", "string", None),
    ("s", "struct<x:int>", ""),
    ("", "", ""),
    ("# Detailed Table Information", "", ""),
    ("Name", "spark_catalog.s.t", ""),
    ("Type", "MANAGED", ""),
    ("Comment", "Delta table comment", ""),
    ("Provider", "delta", ""),
    ("Owner", "root", ""),
]

ICEBERG_ROWS = [
    ("id", "int", "ice id comment"),
    ("name", "string", None),
    ("", "", ""),
    ("# Metadata Columns", "", ""),
    ("_spec_id", "int", ""),
    ("_file", "string", ""),
    ("", "", ""),
    ("# Detailed Table Information", "", ""),
    ("Name", "iceberg.s.t", ""),
    ("Comment", "Iceberg table comment", ""),
    ("Provider", "iceberg", ""),
    ("Owner", "root", ""),
    ("Statistics", "24 bytes, 1 rows", None),
]

# A partitioned table whose partition column is called `Comment`: not the table's comment.
PARTITIONED_ROWS = [
    ("Comment", "string", "a column"),
    ("id", "int", None),
    ("# Partition Information", "", ""),
    ("# col_name", "data_type", "comment"),
    ("Comment", "string", "a column"),
    ("", "", ""),
    ("# Detailed Table Information", "", ""),
    ("Type", "MANAGED", ""),
]


def test_delta_comments_and_owner() -> None:
    docs = described_docs(DELTA_ROWS)
    assert docs == DescribedDocs(
        comment="Delta table comment",
        owner="root",
        column_comments={"id": "id comment", "name": None, "s": None},
    )


def test_iceberg_metadata_columns_are_not_columns() -> None:
    docs = described_docs(ICEBERG_ROWS)
    assert docs.column_comments == {"id": "ice id comment", "name": None}
    assert (docs.comment, docs.owner) == ("Iceberg table comment", "root")


def test_details_are_read_only_from_the_detailed_section() -> None:
    docs = described_docs(PARTITIONED_ROWS)
    assert docs.column_comments == {"Comment": "a column", "id": None}
    assert (docs.comment, docs.owner) == (None, None)


def test_no_details_no_comment() -> None:
    assert described_docs([("id", "int", None)]) == DescribedDocs(column_comments={"id": None})


def test_catalog_rows_number_from_one_and_carry_comments_and_stats() -> None:
    columns = [
        {
            "column": "id",
            "dtype": "int",
            "column_index": 0,
            "table_schema": "s",
            "table_name": "t",
            "table_owner": "None",
            "stats:rows:value": 1,
        },
        {"column": "name", "dtype": "string", "column_index": 1, "table_schema": "s"},
    ]
    rows = catalog_rows(columns, described_docs(ICEBERG_ROWS), "iceberg", "table")
    assert rows[0] == {
        "column_name": "id",
        "column_type": "int",
        "column_index": 1,
        "column_comment": "ice id comment",
        "table_schema": "s",
        "table_name": "t",
        "table_owner": "root",
        "table_comment": "Iceberg table comment",
        "table_database": "iceberg",
        "table_type": "table",
        "stats:rows:value": 1,
    }
    assert (rows[1]["column_name"], rows[1]["column_index"], rows[1]["column_comment"]) == (
        "name",
        2,
        None,
    )


NAMES = st.lists(
    st.text(alphabet="abcdefghij_", min_size=1, max_size=6), min_size=1, max_size=8, unique=True
)


@given(NAMES, st.data())
def test_every_column_in_order_with_its_own_comment(names: list[str], data: st.DataObject) -> None:
    comments = {n: data.draw(st.one_of(st.none(), st.text(min_size=1, max_size=5))) for n in names}
    rows = [(n, "int", comments[n]) for n in names] + [("", "", ""), (DETAILS_ROW, "", "")]
    docs = described_docs(rows)
    out = catalog_rows([{"column": n, "dtype": "int"} for n in names], docs, None, "view")
    assert [r["column_name"] for r in out] == names
    assert [r["column_index"] for r in out] == list(range(1, len(names) + 1))
    assert [r["column_comment"] for r in out] == [comments[n] for n in names]


DETAILS_ROW = "# Detailed Table Information"
