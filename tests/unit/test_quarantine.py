"""The quarantine table follows the model (core/quarantine.py): what it lacks of the discarded
rows' schema is added, nothing it has is touched."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings

from dbt.adapters.spark_contracts.core.diff import ColumnAdded, FieldAdded, diff_schemas
from dbt.adapters.spark_contracts.core.operations import AddColumns
from dbt.adapters.spark_contracts.core.quarantine import evolve_quarantine, quarantine_additions
from dbt.adapters.spark_contracts.core.types import (
    Array,
    Field,
    Map,
    Primitive,
    SparkType,
    Struct,
)
from tests.unit.spark_type_strategies import table_schemas

INT, STRING = Primitive("int"), Primitive("string")
META = (Field("_contract_reason", STRING), Field("_dbt_run_id", STRING))


def quarantine_of(rows: Struct) -> Struct:
    return Struct(rows.fields + META)


def _add(t: SparkType, path: tuple[str, ...], field: Field) -> SparkType:
    if not path:
        assert isinstance(t, Struct)
        return Struct(t.fields + (field,))
    head, rest = path[0], path[1:]
    if isinstance(t, Array) and head == "element":
        return replace(t, element=_add(t.element, rest, field))
    if isinstance(t, Map) and head == "value":
        return replace(t, value=_add(t.value, rest, field))
    assert isinstance(t, Struct)
    return Struct(
        tuple(
            replace(f, type=_add(f.type, rest, field)) if f.name.lower() == head.lower() else f
            for f in t.fields
        )
    )


def applied(table: Struct, op: AddColumns | None) -> Struct:
    """What ALTER TABLE ADD COLUMNS leaves: each column or field at the end of its struct."""
    for column in op.columns if op else ():
        added = _add(table, column.path[:-1], Field(column.path[-1], column.type))
        assert isinstance(added, Struct)
        table = added
    return table


def test_the_same_model_changes_nothing():
    rows = Struct((Field("id", INT), Field("n", STRING)))
    assert quarantine_additions(quarantine_of(rows), rows) is None
    assert evolve_quarantine(quarantine_of(rows), rows, "db.t__quarantine", "delta") == []


def test_a_new_column_and_a_new_nested_field_are_added():
    before = Struct((Field("id", INT), Field("s", Struct((Field("a", INT),)))))
    after = Struct(
        (
            Field("id", INT),
            Field("s", Struct((Field("a", INT), Field("b", STRING)))),
            Field("note", STRING),
        )
    )
    statements = evolve_quarantine(quarantine_of(before), after, "db.t__quarantine", "delta")
    assert statements == [
        "ALTER TABLE db.t__quarantine ADD COLUMNS (`s`.`b` STRING, `note` STRING)"
    ]


def test_a_removed_or_retyped_column_changes_nothing():
    before = Struct((Field("id", INT), Field("n", STRING), Field("gone", INT)))
    after = Struct((Field("id", Primitive("bigint")), Field("n", STRING)))
    assert quarantine_additions(quarantine_of(before), after) is None


@settings(max_examples=300, deadline=None)
@given(table_schemas(), table_schemas())
def test_after_the_additions_the_table_takes_every_row_and_keeps_its_columns(old, new):
    quarantine = quarantine_of(old)
    op = quarantine_additions(quarantine, new)
    evolved = applied(quarantine, op)
    assert diff_schemas(evolved, new).only(ColumnAdded, FieldAdded).is_empty
    # every column the table had stays, in its place; nothing is removed or retyped
    assert [f.name for f in evolved.fields[: len(quarantine.fields)]] == list(quarantine.names)
    assert diff_schemas(quarantine, evolved).only(ColumnAdded, FieldAdded) == diff_schemas(
        quarantine, evolved
    )
