"""`on_*_change: ignore` (core/evolution/change_policy.py): the table keeps its schema where a change is
ignored, and the load writes what fits. Here, the schema the load writes (the model's output
with each ignored change taken back, so that a second diff against the table no longer holds
it) and the projection of the model's output onto that schema. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from dbt.adapters.spark_contracts.core.contracts.checked_cast import castable, try_cast_sql
from dbt.adapters.spark_contracts.core.evolution.operations import DropColumns, Plan
from dbt.adapters.spark_contracts.core.evolution.render import dropped_after_load
from dbt.adapters.spark_contracts.core.schema.coerce import Built, coerce
from dbt.adapters.spark_contracts.core.schema.diff import (
    Change as DiffChange,
)
from dbt.adapters.spark_contracts.core.schema.diff import (
    ColumnAdded,
    ColumnRemoved,
    FieldAdded,
    FieldRemoved,
    FieldsReordered,
    NullabilityRelaxed,
    NullabilityTightened,
    Path,
    _TypeChange,
    diff_schemas,
    same_type,
)
from dbt.adapters.spark_contracts.core.schema.types import (
    Array,
    Field,
    Map,
    SparkType,
    Struct,
    quote_identifier,
)


def fits_view(view: str) -> str:
    """The view of the model's output as it fits the table (over the model's `view`)."""
    return f"{view}__fits"


def _child(t: SparkType, segment: str) -> SparkType:
    if isinstance(t, Struct):
        found = t.field(segment)
        assert found is not None, segment
        return found.type
    if isinstance(t, Array):
        return t.element
    assert isinstance(t, Map), (t, segment)
    return t.key if segment == "key" else t.value


def _type_at(root: Struct, path: Path) -> SparkType:
    t: SparkType = root
    for segment in path:
        t = _child(t, segment)
    return t


def _edit(t: SparkType, path: Path, edit: Callable[[SparkType], SparkType]) -> SparkType:
    """`t` with the type at `path` (below it) replaced by `edit(that type)`."""
    if not path:
        return edit(t)
    head, rest = path[0], path[1:]
    if isinstance(t, Struct):
        fields = tuple(
            replace(f, type=_edit(f.type, rest, edit)) if f.name.lower() == head.lower() else f
            for f in t.fields
        )
        return Struct(fields)
    if isinstance(t, Array):
        return replace(t, element=_edit(t.element, rest, edit))
    assert isinstance(t, Map), (t, head)
    if head == "key":
        return replace(t, key=_edit(t.key, rest, edit))
    return replace(t, value=_edit(t.value, rest, edit))


def _struct_edit(root: Struct, parent: Path, edit: Callable[[Struct], Struct]) -> Struct:
    def on_struct(t: SparkType) -> SparkType:
        assert isinstance(t, Struct), (parent, t)
        return edit(t)

    edited = _edit(root, parent, on_struct)
    assert isinstance(edited, Struct)
    return edited


def _without(name: str) -> Callable[[Struct], Struct]:
    return lambda s: Struct(tuple(f for f in s.fields if f.name.lower() != name.lower()))


def _with_back(deployed_parent: Struct, field: Field) -> Callable[[Struct], Struct]:
    """Put the removed field back where the table has it: after its deployed predecessor."""

    def edit(s: Struct) -> Struct:
        names = [f.name.lower() for f in deployed_parent.fields]
        index = names.index(field.name.lower())
        before = {n for n in names[:index]}
        at = max((i + 1 for i, f in enumerate(s.fields) if f.name.lower() in before), default=0)
        return Struct((*s.fields[:at], field, *s.fields[at:]))

    return edit


def _in_order(order: Sequence[str]) -> Callable[[Struct], Struct]:
    rank = {name.lower(): i for i, name in enumerate(order)}
    return lambda s: Struct(
        tuple(sorted(s.fields, key=lambda f: rank.get(f.name.lower(), len(rank))))
    )


def _constant(t: SparkType) -> Callable[[SparkType], SparkType]:
    return lambda _old: t


def _nullable(path: Path, nullable: bool) -> Callable[[Struct], Struct]:
    name = path[-1]
    return lambda s: Struct(
        tuple(
            replace(f, nullable=nullable) if f.name.lower() == name.lower() else f for f in s.fields
        )
    )


def fitted_schema(deployed: Struct, compiled: Struct, ignored: Sequence[DiffChange]) -> Struct:
    """`compiled` with each of the `ignored` changes (of `diff_schemas(deployed, compiled)`)
    taken back. A removed top-level column stays out: the table keeps it and the load writes
    NULL into it, as for any table column the model does not output."""
    out = compiled
    # reorders last, in the table's full order (a field put back is in it too)
    last = sorted(ignored, key=lambda c: isinstance(c, FieldsReordered))
    for change in last:
        path, parent = change.path, change.path[:-1]
        if isinstance(change, (ColumnAdded, FieldAdded)):
            out = _struct_edit(out, parent, _without(path[-1]))
        elif isinstance(change, FieldRemoved):
            deployed_parent = _type_at(deployed, parent)
            assert isinstance(deployed_parent, Struct)
            out = _struct_edit(out, parent, _with_back(deployed_parent, change.field))
        elif isinstance(change, FieldsReordered):
            table_struct = _type_at(deployed, path)
            assert isinstance(table_struct, Struct)
            out = _struct_edit(out, path, _in_order(table_struct.names))
        elif isinstance(change, _TypeChange):  # widened, narrowed, incompatible, map key
            edited = _edit(out, path, _constant(change.deployed))
            assert isinstance(edited, Struct)
            out = edited
        elif isinstance(change, (NullabilityRelaxed, NullabilityTightened)):
            if path[-1] in ("element", "value") and not isinstance(_type_at(out, parent), Struct):
                continue  # a collection's null flag: the cast below does not check it
            out = _struct_edit(
                out, parent, _nullable(path, not isinstance(change, NullabilityRelaxed))
            )
        elif isinstance(change, ColumnRemoved):
            continue
    return out


def kept_for_load(deployed: Struct, written: Struct, plan: Plan) -> Struct | None:
    """`written` (the schema the load writes) with each struct field that `plan` drops after
    the load (Iceberg, core/evolution/render.dropped_after_load) put back where the table has
    it, nullable: the table still has it when the load writes, and a load must write a struct
    whole (Spark: "Cannot find data for the output column `s`.`b`"), so it writes NULL there.
    None where the plan drops no struct field after its load. A top-level column stays out:
    the load writes NULL into a column it does not name."""
    after = {
        tuple(p)
        for op in plan.operations
        if isinstance(op, DropColumns)
        for p in dropped_after_load(op, plan.table_format)
        if len(p) > 1
    }
    back = [
        replace(c, field=replace(c.field, nullable=True))
        for c in diff_schemas(deployed, written).changes  # what the load writes, as it is
        if isinstance(c, FieldRemoved) and tuple(c.path) in after
    ]
    return fitted_schema(deployed, written, back) if back else None


def _fit_leaf(expr: str, source: SparkType, target: SparkType) -> Built:
    """A value as the table's type where it fits (`try_cast`: NULL where it does not, under
    ANSI too); NULL where Spark has no cast between the two types."""
    if castable(source, target):
        return Built(try_cast_sql(expr, source, target))
    return Built(f"CAST(NULL AS {target.to_sql()})")


def fitted_select(compiled: Struct, fitted: Struct, view: str) -> str:
    """The model's output (`view`, of schema `compiled`) as `fitted`: each column by name, cast
    where an ignored change left the table's type or shape (structs by field name, a field the
    table keeps but the model dropped NULL; a column the model dropped, where a rebuild keeps
    it, NULL)."""
    items = []
    for field in fitted.fields:
        source = compiled.field(field.name)
        name = quote_identifier(field.name)
        if source is None:  # a column the table keeps and a rebuild writes: NULL
            items.append(f"CAST(NULL AS {field.type.to_sql()}) AS {name}")
            continue
        value = coerce(name, source.type, field.type, _fit_leaf, same_type).value
        items.append(name if value == name else f"{value} AS {name}")
    return f"SELECT {', '.join(items)} FROM {view}"
