"""The quarantine table follows the model: when an insert of discarded rows is refused, the
table gets the columns and nested fields it lacks and the widenings its format does in
metadata; a column whose new type it could not store is a conflict (the run is taken back).
Pure: no execution."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dbt.adapters.spark_contracts.core.evolution.capabilities import capabilities_for
from dbt.adapters.spark_contracts.core.evolution.operations import (
    AddColumns,
    AlterColumnType,
    NewColumn,
    Operation,
)
from dbt.adapters.spark_contracts.core.evolution.render import render_operation
from dbt.adapters.spark_contracts.core.schema.diff import (
    ColumnAdded,
    FieldAdded,
    MapKeyChanged,
    TypeChanged,
    TypeNarrowed,
    TypeWidened,
    diff_schemas,
)
from dbt.adapters.spark_contracts.core.schema.types import Primitive, SparkType, Struct, type_kind

QUARANTINE_SUFFIX = "__quarantine"  # <relation>__quarantine holds the model's discarded rows
# the quarantine's memory of whether the model's last quarantining run discarded rows: the next
# run takes its first pass where it did not (core/materialization/run_plan.first_pass), and its
# pending table at once where it did. Set where it changes; a hint, never a record of rows.
DISCARDED_PROPERTY = "dbt_spark_contracts.last_run_discarded"


def discarded_last(properties: Mapping[str, str]) -> bool:
    """The quarantine's memory (`DISCARDED_PROPERTY`) in its table properties."""
    return str(properties.get(DISCARDED_PROPERTY, "")).strip().lower() == "true"


def remember_sql(quarantine: str, discarded: bool) -> str:
    value = "true" if discarded else "false"
    return f"ALTER TABLE {quarantine} SET TBLPROPERTIES ('{DISCARDED_PROPERTY}' = '{value}')"


_NUMERIC = {"tinyint", "smallint", "int", "bigint", "float", "double", "decimal"}
_DATETIME = {"date", "timestamp", "timestamp_ntz"}


@dataclass(frozen=True)
class QuarantineEvolution:
    """What the quarantine table needs to take the rows: `operations` in order, or the
    `conflicts` that make it unable to (then nothing is to be run)."""

    operations: tuple[Operation, ...] = ()
    conflicts: tuple[str, ...] = ()


def _storable(source: SparkType, target: SparkType) -> bool:
    """An INSERT stores a `source` value into a `target` column (Spark's ANSI store
    assignment: into a string, between numbers (overflow fails the statement, it does not
    lose the value), between dates and timestamps)."""
    if type_kind(source) == "void":  # NULL literals go anywhere
        return True
    if target == Primitive("string"):
        return type_kind(source) not in ("struct", "array", "map")
    kinds = {type_kind(source), type_kind(target)}
    return kinds <= _NUMERIC or kinds <= _DATETIME


def plan_quarantine(quarantine: Struct, rows: Struct, table_format: str) -> QuarantineEvolution:
    """How the quarantine table (`quarantine`, in `table_format`) comes to take rows shaped
    `rows` (the model's columns). Columns and fields are added nullable (older rows have no
    value); nested fields keep their place. Removed columns stay (the insert is by name)."""
    caps = capabilities_for(table_format)
    added: list[NewColumn] = []
    operations: list[Operation] = []
    conflicts: list[str] = []
    for change in diff_schemas(quarantine, rows):
        if isinstance(change, ColumnAdded):
            added.append(NewColumn(change.path, change.field.type))
        elif isinstance(change, FieldAdded):
            if not caps.add_nested_field:
                conflicts.append(f"{table_format} cannot add the nested field `{change.dotted}`")
                continue
            first = change.after is None
            added.append(NewColumn(change.path, change.field.type, first=first, after=change.after))
        elif isinstance(change, TypeWidened):  # the table's type is the narrower one
            nested = len(change.path) > 1
            if caps.can_widen(change.deployed, change.compiled, nested):
                if (feature := caps.widening_feature) is not None:  # set again if set: harmless
                    operations.append(feature.enabling())
                operations.append(AlterColumnType(change.path, change.compiled, change.deployed))
        elif isinstance(change, (TypeChanged, TypeNarrowed)):
            if not _storable(change.compiled, change.deployed):
                held, new = change.deployed.to_sql(), change.compiled.to_sql()
                conflicts.append(f"`{change.dotted}` is {held} there, the model outputs {new}")
        elif isinstance(change, MapKeyChanged):
            conflicts.append(f"the key type of map `{change.dotted}` changed")
    if conflicts:
        return QuarantineEvolution(conflicts=tuple(conflicts))
    adds: tuple[Operation, ...] = (AddColumns(tuple(added)),) if added else ()
    return QuarantineEvolution(adds + tuple(dict.fromkeys(operations)))


def evolve_quarantine(
    evolution: QuarantineEvolution, relation: str, table_format: str
) -> list[str]:
    """The statements of `evolution` on the quarantine table `relation`."""
    return [
        step.sql
        for op in evolution.operations
        for step in render_operation(op, relation, table_format)
    ]
