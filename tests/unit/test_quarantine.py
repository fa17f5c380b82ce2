"""The quarantine table follows the model (core/contracts/quarantine.py): what it lacks of the discarded
rows' schema is added (in place for nested fields), widened where the format does so in
metadata, nothing it has is removed; a type it could not store is a conflict, named."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings

from dbt.adapters.spark_contracts.core.contracts.quarantine import (
    QuarantineEvolution,
    evolve_quarantine,
    plan_quarantine,
)
from dbt.adapters.spark_contracts.core.evolution.operations import AddColumns, AlterColumnType
from dbt.adapters.spark_contracts.core.schema.diff import ColumnAdded, FieldAdded, diff_schemas
from dbt.adapters.spark_contracts.core.schema.types import (
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


def statements(before: Struct, after: Struct, fmt: str = "delta") -> list[str]:
    evolution = plan_quarantine(quarantine_of(before), after, fmt)
    assert not evolution.conflicts, evolution
    return evolve_quarantine(evolution, "db.t__quarantine", fmt)


def test_the_same_model_changes_nothing():
    rows = Struct((Field("id", INT), Field("n", STRING)))
    assert plan_quarantine(quarantine_of(rows), rows, "delta") == QuarantineEvolution()


def test_a_new_column_and_a_new_nested_field_are_added_in_place():
    before = Struct((Field("id", INT), Field("s", Struct((Field("a", INT), Field("c", INT))))))
    after = Struct(
        (
            Field("id", INT),
            Field("s", Struct((Field("a", INT), Field("b", STRING), Field("c", INT)))),
            Field("note", STRING),
        )
    )
    assert statements(before, after) == [
        "ALTER TABLE db.t__quarantine ADD COLUMNS (`s`.`b` STRING AFTER `a`, `note` STRING)"
    ]
    assert statements(before, after, "iceberg") == statements(before, after)


def test_parquet_cannot_add_a_nested_field_and_says_so():
    before = Struct((Field("s", Struct((Field("a", INT),))),))
    after = Struct((Field("s", Struct((Field("a", INT), Field("b", INT)))), Field("x", INT)))
    evolution = plan_quarantine(quarantine_of(before), after, "parquet")
    assert evolution.operations == ()
    assert evolution.conflicts == ("parquet cannot add the nested field `s.b`",)


def test_a_removed_or_storable_retyped_column_changes_nothing():
    before = Struct((Field("id", Primitive("bigint")), Field("n", STRING), Field("gone", INT)))
    after = Struct((Field("id", INT), Field("n", Primitive("double"))))
    assert plan_quarantine(quarantine_of(before), after, "parquet") == QuarantineEvolution()


def test_a_type_the_table_cannot_store_is_a_conflict():
    before = Struct((Field("id", INT), Field("n", Primitive("bigint"))))
    after = Struct((Field("id", INT), Field("n", STRING)))
    evolution = plan_quarantine(quarantine_of(before), after, "delta")
    assert evolution.conflicts == ("`n` is BIGINT there, the model outputs STRING",)
    assert evolution.operations == ()


def test_a_widening_is_done_in_metadata_where_the_format_can():
    before = Struct((Field("n", INT),))
    after = Struct((Field("n", Primitive("bigint")),))
    delta = plan_quarantine(quarantine_of(before), after, "delta").operations
    assert [type(op).__name__ for op in delta] == ["EnableTableFeature", "AlterColumnType"]
    iceberg = plan_quarantine(quarantine_of(before), after, "iceberg").operations
    assert iceberg == (AlterColumnType(("n",), Primitive("bigint"), INT),)
    # parquet stores bigint values into its int column (an overflow fails the statement)
    assert plan_quarantine(quarantine_of(before), after, "parquet") == QuarantineEvolution()


@settings(max_examples=300, deadline=None)
@given(table_schemas(), table_schemas())
def test_after_the_additions_the_table_takes_every_row_and_keeps_its_columns(old, new):
    quarantine = quarantine_of(old)
    evolution = plan_quarantine(quarantine, new, "delta")
    adds = [op for op in evolution.operations if isinstance(op, AddColumns)]
    if evolution.conflicts:  # only types Spark could not store stop it
        assert all(" is " in c or "map" in c for c in evolution.conflicts), evolution
        return
    evolved = applied(quarantine, adds[0] if adds else None)
    assert diff_schemas(evolved, new).only(ColumnAdded, FieldAdded).is_empty
    # every column the table had stays, in its place; nothing is removed or retyped
    assert [f.name for f in evolved.fields[: len(quarantine.fields)]] == list(quarantine.names)
    assert diff_schemas(quarantine, evolved).only(ColumnAdded, FieldAdded) == diff_schemas(
        quarantine, evolved
    )
