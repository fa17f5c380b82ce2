"""Hypothesis properties of diff, plan and render over random nested schemas."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from spark_type_strategies import table_schemas

from dbt.adapters.spark_contracts.core.evolution.operations import (
    AddColumns,
    AlterColumnType,
    FullRefresh,
)
from dbt.adapters.spark_contracts.core.evolution.plan import Policy, plan_schema_change
from dbt.adapters.spark_contracts.core.evolution.render import cast_expression, render_plan
from dbt.adapters.spark_contracts.core.evolution.rewrite import Mode, target_schema
from dbt.adapters.spark_contracts.core.schema.diff import (
    ColumnAdded,
    FieldAdded,
    NullabilityTightened,
    TypeWidened,
    diff_schemas,
)
from dbt.adapters.spark_contracts.core.schema.types import (
    Array,
    Field,
    Map,
    Primitive,
    SparkType,
    Struct,
)

FORMATS = ("delta", "iceberg", "parquet")
NEW_TYPE = Primitive("string")


def _swap_case(t: SparkType) -> SparkType:
    if isinstance(t, Struct):
        return Struct(
            tuple(replace(f, name=f.name.swapcase(), type=_swap_case(f.type)) for f in t.fields)
        )
    if isinstance(t, Array):
        return replace(t, element=_swap_case(t.element))
    if isinstance(t, Map):
        return replace(t, key=_swap_case(t.key), value=_swap_case(t.value))
    return t


def _with_added_fields(t: SparkType, path: tuple[str, ...], draw, added: list) -> SparkType:
    """Randomly append new nullable fields to structs (never inside map keys)."""
    if isinstance(t, Array):
        return replace(t, element=_with_added_fields(t.element, (*path, "element"), draw, added))
    if isinstance(t, Map):
        return replace(t, value=_with_added_fields(t.value, (*path, "value"), draw, added))
    if not isinstance(t, Struct):
        return t
    fields = [
        replace(f, type=_with_added_fields(f.type, (*path, f.name), draw, added)) for f in t.fields
    ]
    if draw(st.booleans()):
        name = f"new_field_{len(added)}"
        added.append(((*path, name), fields[-1].name if fields else None))
        fields.append(Field(name, NEW_TYPE))
    return Struct(tuple(fields))


def _widen_ints(t: SparkType, path: tuple[str, ...], draw, widened: list) -> SparkType:
    if t == Primitive("int") and draw(st.booleans()):
        widened.append(path)
        return Primitive("bigint")
    if isinstance(t, Struct):
        return Struct(
            tuple(
                replace(f, type=_widen_ints(f.type, (*path, f.name), draw, widened))
                for f in t.fields
            )
        )
    if isinstance(t, Array):
        return replace(t, element=_widen_ints(t.element, (*path, "element"), draw, widened))
    if isinstance(t, Map):
        return replace(t, value=_widen_ints(t.value, (*path, "value"), draw, widened))
    return t


@given(table_schemas())
def test_diff_of_a_schema_with_itself_is_empty(schema):
    assert diff_schemas(schema, schema).is_empty


@given(table_schemas())
def test_diff_ignores_name_case(schema):
    assert diff_schemas(schema, _swap_case(schema)).is_empty


@given(table_schemas(), st.data())
def test_diff_detects_every_added_field(schema, data):
    added: list = []
    compiled = _with_added_fields(schema, (), data.draw, added)
    diff = diff_schemas(schema, compiled)
    assert all(isinstance(c, (ColumnAdded, FieldAdded)) for c in diff)
    assert [c.path for c in diff] == [path for path, _ in added]
    for change in diff:
        if isinstance(change, FieldAdded):
            assert (change.path, change.after) in added


@given(table_schemas(), st.data())
def test_pure_additions_never_need_permission_on_delta_or_iceberg(schema, data):
    added: list = []
    compiled = _with_added_fields(schema, (), data.draw, added)
    assert isinstance(compiled, Struct)
    diff = diff_schemas(schema, compiled)
    for fmt in ("delta", "iceberg"):
        p = plan_schema_change(diff, fmt, {}, Policy(), schema, compiled)
        assert p.executable and not p.rewrites_data
        assert all(isinstance(op, AddColumns) for op in p.operations)
        assert sum(len(op.columns) for op in p.operations) == len(added)


@given(table_schemas(), st.data())
def test_parquet_needs_allow_full_refresh_exactly_for_nested_additions(schema, data):
    added: list = []
    compiled = _with_added_fields(schema, (), data.draw, added)
    assert isinstance(compiled, Struct)
    p = plan_schema_change(
        diff_schemas(schema, compiled), "parquet", {}, Policy(), schema, compiled
    )
    nested = [path for path, _ in added if len(path) > 1]
    assert sorted(b.change.path for b in p.blocked) == sorted(nested)
    assert all(b.permitted_by == "allow_full_refresh" for b in p.blocked)


@given(table_schemas(), st.data())
def test_int_widenings_are_metadata_only_on_delta(schema, data):
    widened: list = []
    compiled = _widen_ints(schema, (), data.draw, widened)
    assert isinstance(compiled, Struct)
    diff = diff_schemas(schema, compiled)
    assert [c.path for c in diff if isinstance(c, TypeWidened)] == widened
    props = {"delta.enableTypeWidening": "true"}
    p = plan_schema_change(diff, "delta", props, Policy(), schema, compiled)
    assert p.operations == tuple(
        AlterColumnType(path, Primitive("bigint"), Primitive("int")) for path in widened
    )


@settings(max_examples=200)
@given(table_schemas(), table_schemas())
def test_rewrite_target_matches_the_compiled_schema(deployed, compiled):
    target = target_schema(deployed, compiled, Mode.EVOLVE)
    remaining = diff_schemas(target, compiled)
    assert all(isinstance(c, NullabilityTightened) for c in remaining)


@settings(max_examples=200)
@given(
    table_schemas(),
    table_schemas(),
    st.sampled_from(FORMATS),
    st.booleans(),
    st.booleans(),
)
def test_every_plan_is_consistent_and_renders(deployed, compiled, fmt, refresh, removal):
    policy = Policy(allow_full_refresh=refresh, allow_column_removal=removal)
    diff = diff_schemas(deployed, compiled)
    p = plan_schema_change(diff, fmt, {}, policy, deployed, compiled)
    assert not (p.is_blocked and p.operations)
    assert all(policy.permits(b.permitted_by) is False for b in p.blocked)
    statements = render_plan(p, "t", fmt)
    if p.operations and p.full_refresh is None:
        assert statements
    if p.full_refresh is not None:
        assert p.operations == (p.full_refresh,) and statements == ()
    assert isinstance(p.summary(), str) and p.to_dict()["table_format"] == fmt
    if refresh and removal:
        assert p.executable
    assert all(not isinstance(op, FullRefresh) for op in p.operations[1:])


@given(table_schemas())
def test_identity_cast_is_the_expression(schema):
    for f in schema.fields:
        assert cast_expression("`c`", f.type, f.type) == "`c`"
