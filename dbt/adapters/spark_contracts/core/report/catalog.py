"""The docs catalog's rows for one table or view (pure): what `DESCRIBE TABLE EXTENDED` says,
in the row layout `dbt docs generate` reads (`table_*`, `column_*`, `stats:*`).

dbt-spark parses the column names, types and table stats from DESCRIBE; this adds what it
leaves out: the table comment and each column's comment (`persist_docs`), the owner as Spark
prints it (None when DESCRIBE shows none), and the column index, numbered from 1 in the table's
column order as dbt's catalog numbers it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

#: One DESCRIBE TABLE EXTENDED row: (col_name, data_type, comment).
DescribeRow = tuple[Optional[str], Optional[str], Optional[str]]

DETAILS_HEADER = "# Detailed Table Information"


@dataclass(frozen=True)
class DescribedDocs:
    """The documentation DESCRIBE TABLE EXTENDED shows for one table or view."""

    comment: Optional[str] = None
    owner: Optional[str] = None
    column_comments: Mapping[str, Optional[str]] = field(default_factory=dict)


def _text(value: Optional[str]) -> Optional[str]:
    return value if value else None  # DESCRIBE prints an absent comment as NULL or ''


def described_docs(rows: Sequence[DescribeRow]) -> DescribedDocs:
    """The table comment, owner and column comments of DESCRIBE TABLE EXTENDED's rows.

    The columns are the rows before the first blank or `#` row (Iceberg's `# Metadata Columns`
    and Delta's `# Partition Information` come after it); the table's details are the
    `key, value` rows of the `# Detailed Table Information` section only, so a partition column
    named `Comment` or `Owner` is never read as a detail."""
    column_comments: dict[str, Optional[str]] = {}
    details: dict[str, Optional[str]] = {}
    section = "columns"
    for name, value, comment in rows:
        name = name or ""
        if section == "columns" and name and not name.startswith("#"):
            column_comments[name] = _text(comment)
            continue
        if name.startswith("#"):
            section = "details" if name.strip() == DETAILS_HEADER else "other"
        elif section == "details" and name:
            details[name] = value
        elif section == "columns":
            section = "other"  # the blank row that ends the columns
    return DescribedDocs(
        comment=_text(details.get("Comment")),
        owner=_text(details.get("Owner")),
        column_comments=column_comments,
    )


def catalog_rows(
    columns: Sequence[Mapping[str, Any]],
    docs: DescribedDocs,
    database: Optional[str],
    table_type: Optional[str],
) -> list[dict[str, Any]]:
    """One catalog row per column, from dbt-spark's column dicts (`SparkColumn.to_column_dict`:
    `column`, `dtype`, `table_*`, `stats:*`) in the table's column order: `column_index` from 1,
    the column's and the table's comment, the owner, the catalog (`table_database`) and the
    relation type (`table` / `view`)."""
    rows: list[dict[str, Any]] = []
    for index, column in enumerate(columns, start=1):
        row = {k: v for k, v in column.items() if k not in ("column", "dtype", "column_index")}
        name = column.get("column")
        row["column_name"] = name
        row["column_type"] = column.get("dtype")
        row["column_index"] = index
        row["column_comment"] = docs.column_comments.get(name) if name is not None else None
        row["table_comment"] = docs.comment
        row["table_owner"] = docs.owner
        row["table_database"] = database
        row["table_type"] = table_type
        rows.append(row)
    return rows
