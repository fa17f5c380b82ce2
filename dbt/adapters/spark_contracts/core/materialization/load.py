"""The run's one write, typed and rendered here only. Pure.

A planned run carries its load as a value: `Append`, `Merge` (its column lists as a type),
`InsertOverwrite`, `ReplaceWindow` (a microbatch batch replacing its window), `Rebuild` (a
table model's rebuild, whose DDL is dbt-spark's `create_table_as`, the statement that created
the table) or `SnapshotMerge` (a snapshot's, rendered by dbt's `snapshot_merge_sql`). `plan_load` decides it from the run's schemas and plan and the model's
`LoadOptions`; `render_load` writes its SQL. dbt's `get_merge_sql` (called by packages, no run
planned) renders through `Merge` too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from dbt.adapters.spark_contracts.core.evolution.capabilities import row_of
from dbt.adapters.spark_contracts.core.evolution.operations import (
    AddColumns,
    DropColumns,
    Plan,
    Rewrite,
)
from dbt.adapters.spark_contracts.core.materialization import snapshot
from dbt.adapters.spark_contracts.core.materialization.build_plan import SNAPSHOT
from dbt.adapters.spark_contracts.core.materialization.microbatch import (
    Microbatch,
    SelectColumn,
    select_list,
)
from dbt.adapters.spark_contracts.core.materialization.snapshot import SnapshotMerge
from dbt.adapters.spark_contracts.core.materialization.write_path import REBUILD, merged_by_name
from dbt.adapters.spark_contracts.core.schema.types import Struct, quote_identifier

APPEND = "append"
MERGE = "merge"
MICROBATCH = "microbatch"
MERGE_SOURCE = "DBT_INTERNAL_SOURCE"
MERGE_TARGET = "DBT_INTERNAL_DEST"


def _names(value: Any) -> tuple[str, ...]:
    if not value:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


@dataclass(frozen=True)
class LoadOptions:
    """What the model's config says about its load."""

    unique_key: tuple[str, ...] = ()
    predicates: tuple[str, ...] = ()
    update_columns: tuple[str, ...] = ()  # merge_update_columns
    exclude_columns: tuple[str, ...] = ()  # merge_exclude_columns
    partition_by: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> LoadOptions:
        return cls(
            unique_key=_names(config.get("unique_key")),
            predicates=_names(config.get("predicates") or config.get("incremental_predicates")),
            update_columns=_names(config.get("merge_update_columns")),
            exclude_columns=_names(config.get("merge_exclude_columns")),
            partition_by=_names(config.get("partition_by")),
        )

    @property
    def column_lists(self) -> bool:
        """merge_update_columns or merge_exclude_columns is set."""
        return bool(self.update_columns or self.exclude_columns)

    @property
    def narrowed(self) -> bool:
        """A merge that may leave a row of a key it brings unmatched (predicates in its ON) or
        some of its columns unchanged (a column list)."""
        return bool(self.predicates) or self.column_lists


@dataclass(frozen=True)
class Append:
    target: str
    source: str
    columns: tuple[str, ...]  # quoted: what the source writes that the table keeps


@dataclass(frozen=True)
class Merge:
    target: str
    source: str
    on: tuple[str, ...]  # the model's predicates, then the keys'; no key: FALSE as well
    insert: tuple[str, ...]  # quoted: source ∩ target, in the table's order
    update: tuple[str, ...]  # quoted: `insert`, narrowed by the model's column lists
    with_schema_evolution: bool = False  # `*` actions evolve the table inside the merge


@dataclass(frozen=True)
class InsertOverwrite:
    """`insert overwrite` by name (also dbt-spark's partition microbatch)."""

    target: str
    source: str
    select: tuple[str, ...]  # the table's columns, NULL for one the model no longer outputs
    partition_clause: str  # `partition (a, b)`, or "" (none, or a format that takes none)
    names_table: bool  # `insert overwrite table <t>` (dbt-spark's form) or `insert overwrite <t>`


@dataclass(frozen=True)
class ReplaceWindow:
    """A microbatch batch replacing its window (core/materialization/microbatch.py)."""

    target: str
    source: str
    batch: Microbatch
    columns: tuple[SelectColumn, ...]


@dataclass(frozen=True)
class Rebuild:
    """A table model's rebuild: dbt-spark's `create_table_as` over `source`."""

    target: str
    source: str


Load = Union[Append, Merge, InsertOverwrite, ReplaceWindow, Rebuild, SnapshotMerge]
RENDERED_BY_DBT = (Rebuild, SnapshotMerge)  # their statement is dbt's macro, rendered in Jinja


def columns_after(
    deployed: Struct, written: Struct, plan: Plan, evolves_in_write: bool
) -> list[str]:
    """The table's top-level columns once the plan's steps have run (before the load)."""
    if evolves_in_write:
        return list(written.names)
    names = list(deployed.names)
    for op in plan.operations:
        if isinstance(op, Rewrite):
            names = list(op.target_schema.names)
        elif isinstance(op, AddColumns):
            names += [c.path[0] for c in op.columns if len(c.path) == 1]
        elif isinstance(op, DropColumns):
            gone = {p[0].lower() for p in op.paths if len(p) == 1}
            names = [n for n in names if n.lower() not in gone]
    return names


def merge_columns(
    shared: Sequence[str], update_columns: Sequence[str] = (), exclude_columns: Sequence[str] = ()
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """MERGE's insert list (`shared`) and update list (narrowed by `merge_update_columns` or
    minus `merge_exclude_columns`, case-insensitive), quoted."""
    chosen = list(shared)
    if update_columns:
        wanted = {name.lower() for name in update_columns}
        chosen = [name for name in shared if name.lower() in wanted]
    elif exclude_columns:
        excluded = {name.lower() for name in exclude_columns}
        chosen = [name for name in shared if name.lower() not in excluded]
    return tuple(quote_identifier(n) for n in shared), tuple(quote_identifier(n) for n in chosen)


def merge_load(
    target: str,
    source: str,
    shared: Sequence[str],
    options: LoadOptions,
    with_schema_evolution: bool = False,
) -> Merge:
    """A MERGE by name over the columns source and target share (`shared`, table order)."""
    on = list(options.predicates)
    on += [f"{MERGE_SOURCE}.{key} = {MERGE_TARGET}.{key}" for key in options.unique_key]
    if not options.unique_key:  # no key: nothing matches, the merge only inserts (dbt-spark's)
        on.append("FALSE")
    insert, update = merge_columns(shared, options.update_columns, options.exclude_columns)
    return Merge(
        target,
        source,
        tuple(on),
        insert,
        update,
        with_schema_evolution,
    )


def plan_load(
    strategy: str,
    target: str,
    source: str,
    table_format: str,
    deployed: Struct,
    written: Struct,
    plan: Plan,
    evolves_in_write: bool,
    microbatch: Microbatch | None,
    options: LoadOptions,
) -> Load:
    """The run's load as a value: `written` is what the load writes (the contract's target
    schema, or the model's output), `deployed` the table before the plan's steps."""
    if strategy == REBUILD:
        return Rebuild(target, source)
    if strategy == SNAPSHOT:  # `written`: the staging relation's schema
        return SnapshotMerge(snapshot.merge_columns(written))
    after = columns_after(deployed, written, plan, evolves_in_write)
    if strategy == APPEND:
        keep = {n.lower() for n in after}
        columns = tuple(quote_identifier(f.name) for f in written.fields if f.name.lower() in keep)
        return Append(target, source, columns)
    if strategy == MERGE:
        shared = [n for n in after if written.field(n) is not None]
        return merge_load(target, source, shared, options, evolves_in_write)
    if strategy == MICROBATCH and microbatch is not None and microbatch.replaces_window:
        # an evolving write appends new columns, in table order
        order = list(merged_by_name(deployed, written).names) if evolves_in_write else after
        return ReplaceWindow(target, source, microbatch, select_list(order, written))
    # insert_overwrite, and dbt-spark's partition microbatch (a batch of a format that cannot
    # replace its window; core/materialization/microbatch.plan_microbatch requires `partition_by`): by name, as
    # a file-source table keeps its partition columns last, after added columns
    names_table = row_of(table_format).overwrite_names_partitions
    partition = f"partition ({', '.join(options.partition_by)})" if options.partition_by else ""
    return InsertOverwrite(
        target,
        source,
        tuple(c.sql for c in select_list(after, written)),
        partition if names_table else "",
        names_table,
    )


def render_load(load: Load) -> str:
    """The load's one statement."""
    if isinstance(load, Append):
        return f"insert into {load.target} by name\nselect {', '.join(load.columns)} from {load.source}"
    if isinstance(load, Merge):
        return _render_merge(load)
    if isinstance(load, ReplaceWindow):
        return load.batch.load_sql(load.target, load.source, load.columns)
    if isinstance(load, InsertOverwrite):
        table = "table " if load.names_table else ""
        head = f"insert overwrite {table}{load.target} {load.partition_clause}".rstrip()
        return f"{head} by name\nselect {', '.join(load.select)} from {load.source}"
    raise ValueError(
        f"{type(load).__name__} is rendered by dbt's own macro in Jinja (a table's rebuild: "
        "create_table_as; a snapshot: snapshot_merge_sql)"
    )


def _render_merge(m: Merge) -> str:
    on = " and ".join(m.on)
    using = f"{m.target} as {MERGE_TARGET}\n    using {m.source} as {MERGE_SOURCE}\n    on {on}"
    if m.with_schema_evolution:
        return (
            f"merge with schema evolution into {using}\n"
            "    when matched then update set *\n"
            "    when not matched then insert *"
        )
    out = f"merge into {using}"
    if m.update:
        sets = ", ".join(f"{MERGE_TARGET}.{c} = {MERGE_SOURCE}.{c}" for c in m.update)
        out += f"\n    when matched then update set {sets}"
    values = ", ".join(f"{MERGE_SOURCE}.{c}" for c in m.insert)
    return out + f"\n    when not matched then insert ({', '.join(m.insert)}) values ({values})"
