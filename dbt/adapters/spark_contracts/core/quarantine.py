"""The quarantine table follows the model: the columns and nested fields a discarded row
carries that the table lacks are added before the row is written. Pure: no execution."""

from __future__ import annotations

from .diff import ColumnAdded, FieldAdded, diff_schemas
from .operations import AddColumns, NewColumn
from .render import render_operation
from .types import Struct

QUARANTINE_SUFFIX = "__quarantine"  # <relation>__quarantine holds the model's discarded rows


def quarantine_additions(quarantine: Struct, rows: Struct) -> AddColumns | None:
    """What the quarantine table (`quarantine`) lacks of the discarded rows' schema (`rows`,
    the model's columns): every column and nested field is added nullable, because the rows
    quarantined before have no value for it. Removed or retyped columns change nothing: the
    insert is by name, and older rows keep their columns."""
    added = diff_schemas(quarantine, rows).only(ColumnAdded, FieldAdded)
    columns = tuple(  # at the end of their struct: the insert matches names, not places
        NewColumn(change.path, change.field.type)
        for change in added
        if isinstance(change, (ColumnAdded, FieldAdded))
    )
    return AddColumns(columns) if columns else None


def evolve_quarantine(
    quarantine: Struct, rows: Struct, relation: str, table_format: str
) -> list[str]:
    """The statements that make `relation` (the quarantine table) take `rows`: none when it
    already can."""
    additions = quarantine_additions(quarantine, rows)
    return render_operation(additions, relation, table_format) if additions else []
