"""Render a `Plan` as the steps (core/evolution/steps.py) that change one relation: each a Spark
SQL statement with its typed inverse where one exists; column identifiers are quoted here.

Thin and table-driven: one small function per operation type. `FullRefresh` renders nothing: the
materialization rebuilds the model itself (dbt's --full-refresh path).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dbt.adapters.spark_contracts.core.evolution.capabilities import capabilities_for
from dbt.adapters.spark_contracts.core.evolution.operations import (
    AddColumns,
    AddNotNullCheck,
    AlterColumnType,
    Backfill,
    DropColumns,
    DropNotNull,
    EnableTableFeature,
    FullRefresh,
    NewColumn,
    Operation,
    Plan,
    Rewrite,
    SetColumnDefault,
)
from dbt.adapters.spark_contracts.core.evolution.steps import DropAdded, DropTable, Rename, Step
from dbt.adapters.spark_contracts.core.schema.coerce import coerce, plain_cast
from dbt.adapters.spark_contracts.core.schema.diff import same_type
from dbt.adapters.spark_contracts.core.schema.types import SparkType, quote_identifier, sql_string

REWRITE_SUFFIX = "__dbt_rewrite"
BACKUP_SUFFIX = "__dbt_backup"


@dataclass(frozen=True)
class _Target:
    relation: str
    table_format: str
    table_options: str
    drops_columns: bool  # the format can drop a column: an ADD COLUMNS has an inverse


def column_ref(path: tuple[str, ...]) -> str:
    """`a`.`b` for a column path."""
    return ".".join(quote_identifier(segment) for segment in path)


def suffixed(relation: str, suffix: str) -> str:
    """A sibling relation name: `db`.`t` -> `db`.`t__suffix`."""
    return relation[:-1] + suffix + "`" if relation.endswith("`") else relation + suffix


def tblproperties_clause(
    properties: tuple[tuple[str, str], ...] | Mapping[str, str],
) -> str:
    items = properties.items() if isinstance(properties, Mapping) else properties
    rendered = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in items)
    return f" TBLPROPERTIES ({rendered})" if rendered else ""


def cast_expression(expr: str, source: SparkType, target: SparkType) -> str:
    """SQL turning `expr` of type `source` into `target`: structs by field name, new fields NULL
    (core/schema/coerce.py with a plain CAST at each leaf)."""
    return coerce(expr, source, target, plain_cast, same_type).value


def select_list(rewrite: Rewrite) -> list[str]:
    """One SELECT item per target column, rebuilding it from the old table."""
    items = []
    for cast in rewrite.casts:
        if cast.source is None:
            value = f"CAST({cast.fill or 'NULL'} AS {cast.target.to_sql()})"
        else:
            value = cast_expression(quote_identifier(cast.name), cast.source, cast.target)
        items.append(f"{value} AS {quote_identifier(cast.name)}")
    return items


def _new_column(column: NewColumn) -> str:
    text = f"{column_ref(column.path)} {column.type.to_sql()}"
    if column.default is not None:
        text += f" DEFAULT {column.default}"
    if column.comment is not None:
        text += f" COMMENT {sql_string(column.comment)}"
    if column.first:
        text += " FIRST"
    elif column.after is not None:
        text += f" AFTER {quote_identifier(column.after)}"
    return text


def _add_columns(op: AddColumns, t: _Target) -> list[Step]:
    columns = ", ".join(_new_column(c) for c in op.columns)
    added = tuple(c.path for c in op.columns)
    inverse = DropAdded(t.relation, added) if t.drops_columns else None
    return [Step(f"ALTER TABLE {t.relation} ADD COLUMNS ({columns})", inverse)]


def _set_default(op: SetColumnDefault, t: _Target) -> list[Step]:
    column = quote_identifier(op.column)
    return [Step(f"ALTER TABLE {t.relation} ALTER COLUMN {column} SET DEFAULT {op.expr}")]


def _backfill(op: Backfill, t: _Target) -> list[Step]:
    return [Step(f"UPDATE {t.relation} SET {quote_identifier(op.column)} = {op.expr}", writes=True)]


def _not_null_check(op: AddNotNullCheck, t: _Target) -> list[Step]:
    name, column = quote_identifier(op.constraint), quote_identifier(op.column)
    return [Step(f"ALTER TABLE {t.relation} ADD CONSTRAINT {name} CHECK ({column} IS NOT NULL)")]


def _alter_type(op: AlterColumnType, t: _Target) -> list[Step]:
    path, new_type = column_ref(op.path), op.new_type.to_sql()
    return [Step(f"ALTER TABLE {t.relation} ALTER COLUMN {path} TYPE {new_type}")]


def _drop_not_null(op: DropNotNull, t: _Target) -> list[Step]:
    return [Step(f"ALTER TABLE {t.relation} ALTER COLUMN {column_ref(op.path)} DROP NOT NULL")]


def _enable_feature(op: EnableTableFeature, t: _Target) -> list[Step]:
    properties = tblproperties_clause(((op.property, op.value),))
    return [Step(f"ALTER TABLE {t.relation} SET{properties}")]


def dropped_after_load(op: DropColumns, table_format: str) -> tuple[tuple[str, ...], ...]:
    """The paths `op` drops after the load: all of them where a rollback keeps the schema
    (Iceberg; a struct's field too, which the load then writes NULL: core/evolution/fit.py
    `kept_for_load`), none elsewhere."""
    after = capabilities_for(table_format).drops_columns_after_load
    return tuple(op.paths) if after else ()


def _drop_columns(op: DropColumns, t: _Target) -> list[Step]:
    last = dropped_after_load(op, t.table_format)
    first = [p for p in op.paths if p not in last]
    return [
        Step(
            f"ALTER TABLE {t.relation} DROP COLUMNS ({', '.join(map(column_ref, paths))})",
            after_load=after,
        )
        for paths, after in ((first, False), (last, True))
        if paths
    ]


def _rewrite(op: Rewrite, t: _Target) -> list[Step]:
    select = f"SELECT {', '.join(select_list(op))} FROM {t.relation}"
    options = f" {t.table_options}" if t.table_options else ""
    properties = tblproperties_clause(op.table_properties)
    if op.in_place:
        using = f"USING {t.table_format}{options}{properties}"
        return [Step(f"CREATE OR REPLACE TABLE {t.relation} {using} AS {select}", writes=True)]
    beside, backup = (
        suffixed(t.relation, REWRITE_SUFFIX),
        suffixed(t.relation, BACKUP_SUFFIX),
    )
    columns = ", ".join(_column_definition(c.name, c.target, c.default) for c in op.casts)
    built = DropTable(beside)  # from its first drop on, whatever stands at `beside` is the run's
    return [
        Step(f"DROP TABLE IF EXISTS {backup}"),  # left by a run killed after its swap: stale
        Step(f"DROP TABLE IF EXISTS {beside}", built),
        Step(
            f"CREATE TABLE {beside} ({columns}) USING {t.table_format}{options}{properties}", built
        ),
        Step(f"INSERT INTO {beside} {select}"),
        Step(f"ALTER TABLE {t.relation} RENAME TO {backup}", Rename(backup, t.relation)),
        Step(f"ALTER TABLE {beside} RENAME TO {t.relation}", stands=True),
        Step(f"DROP TABLE {backup}"),
    ]


def _column_definition(name: str, column_type: SparkType, default: str | None) -> str:
    text = f"{quote_identifier(name)} {column_type.to_sql()}"
    return f"{text} DEFAULT {default}" if default is not None else text


def _full_refresh(op: FullRefresh, t: _Target) -> list[Step]:
    return []


_RENDERERS: dict[type, Callable[[Any, _Target], list[Step]]] = {
    AddColumns: _add_columns,
    SetColumnDefault: _set_default,
    Backfill: _backfill,
    AddNotNullCheck: _not_null_check,
    AlterColumnType: _alter_type,
    DropNotNull: _drop_not_null,
    EnableTableFeature: _enable_feature,
    DropColumns: _drop_columns,
    Rewrite: _rewrite,
    FullRefresh: _full_refresh,
}


def render_operation(
    op: Operation, relation: str, table_format: str, table_options: str = ""
) -> list[Step]:
    """The steps of one operation (a parquet rewrite is several)."""
    row = capabilities_for(table_format)
    target = _Target(relation, row.name, table_options, row.drop_column)
    return _RENDERERS[type(op)](op, target)


def render_plan(
    plan: Plan, relation: str, table_format: str, table_options: str = ""
) -> tuple[Step, ...]:
    """All steps of an executable plan, in the order they are sent: those after the load
    (`Step.after_load`) last; a blocked plan renders nothing.

    `relation` is already rendered by dbt; `table_options` (PARTITIONED BY, LOCATION, ...) is
    placed after USING when a rewrite recreates the table.
    """
    steps = [
        step
        for op in plan.operations
        for step in render_operation(op, relation, table_format, table_options)
    ]
    return tuple(sorted(steps, key=lambda step: step.after_load))  # stable: plan order kept
