"""Recursive, case-insensitive diff of a deployed table schema against a compiled one.

Pure: returns typed change objects; paths use Spark's nested segments (`col.element.f`, `m.value`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from dbt.adapters.spark_contracts.core.schema.types import (
    INTEGRAL,
    Array,
    Field,
    Map,
    SparkType,
    Struct,
    is_widening,
    type_kind,
)

Path = tuple[str, ...]


@dataclass(frozen=True)
class _Change:
    path: Path
    kind: ClassVar[str] = "change"

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def column(self) -> str:
        return self.path[0]

    def describe(self) -> str:
        return f"{self.kind} `{self.dotted}`"


@dataclass(frozen=True)
class _Added(_Change):
    field: Field

    def describe(self) -> str:
        null = "" if self.field.nullable else " NOT NULL"
        return f"{self.kind} `{self.dotted}` {self.field.type.to_sql()}{null}"


@dataclass(frozen=True)
class _Removed(_Change):
    field: Field


@dataclass(frozen=True)
class ColumnAdded(_Added):
    kind: ClassVar[str] = "column added"


@dataclass(frozen=True)
class ColumnRemoved(_Removed):
    kind: ClassVar[str] = "column removed"


@dataclass(frozen=True)
class FieldAdded(_Added):
    """A nested struct field; `after` is its compiled predecessor (None: first position)."""

    after: str | None = None
    kind: ClassVar[str] = "field added"


@dataclass(frozen=True)
class FieldRemoved(_Removed):
    kind: ClassVar[str] = "field removed"


@dataclass(frozen=True)
class FieldsReordered(_Change):
    deployed_order: tuple[str, ...]
    compiled_order: tuple[str, ...]
    kind: ClassVar[str] = "struct fields reordered"

    def describe(self) -> str:
        before, after = ", ".join(self.deployed_order), ", ".join(self.compiled_order)
        return f"struct fields reordered in `{self.dotted}`: ({before}) -> ({after})"


@dataclass(frozen=True)
class _TypeChange(_Change):
    deployed: SparkType
    compiled: SparkType

    def describe(self) -> str:
        return f"{self.kind} `{self.dotted}`: {self.deployed.to_sql()} -> {self.compiled.to_sql()}"


@dataclass(frozen=True)
class TypeWidened(_TypeChange):
    kind: ClassVar[str] = "type widened"


@dataclass(frozen=True)
class TypeNarrowed(_TypeChange):
    kind: ClassVar[str] = "type narrowed"


@dataclass(frozen=True)
class TypeChanged(_TypeChange):
    kind: ClassVar[str] = "incompatible type change"


@dataclass(frozen=True)
class MapKeyChanged(_TypeChange):
    kind: ClassVar[str] = "map key type changed"


@dataclass(frozen=True)
class NullabilityRelaxed(_Change):
    kind: ClassVar[str] = "NOT NULL dropped"


@dataclass(frozen=True)
class NullabilityTightened(_Change):
    kind: ClassVar[str] = "NOT NULL added"


Change = (
    ColumnAdded
    | ColumnRemoved
    | FieldAdded
    | FieldRemoved
    | FieldsReordered
    | TypeWidened
    | TypeNarrowed
    | TypeChanged
    | MapKeyChanged
    | NullabilityRelaxed
    | NullabilityTightened
)
ADDITIONS = (ColumnAdded, FieldAdded)
REMOVALS = (ColumnRemoved, FieldRemoved)


@dataclass(frozen=True)
class SchemaDiff:
    changes: tuple[Change, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.changes

    def __iter__(self) -> Iterator[Change]:
        return iter(self.changes)

    def __len__(self) -> int:
        return len(self.changes)

    def by_column(self) -> dict[str, tuple[Change, ...]]:
        """Changes grouped under their top-level column, in diff order."""
        groups: dict[str, list[Change]] = {}
        for change in self.changes:
            groups.setdefault(change.column, []).append(change)
        return {column: tuple(changes) for column, changes in groups.items()}

    def only(self, *kinds: type) -> SchemaDiff:
        """The sub-diff holding only changes of the given classes."""
        return SchemaDiff(tuple(c for c in self.changes if isinstance(c, kinds)))


def diff_schemas(deployed: Struct, compiled: Struct) -> SchemaDiff:
    """All changes needed to turn the deployed table schema into the compiled one."""
    changes: list[Change] = []
    _diff_struct((), deployed, compiled, changes)
    return SchemaDiff(tuple(changes))


def _diff_struct(path: Path, deployed: Struct, compiled: Struct, out: list[Change]) -> None:
    top = not path
    by_name = {f.name.lower(): f for f in reversed(deployed.fields)}
    compiled_names = {f.name.lower() for f in compiled.fields}
    previous: str | None = None
    for new in compiled.fields:
        old = by_name.get(new.name.lower())
        if old is None:
            added_path = (*path, new.name)
            out.append(
                ColumnAdded(added_path, new) if top else FieldAdded(added_path, new, previous)
            )
        else:
            _diff_field((*path, old.name), old, new, out)
        previous = old.name if old is not None else new.name
    for old in deployed.fields:
        if old.name.lower() not in compiled_names:
            removed = (*path, old.name)
            out.append(ColumnRemoved(removed, old) if top else FieldRemoved(removed, old))
    if not top:
        _check_order(path, deployed, compiled, out)


def _check_order(path: Path, deployed: Struct, compiled: Struct, out: list[Change]) -> None:
    compiled_names = {f.name.lower() for f in compiled.fields}
    kept = [f.name for f in deployed.fields if f.name.lower() in compiled_names]
    position = {name.lower(): i for i, name in enumerate(kept)}
    in_compiled = [f.name.lower() for f in compiled.fields if f.name.lower() in position]
    if [position[name] for name in in_compiled] != sorted(position[name] for name in in_compiled):
        new_order = tuple(kept[position[name]] for name in in_compiled)
        out.append(FieldsReordered(path, tuple(kept), new_order))


def _diff_field(path: Path, old: Field, new: Field, out: list[Change]) -> None:
    _diff_nullability(path, old.nullable, new.nullable, out)
    _diff_type(path, old.type, new.type, out)


def _diff_nullability(path: Path, old: bool, new: bool, out: list[Change]) -> None:
    if old and not new:
        out.append(NullabilityTightened(path))
    elif new and not old:
        out.append(NullabilityRelaxed(path))


def _diff_type(path: Path, old: SparkType, new: SparkType, out: list[Change]) -> None:
    if isinstance(old, Struct) and isinstance(new, Struct):
        _diff_struct(path, old, new, out)
    elif isinstance(old, Array) and isinstance(new, Array):
        element = (*path, "element")
        _diff_nullability(element, old.contains_null, new.contains_null, out)
        _diff_type(element, old.element, new.element, out)
    elif isinstance(old, Map) and isinstance(new, Map):
        if not same_type(old.key, new.key):
            out.append(MapKeyChanged((*path, "key"), old.key, new.key))
        value = (*path, "value")
        _diff_nullability(value, old.value_contains_null, new.value_contains_null, out)
        _diff_type(value, old.value, new.value, out)
    elif old != new:
        out.append(_classify_type_change(path, old, new))


def _classify_type_change(path: Path, old: SparkType, new: SparkType) -> Change:
    if is_widening(old, new):
        return TypeWidened(path, old, new)
    if is_widening(new, old) or (_is_numeric(old) and _is_numeric(new)):
        return TypeNarrowed(path, old, new)
    return TypeChanged(path, old, new)


def _is_numeric(t: SparkType) -> bool:
    return type_kind(t) in (*INTEGRAL, "float", "double", "decimal")


def same_type(a: SparkType, b: SparkType) -> bool:
    """Equal up to name case, nullability and comments (what a diff would report as no change)."""
    probe: list[Change] = []
    _diff_type(("_",), a, b, probe)
    return not [c for c in probe if not isinstance(c, (NullabilityRelaxed, NullabilityTightened))]
