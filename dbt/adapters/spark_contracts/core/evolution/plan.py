"""Classify each schema change for a table format and policy, and plan the cheapest correct change.

Pure: reads the capability table and the table's properties; never touches Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dbt.adapters.spark_contracts.core.contracts.constraints import (
    enforced_not_null_columns,
    not_null_constraint_name,
)
from dbt.adapters.spark_contracts.core.evolution.capabilities import (
    DefaultStyle,
    FormatCapabilities,
    TableFeature,
    capabilities_for,
)
from dbt.adapters.spark_contracts.core.evolution.change_policy import (
    ChangeClass,
    ChangePolicy,
    Cost,
    OnChange,
    Verdict,
    judge,
)
from dbt.adapters.spark_contracts.core.evolution.operations import (
    AddColumns,
    AddNotNullCheck,
    AlterColumnType,
    Backfill,
    BlockedChange,
    DropColumns,
    DropNotNull,
    EnableTableFeature,
    FullRefresh,
    Judged,
    NewColumn,
    Operation,
    Plan,
    SetColumnDefault,
    merge_ops,
)
from dbt.adapters.spark_contracts.core.evolution.rewrite import Mode, build_rewrite, in_collection
from dbt.adapters.spark_contracts.core.schema.diff import (
    REMOVALS,
    Change,
    ColumnAdded,
    FieldAdded,
    FieldsReordered,
    MapKeyChanged,
    NullabilityRelaxed,
    NullabilityTightened,
    SchemaDiff,
    TypeChanged,
    TypeNarrowed,
    TypeWidened,
)
from dbt.adapters.spark_contracts.core.schema.types import Primitive, Struct, as_nullable

FULL_REFRESH = "allow_full_refresh"
COLUMN_REMOVAL = "allow_column_removal"
STRATEGIES = ("alter_and_backfill", "full_refresh")
ON_SCHEMA_CHANGE = ("ignore", "fail", "append_new_columns", "sync_all_columns")


@dataclass(frozen=True)
class ColumnEvolution:
    """Per-column `schema_evolution.columns` entry: SQL expressions, not values."""

    default: str | None = None
    backfill: str | None = None


@dataclass(frozen=True)
class Policy:
    """What the user allows: the model's `schema_evolution` plus the run-level permission vars
    (None: the run did not give the var, which then permits nothing)."""

    strategy: str = "alter_and_backfill"
    allow_full_refresh: bool | None = None
    allow_column_removal: bool | None = None
    columns: Mapping[str, ColumnEvolution] = field(default_factory=dict, hash=False)
    changes: ChangePolicy = ChangePolicy()

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"schema_evolution.strategy must be one of {STRATEGIES}")
        lowered = {name.lower(): evolution for name, evolution in self.columns.items()}
        object.__setattr__(self, "columns", lowered)

    def column(self, name: str) -> ColumnEvolution:
        return self.columns.get(name.lower(), ColumnEvolution())

    def permits(self, var: str | None) -> bool:
        return var is None or bool(getattr(self, var))

    def run_vars(self) -> dict[str, bool | None]:
        return {FULL_REFRESH: self.allow_full_refresh, COLUMN_REMOVAL: self.allow_column_removal}

    def unknown_columns(self, compiled: Struct) -> tuple[str, ...]:
        """`columns` entries that name no column of the compiled schema (warned: written ahead of
        the column, they apply on the run that adds it)."""
        return tuple(name for name in self.columns if compiled.field(name) is None)


@dataclass(frozen=True)
class _Treatment:
    """How this format makes one change, by what it costs: `ops` in its metadata (METADATA, or
    BACKFILL with a backfill: `_in_place`), a row-keeping REWRITE, a FULL_REFRESH, or nothing
    (NONE: the format does not enforce it)."""

    cost: Cost
    ops: tuple[Operation, ...] = ()
    gate: str | None = None
    reason: str = ""
    note: str | None = None


def _in_place(
    ops: tuple[Operation, ...], gate: str | None = None, reason: str = "", note: str | None = None
) -> _Treatment:
    backfills = any(isinstance(op, Backfill) for op in ops)
    return _Treatment(Cost.BACKFILL if backfills else Cost.METADATA, ops, gate, reason, note)


@dataclass(frozen=True)
class _Context:
    caps: FormatCapabilities
    properties: Mapping[str, str]
    policy: Policy
    mode: Mode
    deployed: Struct

    def feature(self, feature: TableFeature | None) -> tuple[Operation, ...]:
        if feature is None or feature.enabled_in(self.properties):
            return ()
        return (feature.enabling(),)

    def rewrite(self, reason: str, gate: str | None = None) -> _Treatment:
        """A row-keeping rewrite: free where atomic, else it needs `allow_full_refresh`."""
        needed = gate if gate is not None or self.caps.atomic_rewrite else FULL_REFRESH
        return _Treatment(Cost.REWRITE, gate=needed, reason=reason)


_UNSAFE_REASONS = {
    TypeNarrowed: "narrowing a type loses values",
    TypeChanged: "the types are incompatible",
    MapKeyChanged: "map keys cannot be converted in place",
    FieldsReordered: "struct fields are stored by position",
}


def _treat_added(change: ColumnAdded | FieldAdded, ctx: _Context) -> _Treatment:
    fmt, name = ctx.caps.name, change.dotted
    evolution = ctx.policy.column(change.column) if isinstance(change, ColumnAdded) else None
    default = evolution.default if evolution else None
    backfill = evolution.backfill if evolution else None
    not_null = not change.field.nullable and ctx.mode is Mode.EVOLVE
    if not_null and not (default or backfill):
        what = "column" if isinstance(change, ColumnAdded) else "struct field"
        reason = f"NOT NULL {what} without a default: existing rows would violate it"
        return _Treatment(Cost.FULL_REFRESH, gate=FULL_REFRESH, reason=reason)
    new_type = as_nullable(change.field.type)
    if isinstance(change, FieldAdded):
        if not ctx.caps.add_nested_field:
            return ctx.rewrite(f"{fmt} cannot add the nested field `{name}` in place")
        first = change.after is None
        column = NewColumn(change.path, new_type, change.field.comment, None, first, change.after)
        return _in_place((AddColumns((column,)),))
    return _treat_new_column(change, ctx, default, backfill, not_null)


def _treat_new_column(
    change: ColumnAdded,
    ctx: _Context,
    default: str | None,
    backfill: str | None,
    not_null: bool,
) -> _Treatment:
    name, fmt, style = change.dotted, ctx.caps.name, ctx.caps.add_column_default
    new_type = as_nullable(change.field.type)
    if style is DefaultStyle.INLINE_DEFAULT:
        note = f"{fmt} cannot enforce NOT NULL on `{name}`" if not_null else None
        if backfill:
            return ctx.rewrite(f"{fmt} has no UPDATE: backfilling `{name}` rewrites the table")
        column = NewColumn(change.path, new_type, change.field.comment, default=default)
        return _in_place((AddColumns((column,)),), note=note)
    ops: list[Operation] = [AddColumns((NewColumn(change.path, new_type, change.field.comment),))]
    if new_type == Primitive("variant"):
        ops = [*ctx.feature(ctx.caps.variant_feature), *ops]
    note = None
    if default and style is DefaultStyle.SET_DEFAULT_THEN_UPDATE:
        ops += [*ctx.feature(ctx.caps.default_feature), SetColumnDefault(name, default)]
    elif default:
        note = f"{fmt} keeps no column default: existing rows of `{name}` are set to it once"
    if backfill or default:
        ops.append(Backfill(name, backfill or default or "NULL"))
    if not_null and ctx.caps.not_null_check_constraint:
        ops.append(AddNotNullCheck(name, not_null_constraint_name(name)))
    elif not_null:
        note = f"{fmt} cannot add NOT NULL to the new column `{name}`: left nullable"
    return _in_place(tuple(ops), note=note)


def _treat_removed(change: Change, ctx: _Context) -> _Treatment:
    gate = None if ctx.mode is Mode.SYNC else COLUMN_REMOVAL
    nested_in_collection = in_collection(ctx.deployed, change.path)
    if ctx.caps.drop_column and (ctx.caps.drop_nested_in_collection or not nested_in_collection):
        ops: tuple[Operation, ...] = (
            *ctx.feature(ctx.caps.drop_column_feature),
            DropColumns((change.path,)),
        )
        required = isinstance(change, REMOVALS) and not change.field.nullable
        if ctx.caps.drops_columns_after_load and required:
            # the load, before the drop, writes no value for it: NULL must be allowed there
            ops = (DropNotNull(change.path), *ops)
        return _in_place(ops, gate=gate, reason="removing it deletes its data")
    reason = f"{ctx.caps.name} cannot drop `{change.dotted}` in place: removing it deletes its data"
    return _Treatment(Cost.REWRITE, gate=gate, reason=reason)


def _treat_widened(change: TypeWidened, ctx: _Context) -> _Treatment:
    if ctx.caps.can_widen(change.deployed, change.compiled, nested=len(change.path) > 1):
        alter = AlterColumnType(change.path, change.compiled, change.deployed)
        return _in_place((*ctx.feature(ctx.caps.widening_feature), alter))
    old, new = change.deployed.to_sql(), change.compiled.to_sql()
    return ctx.rewrite(f"{ctx.caps.name} cannot widen `{change.dotted}` {old} -> {new} in metadata")


def _treat(change: Change, ctx: _Context) -> _Treatment:
    if isinstance(change, (ColumnAdded, FieldAdded)):
        return _treat_added(change, ctx)
    if isinstance(change, REMOVALS):
        return _treat_removed(change, ctx)
    if isinstance(change, TypeWidened):
        return _treat_widened(change, ctx)
    if isinstance(change, NullabilityRelaxed):
        if ctx.caps.drop_not_null:
            return _in_place((DropNotNull(change.path),))
        note = f"{ctx.caps.name} does not enforce NOT NULL: nothing to do for `{change.dotted}`"
        return _Treatment(Cost.NONE, note=note)
    if isinstance(change, NullabilityTightened):
        return _Treatment(Cost.NONE)
    reason = _UNSAFE_REASONS[type(change)]
    if ctx.mode is Mode.SYNC:
        return ctx.rewrite(f"sync_all_columns: {reason}; rebuilding with casts")
    return _Treatment(Cost.FULL_REFRESH, gate=FULL_REFRESH, reason=reason)


def _tightened_note(changes: list[Change], props: Mapping[str, str]) -> tuple[str, ...]:
    held = enforced_not_null_columns(props)  # Delta CHECK constraints do enforce it
    paths = [
        f"`{c.dotted}`"
        for c in changes
        if isinstance(c, NullabilityTightened) and c.dotted.lower() not in held
    ]
    if not paths:
        return ()
    return (f"NOT NULL in the model but nullable in the table (not enforced): {', '.join(paths)}",)


_ADDITIVE = (ColumnAdded, FieldAdded, TypeWidened, NullabilityRelaxed)


def _classify(change: Change, treatment: _Treatment) -> ChangeClass:
    """Additive: made in the format's metadata (a backfill aside); everything else, and every
    change the format makes only by a rewrite or a full refresh, destructive."""
    if treatment.cost in (Cost.FULL_REFRESH, Cost.REWRITE):
        return ChangeClass.DESTRUCTIVE
    if treatment.cost is Cost.NONE or isinstance(change, _ADDITIVE):
        return ChangeClass.ADDITIVE
    return ChangeClass.DESTRUCTIVE


def _verdict(change: Change, treatment: _Treatment, policy: Policy, mode: Mode) -> Verdict:
    change_class, cost = _classify(change, treatment), treatment.cost
    if mode is not Mode.EVOLVE:  # dbt's on_schema_change: its own semantics, the vars' gates
        action = OnChange.ALLOW if policy.permits(treatment.gate) else OnChange.ERROR
        return Verdict(change_class, cost, action, "on_schema_change", treatment.gate)
    # strategy full_refresh is the model's own permission for what the vars gate
    gate = None if policy.strategy == "full_refresh" else treatment.gate
    return judge(change_class, cost, gate, policy.run_vars(), policy.changes)


def _plan(
    diff: SchemaDiff,
    fmt: str,
    props: Mapping[str, str],
    policy: Policy,
    mode: Mode,
    deployed: Struct,
    compiled: Struct,
) -> Plan:
    caps = capabilities_for(fmt)
    ctx = _Context(caps, props, policy, mode, deployed)
    treated = [(change, _treat(change, ctx)) for change in diff.changes]
    notes = tuple(dict.fromkeys(t.note for _, t in treated if t.note))
    notes += _tightened_note(list(diff.changes), props)
    verdicts = [(c, t, _verdict(c, t, policy, mode)) for c, t in treated if t.cost is not Cost.NONE]
    judged = tuple(Judged(c, v) for c, _, v in verdicts) if mode is Mode.EVOLVE else ()
    blocked = tuple(
        BlockedChange(c, t.reason or v.decided_by, v.gate, v if judged else None)
        for c, t, v in verdicts
        if v.action is OnChange.ERROR
    )
    if blocked:
        return Plan(caps.name, blocked=blocked, notes=notes, judged=judged)
    acting = [(c, t) for c, t, v in verdicts if v.action in (OnChange.ALLOW, OnChange.WARN)]
    if not acting:
        return Plan(caps.name, notes=notes, judged=judged)
    if policy.strategy == "full_refresh" and mode is Mode.EVOLVE:
        reason = "schema_evolution strategy full_refresh; " + "; ".join(
            c.describe() for c, _ in acting
        )
        return Plan(caps.name, (FullRefresh(reason),), notes=notes, judged=judged)
    costs = {t.cost for _, t in acting}
    if Cost.FULL_REFRESH in costs:
        why = [f"{c.describe()} ({t.reason})" for c, t in acting if t.cost is Cost.FULL_REFRESH]
        return Plan(caps.name, (FullRefresh("; ".join(why)),), notes=notes, judged=judged)
    if Cost.REWRITE in costs:
        reason = "; ".join(t.reason for _, t in acting if t.cost is Cost.REWRITE)
        fills = {k: v.backfill or v.default or "NULL" for k, v in policy.columns.items()}
        defaults = {k: v.default for k, v in policy.columns.items() if v.default}
        rewrite = build_rewrite(deployed, compiled, mode, caps, props, reason, fills, defaults)
        feature = caps.default_feature.property if caps.default_feature else None
        after: list[Operation] = [
            op
            for _, t in acting
            for op in t.ops
            if isinstance(op, (SetColumnDefault, AddNotNullCheck))
            or (isinstance(op, EnableTableFeature) and op.property == feature)
        ]
        return Plan(caps.name, (rewrite, *merge_ops(after)), notes=notes, judged=judged)
    ops = merge_ops([op for _, t in acting for op in t.ops])
    return Plan(caps.name, ops, notes=notes, judged=judged)


def plan_schema_change(
    diff: SchemaDiff,
    table_format: str,
    table_properties: Mapping[str, str],
    policy: Policy,
    deployed: Struct,
    compiled: Struct,
) -> Plan:
    """SPEC §4: safe changes in place, unsafe ones gated by the policy's permission vars."""
    return _plan(diff, table_format, table_properties, policy, Mode.EVOLVE, deployed, compiled)


def plan_on_schema_change(
    on_schema_change: str,
    diff: SchemaDiff,
    table_format: str,
    table_properties: Mapping[str, str],
    deployed: Struct,
    compiled: Struct,
    policy: Policy | None = None,
) -> Plan:
    """dbt's `on_schema_change` carried out by the same planner (nested fields included)."""
    setting = on_schema_change.lower()
    policy = policy or Policy()
    fmt = capabilities_for(table_format).name
    if setting == "ignore":
        return Plan(fmt)
    if setting == "fail":
        nullability = (NullabilityRelaxed, NullabilityTightened)
        reason = "the schema changed and on_schema_change is 'fail'"
        blocked = tuple(
            BlockedChange(c, reason, None) for c in diff.changes if not isinstance(c, nullability)
        )
        return Plan(fmt, blocked=blocked)
    if setting == "append_new_columns":
        additions = diff.only(ColumnAdded, FieldAdded)
        return _plan(additions, fmt, table_properties, policy, Mode.APPEND, deployed, compiled)
    if setting == "sync_all_columns":
        return _plan(diff, fmt, table_properties, policy, Mode.SYNC, deployed, compiled)
    raise ValueError(
        f"on_schema_change must be one of {ON_SCHEMA_CHANGE}, got {on_schema_change!r}"
    )
