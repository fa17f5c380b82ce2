"""Enforce a `SchemaContract` on one run (SPEC §3): decide from metadata, render the one load query.

`decide` compares the deployed schema (None: no table) with the compiled one and says what the run
does: create, fail, skip or load, which changes the §4 planner carries out (`target`, whose diff
against the deployed schema is `evolve_diff`), and which per-value work the load does.
`render_load_select` turns that into one Spark SELECT over the model's staged view: casts,
`raise_error` for freeze, filters for discard_row, NULLs for discard_value, variant columns.
Pure: no Spark, no dbt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from .capabilities import FormatCapabilities, capabilities_for
from .checks import ColumnRules
from .contract import ContractMode, SchemaContract, for_new_table
from .diff import (
    ColumnAdded,
    ColumnRemoved,
    FieldAdded,
    FieldRemoved,
    Path,
    SchemaDiff,
    TypeChanged,
    TypeNarrowed,
    TypeWidened,
    diff_schemas,
)
from .types import (
    Array,
    Field,
    Map,
    Primitive,
    SparkType,
    Struct,
    as_nullable,
    is_widening,
    quote_identifier,
    sql_string,
)

CREATE, FAIL, SKIP, LOAD = "create", "fail", "skip", "load"
# How a data_type change is handled; CAST (a safe widening into the deployed type) is not listed.
WIDEN, VARIANT = "widen", "variant"
VARIANT_INFIX = "__v_"
_Key = tuple[str, ...]


def _key(path: Path) -> _Key:
    return tuple(segment.lower() for segment in path)


def _type_sql(t: SparkType | None) -> str | None:
    return None if t is None else t.to_sql()


@dataclass(frozen=True)
class ContractViolation:
    """A `freeze` broken before anything runs (dlt's DataValidationError context)."""

    schema_entity: str
    contract_mode: str
    column: str | None
    deployed_type: SparkType | None
    compiled_type: SparkType | None
    reason: str

    def describe(self) -> str:
        where = f" column `{self.column}`" if self.column else ""
        types = ""
        if self.deployed_type is not None or self.compiled_type is not None:
            deployed = _type_sql(self.deployed_type) or "(absent)"
            types = f" (deployed {deployed}, compiled {_type_sql(self.compiled_type)})"
        return f"{self.schema_entity} {self.contract_mode}{where}{types}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_entity": self.schema_entity,
            "contract_mode": self.contract_mode,
            "column": self.column,
            "deployed_type": _type_sql(self.deployed_type),
            "compiled_type": _type_sql(self.compiled_type),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class AddedColumn:
    """A compiled column or nested struct field the deployed table lacks, and its `columns` mode."""

    path: Path
    field: Field
    mode: ContractMode

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class ValueCheck:
    """A leaf whose compiled type does not safely cast into the deployed one (`data_type`).

    `handling`: `widen` (the planner widens the column), `variant` (non-coercible values go to
    `variant_column`), or the mode's value (`freeze`, `discard_row`, `discard_value`).
    """

    path: Path
    deployed_type: SparkType
    compiled_type: SparkType
    handling: str
    variant_column: str | None = None

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class Declared:
    """A contract that declares its columns (a Pydantic class): their types, pre-merged into the
    deployed schema before the contract is checked (dlt's authoritative model), per-column
    validity rules checked on every value under the `data_type` mode, and the fields the model
    must output. `origin` names the declaration in messages."""

    columns: Struct
    rules: tuple[ColumnRules, ...] = ()
    required: tuple[str, ...] = ()
    origin: str = "the declared contract"

    def reference(self, deployed: Struct | None) -> Struct:
        """The schema the contract checks against: the deployed table plus declared columns it
        lacks (the declared schema alone when there is no table)."""
        if deployed is None:
            return self.columns
        extra = tuple(f for f in self.columns.fields if deployed.field(f.name) is None)
        return Struct(deployed.fields + extra)


@dataclass(frozen=True)
class ContractDecision:
    """What one run does under its contract; `target` is the table schema after the planner."""

    contract: SchemaContract
    table_action: str
    table_format: str
    violations: tuple[ContractViolation, ...] = ()
    new_columns: tuple[AddedColumn, ...] = ()
    value_checks: tuple[ValueCheck, ...] = ()
    target: Struct | None = None
    evolve_diff: SchemaDiff = SchemaDiff()
    warnings: tuple[str, ...] = ()
    rule_checks: tuple[ColumnRules, ...] = ()  # checked under contract.data_type

    def rules_of(self, column: str) -> ColumnRules | None:
        return next((r for r in self.rule_checks if r.column.lower() == column.lower()), None)

    @property
    def variant_columns(self) -> tuple[str, ...]:
        names = (c.variant_column for c in self.value_checks if c.variant_column)
        return tuple(dict.fromkeys(names))

    def summary(self) -> str:
        mapping = ", ".join(f"{k}: {v}" for k, v in self.contract.to_dict().items())
        lines = [f"schema_contract {{{mapping}}} ({self.table_format}): {self.table_action}"]
        lines += [f"  violation: {v.describe()}" for v in self.violations]
        lines += [f"  new {n.dotted}: {n.mode.value}" for n in self.new_columns]
        for check in self.value_checks:
            types = f"{check.compiled_type.to_sql()} into {check.deployed_type.to_sql()}"
            extra = f" -> {check.variant_column}" if check.variant_column else ""
            lines.append(f"  data_type {check.dotted} ({types}): {check.handling}{extra}")
        lines += [f"  evolve: {change.describe()}" for change in self.evolve_diff]
        mode = self.contract.data_type.value
        lines += [f"  rules {r.column} ({r.describe()}): {mode}" for r in self.rule_checks]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        rules = [{"column": r.column, "rules": r.describe()} for r in self.rule_checks]
        return {
            "contract": self.contract.to_dict(),
            "table_action": self.table_action,
            "table_format": self.table_format,
            "violations": [v.to_dict() for v in self.violations],
            "new_columns": [{"path": n.dotted, "mode": n.mode.value} for n in self.new_columns],
            "value_checks": [
                {
                    "path": c.dotted,
                    "deployed_type": c.deployed_type.to_sql(),
                    "compiled_type": c.compiled_type.to_sql(),
                    "handling": c.handling,
                    "variant_column": c.variant_column,
                }
                for c in self.value_checks
            ],
            "evolve": [change.describe() for change in self.evolve_diff],
            "warnings": list(self.warnings),
            **({"rule_checks": rules} if rules else {}),
        }


def safe_cast(compiled: SparkType, deployed: SparkType) -> bool:
    """Every compiled value fits the deployed type (§3's safe widening): never a violation."""
    return compiled == deployed or is_widening(compiled, deployed) or compiled == Primitive("void")


def type_tag(t: SparkType) -> str:
    """Identifier-friendly simple name of a type: `string`, `bigint`, `decimal_12_2`, `struct`."""
    if isinstance(t, (Struct, Array, Map)):
        return type(t).__name__.lower()
    return re.sub(r"[^a-z0-9]+", "_", t.simple_string().lower()).strip("_")


def variant_name(column: str, compiled_type: SparkType) -> str:
    """dlt's variant column: `score__v_string` for string values of the column `score`."""
    return f"{column}{VARIANT_INFIX}{type_tag(compiled_type)}"


def decide(
    contract: SchemaContract,
    deployed: Struct | None,
    compiled: Struct,
    diff: SchemaDiff,
    table_format: str,
    declared: Declared | None = None,
) -> ContractDecision:
    """SPEC §3 from metadata only; `diff` is `diff_schemas(deployed, compiled)`.

    With `declared`, the contract is checked against the declared columns (pre-merged into the
    deployed table) also on the run that creates the table, and its rules join the load."""
    caps = capabilities_for(table_format)
    if declared is not None and (deployed is not None or contract.tables is ContractMode.EVOLVE):
        return _decide_declared(contract, deployed, compiled, caps, declared)
    if deployed is None:
        return _decide_new_table(contract, compiled, caps.name)
    return _decide_existing(contract, deployed, compiled, diff, caps)


def _decide_existing(
    contract: SchemaContract,
    deployed: Struct,
    compiled: Struct,
    diff: SchemaDiff,
    caps: FormatCapabilities,
) -> ContractDecision:
    violations: list[ContractViolation] = []
    new_columns: list[AddedColumn] = []
    checks: list[ValueCheck] = []
    for change in diff:
        if isinstance(change, (ColumnAdded, FieldAdded)):
            _decide_added(change, contract.columns, violations, new_columns)
        elif isinstance(change, (TypeWidened, TypeNarrowed, TypeChanged)):
            if not safe_cast(change.compiled, change.deployed):
                checks.append(_decide_value(change, contract.data_type, caps, compiled))
    action = FAIL if violations else LOAD
    accepted = {_key(n.path) for n in new_columns if n.mode is ContractMode.EVOLVE}
    widened = {_key(c.path) for c in checks if c.handling == WIDEN}
    target = _merge_struct((), deployed, compiled, accepted, widened)
    target = _with_variants(target, deployed, compiled, checks)
    return ContractDecision(
        contract,
        action,
        caps.name,
        tuple(violations),
        tuple(new_columns),
        tuple(checks),
        target,
        diff_schemas(deployed, target),
    )


def view_violations(
    contract: SchemaContract, deployed: Struct, compiled: Struct
) -> tuple[ContractViolation, ...]:
    """A view stores no rows: only `freeze` binds it. `columns: freeze` keeps its column set
    (no column or struct field added or removed); `data_type: freeze` keeps each column's type
    (a safe widening included: the view's readers see the new type). Evolve and the discard
    modes let the view be replaced by the model's query."""
    out: list[ContractViolation] = []
    for change in diff_schemas(deployed, compiled):
        if isinstance(change, (ColumnAdded, FieldAdded)):
            if contract.columns is ContractMode.FREEZE:
                _decide_added(change, contract.columns, out, [])
        elif isinstance(change, (ColumnRemoved, FieldRemoved)):
            if contract.columns is ContractMode.FREEZE:
                what = "column" if isinstance(change, ColumnRemoved) else "struct field"
                reason = f"the model no longer outputs the {what} `{change.dotted}` the view has"
                out.append(
                    ContractViolation(
                        "columns", "freeze", change.dotted, change.field.type, None, reason
                    )
                )
    return (*out, *type_freeze_violations(contract, deployed, compiled, "its type would change"))


def type_freeze_violations(
    contract: SchemaContract, deployed: Struct, compiled: Struct, reason: str
) -> tuple[ContractViolation, ...]:
    """`data_type: freeze` where no value is checked (views, snapshots): any type change of a
    kept column, a safe widening included, is a violation."""
    if contract.data_type is not ContractMode.FREEZE:
        return ()
    return tuple(
        ContractViolation(
            "data_type", "freeze", change.dotted, change.deployed, change.compiled, reason
        )
        for change in diff_schemas(deployed, compiled)
        if isinstance(change, (TypeWidened, TypeNarrowed, TypeChanged))
    )


def _decide_declared(
    contract: SchemaContract,
    deployed: Struct | None,
    compiled: Struct,
    caps: FormatCapabilities,
    declared: Declared,
) -> ContractDecision:
    reference = declared.reference(deployed)
    base = _decide_existing(contract, reference, compiled, diff_schemas(reference, compiled), caps)
    violations = list(base.violations)
    if contract.data_type is not ContractMode.EVOLVE:
        for name in declared.required:
            if compiled.field(name) is None:
                reason = (
                    f"the model does not output `{name}`, which {declared.origin} requires "
                    "(a field without a default)"
                )
                mode = contract.data_type.value
                violations.append(ContractViolation("data_type", mode, name, None, None, reason))
    target = base.target
    assert target is not None
    rules: tuple[ColumnRules, ...] = ()
    if contract.data_type is not ContractMode.EVOLVE:  # dlt: evolve validates no values
        rules = tuple(r for r in declared.rules if target.field(r.column) is not None)
    action = FAIL if violations else (LOAD if deployed is not None else CREATE)
    return replace(
        base,
        table_action=action,
        violations=tuple(violations),
        evolve_diff=diff_schemas(deployed, target) if deployed is not None else SchemaDiff(),
        rule_checks=rules,
    )


def _decide_new_table(contract: SchemaContract, compiled: Struct, fmt: str) -> ContractDecision:
    effective = for_new_table(contract)
    mode = contract.tables
    if mode is ContractMode.EVOLVE:
        return ContractDecision(effective, CREATE, fmt, target=compiled)
    if mode is ContractMode.FREEZE:
        reason = "the relation does not exist and schema_contract.tables is freeze: nothing created"
        violation = ContractViolation("tables", mode.value, None, None, None, reason)
        return ContractDecision(effective, FAIL, fmt, violations=(violation,))
    warning = f"the relation does not exist and schema_contract.tables is {mode.value}: skipped"
    return ContractDecision(effective, SKIP, fmt, warnings=(warning,))


def _decide_added(
    change: ColumnAdded | FieldAdded,
    mode: ContractMode,
    violations: list[ContractViolation],
    new_columns: list[AddedColumn],
) -> None:
    if mode is not ContractMode.FREEZE:
        new_columns.append(AddedColumn(change.path, change.field, mode))
        return
    what = "column" if isinstance(change, ColumnAdded) else "struct field"
    reason = f"the model outputs a new {what} `{change.dotted}` the deployed table lacks"
    violations.append(
        ContractViolation("columns", mode.value, change.dotted, None, change.field.type, reason)
    )


def _decide_value(
    change: TypeWidened | TypeNarrowed | TypeChanged,
    mode: ContractMode,
    caps: FormatCapabilities,
    compiled: Struct,
) -> ValueCheck:
    path, old, new = change.path, change.deployed, change.compiled
    if mode is not ContractMode.EVOLVE:
        return ValueCheck(path, old, new, mode.value)
    if caps.can_widen(old, new, nested=len(path) > 1):
        return ValueCheck(path, old, new, WIDEN)
    column = compiled.field(path[0])
    assert column is not None, f"compiled schema lacks {path[0]}"
    return ValueCheck(path, old, new, VARIANT, variant_name(path[0], column.type))


def _merge(
    path: _Key, old: SparkType, new: SparkType, add: set[_Key], widen: set[_Key]
) -> SparkType:
    """The deployed type after the accepted changes (compiled struct order, as the planner sees)."""
    if isinstance(old, Struct) and isinstance(new, Struct):
        return _merge_struct(path, old, new, add, widen)
    if isinstance(old, Array) and isinstance(new, Array):
        element = _merge((*path, "element"), old.element, new.element, add, widen)
        return Array(element, old.contains_null or new.contains_null)
    if isinstance(old, Map) and isinstance(new, Map):
        key = old.key if safe_cast(new.key, old.key) else new.key  # else the planner decides
        value = _merge((*path, "value"), old.value, new.value, add, widen)
        return Map(key, value, old.value_contains_null or new.value_contains_null)
    return new if path in widen else old


def _merge_struct(path: _Key, old: Struct, new: Struct, add: set[_Key], widen: set[_Key]) -> Struct:
    fields: list[Field] = []
    for field in new.fields:
        existing = old.field(field.name)
        here = (*path, field.name.lower())
        if existing is None:
            if here in add:
                fields.append(Field(field.name, as_nullable(field.type), True, field.comment))
            continue
        merged = _merge(here, existing.type, field.type, add, widen)
        fields.append(replace(existing, type=merged, nullable=existing.nullable or field.nullable))
    return Struct(tuple(fields))


def _with_variants(
    target: Struct, deployed: Struct, compiled: Struct, checks: list[ValueCheck]
) -> Struct:
    fields = list(target.fields)
    kept = _deployed_variants(deployed, compiled)
    for check in checks:
        name = check.variant_column
        if name is None or any(f.name.lower() == name.lower() for f in fields):
            continue
        existing = deployed.field(name)
        column = compiled.field(check.path[0])
        assert column is not None
        fields.append(existing or Field(name, as_nullable(column.type)))
    names = {f.name.lower() for f in fields}
    fields += [f for f in kept if f.name.lower() not in names]
    return Struct(tuple(fields))


def _deployed_variants(deployed: Struct, compiled: Struct) -> list[Field]:
    """Variant columns of earlier runs stay in the table (NULL in this load), never removed."""
    columns = {f.name.lower() for f in deployed.fields}
    return [
        f
        for f in deployed.fields
        if compiled.field(f.name) is None
        and VARIANT_INFIX in f.name
        and f.name.lower().rsplit(VARIANT_INFIX, 1)[0] in columns
    ]


# ------------------------------------------------- rendering: one SELECT, no execution here

_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")
_TEXT = ("string", "char", "varchar")
_CASTS = {  # try_cast pairs Spark 4 accepts (probed); anything casts to string
    **{k: {*_NUMERIC, "boolean", "timestamp"} for k in _NUMERIC},
    "boolean": {*_NUMERIC, "boolean"},
    "date": {"date", "timestamp", "timestamp_ntz"},
    "timestamp": {*_NUMERIC, "date", "timestamp", "timestamp_ntz"},
    "timestamp_ntz": {"date", "timestamp", "timestamp_ntz"},
    "binary": {"binary"},
    **{k: {*_NUMERIC, "boolean", "date", "timestamp", "timestamp_ntz", "binary"} for k in _TEXT},
}


def _kind(t: SparkType) -> str:
    return t.name if isinstance(t, Primitive) else type(t).__name__.lower()


def _castable(source: SparkType, target: SparkType) -> bool:
    if _kind(target) in _TEXT:
        return True
    return _kind(target) in _CASTS.get(_kind(source), set())


def _lossy(source: SparkType, target: SparkType) -> bool:
    """Fractional into integral/decimal: try_cast truncates, so compare the result as well."""
    fractional = _kind(source) in ("float", "double", "decimal")
    return fractional and _kind(target) in (*_NUMERIC[:4], "decimal")


@dataclass(frozen=True)
class _Built:
    """A value expression plus predicates: `bad` (value does not coerce), `new` (discarded field
    holds a value). Predicates never evaluate to NULL."""

    value: str
    bad: tuple[str, ...] = ()
    new: tuple[str, ...] = ()


def _any(collection: str, var: str, predicates: tuple[str, ...]) -> tuple[str, ...]:
    if not predicates:
        return ()
    return (f"coalesce(exists({collection}, {var} -> {' OR '.join(predicates)}), false)",)


def _coerce(expr: str, source: SparkType, target: SparkType, depth: int = 0) -> _Built:
    """`expr` (compiled type `source`) as the deployed/target type, recursing by field name."""
    if as_nullable(source).simple_string() == as_nullable(target).simple_string():
        return _Built(expr)  # equal up to nullability and comments
    if isinstance(source, Struct) and isinstance(target, Struct):
        return _coerce_struct(expr, source, target, depth)
    if isinstance(source, Array) and isinstance(target, Array):
        var = f"x{depth}"
        inner = _coerce(var, source.element, target.element, depth + 1)
        value = expr if inner.value == var else f"transform({expr}, {var} -> {inner.value})"
        return _Built(value, _any(expr, var, inner.bad), _any(expr, var, inner.new))
    if isinstance(source, Map) and isinstance(target, Map):
        return _coerce_map(expr, source, target, depth)
    return _coerce_leaf(expr, source, target)


def _coerce_struct(expr: str, source: Struct, target: Struct, depth: int) -> _Built:
    parts: list[str] = []
    bad: list[str] = []
    new: list[str] = []
    for field in target.fields:
        old = source.field(field.name)
        if old is None:
            value = f"CAST(NULL AS {field.type.to_sql()})"
        else:
            built = _coerce(f"{expr}.{quote_identifier(old.name)}", old.type, field.type, depth)
            value, bad, new = built.value, [*bad, *built.bad], [*new, *built.new]
        parts += [sql_string(field.name), value]
    for field in source.fields:
        if target.field(field.name) is None:
            new.append(f"{expr}.{quote_identifier(field.name)} IS NOT NULL")
    value = f"IF({expr} IS NULL, NULL, named_struct({', '.join(parts)}))"
    return _Built(value, tuple(bad), tuple(new))


def _coerce_map(expr: str, source: Map, target: Map, depth: int) -> _Built:
    key, var = f"k{depth}", f"v{depth}"
    out = expr
    if source.key != target.key:  # only safe key casts reach here (see _merge)
        out = f"transform_keys({out}, ({key}, {var}) -> CAST({key} AS {target.key.to_sql()}))"
    inner = _coerce(var, source.value, target.value, depth + 1)
    if inner.value != var:
        out = f"transform_values({out}, ({key}, {var}) -> {inner.value})"
    values = f"map_values({expr})"
    return _Built(out, _any(values, var, inner.bad), _any(values, var, inner.new))


def _coerce_leaf(expr: str, source: SparkType, target: SparkType) -> _Built:
    target_sql = target.to_sql()
    if safe_cast(source, target):
        return _Built(f"CAST({expr} AS {target_sql})")
    if not _castable(source, target):
        return _Built(f"CAST(NULL AS {target_sql})", (f"{expr} IS NOT NULL",))
    attempt = f"try_cast({expr} AS {target_sql})"
    if _lossy(source, target):
        bad = f"({expr} IS NOT NULL AND ({attempt} IS NULL OR {attempt} <> {expr}))"
        return _Built(f"IF({attempt} = {expr}, {attempt}, NULL)", (bad,))
    return _Built(attempt, (f"({expr} IS NOT NULL AND {attempt} IS NULL)",))


@dataclass(frozen=True)
class LoadSql:
    """The load query and its companions; `columns` are the written columns, in order.

    `violation_sample_sql` (after a freeze failure only): `column_name`, `value` rows, up to 5
    per column. `discard_metrics`: (name, aggregate) pairs over the source, `rows_discarded` and
    `values_discarded`, observed in a pass that reads the source anyway where the connection can;
    `discard_count_sql` is the same aggregates as a query of their own where it cannot.
    `quarantine_select`: the discarded rows plus `_contract_reason` and `_dbt_run_id`.
    """

    select: str
    columns: tuple[str, ...]
    violation_sample_sql: str | None = None
    discard_metrics: tuple[tuple[str, str], ...] = ()
    quarantine_select: str | None = None
    source: str = ""

    @property
    def discard_count_sql(self) -> str | None:
        if not self.discard_metrics:
            return None
        aggregates = ", ".join(f"{expr} AS {name}" for name, expr in self.discard_metrics)
        return f"SELECT {aggregates} FROM {self.source}"


@dataclass
class _Load:
    items: list[str]
    columns: list[str]
    row_filters: list[tuple[str, str]]  # (reason, predicate): drop the row
    value_drops: list[str]  # predicates: a value discarded
    frozen: list[tuple[str, str, str]]  # (column, predicate, reason): freeze check


def _item(value: str, name: str) -> str:
    column = quote_identifier(name)
    return column if value == column else f"{value} AS {column}"


COERCE_REASON = "values do not coerce into the deployed column's type"


def _freeze(value: str, predicate: str, column: str, before: str, shown: str, after: str) -> str:
    """Fail the writing query itself on the first value that breaks the contract."""
    message = (
        f"concat('schema_contract data_type freeze: column ', {sql_string(column)}, "
        f"{sql_string(before + ' value ')}, {shown}, {sql_string(after)})"
    )
    return f"CASE WHEN {predicate} THEN raise_error({message}) ELSE {value} END"


def _freeze_coercion(value: str, ref: str, predicate: str, check: ValueCheck) -> str:
    types = f" (deployed {check.deployed_type.to_sql()}, compiled {check.compiled_type.to_sql()})"
    shown = f"cast({ref} AS STRING)"
    return _freeze(value, predicate, check.dotted, types, shown, " does not coerce")


def _apply_rules(
    load: _Load, decision: ContractDecision, field: Field, ref: str, checked: str, value: str
) -> str:
    """The declared rules of `field` on its coerced value `checked`, under the data_type mode."""
    rules = decision.rules_of(field.name)
    predicate = rules.violated(checked) if rules is not None else None
    if rules is None or predicate is None:
        return value
    mode = decision.contract.data_type
    broken = f"breaks {rules.describe()}"
    if mode is ContractMode.FREEZE:
        load.frozen.append(
            (field.name, predicate, f"values break the contract: {rules.describe()}")
        )
        shown = f"coalesce(cast({ref} AS STRING), 'NULL')"
        return _freeze(value, predicate, field.name, "", shown, f" {broken}")
    if mode is ContractMode.DISCARD_VALUE and rules.nulling_repairs:
        load.value_drops.append(predicate)
        return f"CASE WHEN {predicate} THEN NULL ELSE {value} END"
    # discard_row; or discard_value on a required field, where NULL is no valid value either
    load.row_filters.append((f"data_type {mode.value}: `{field.name}` {broken}", predicate))
    return value


def _render_column(
    load: _Load, decision: ContractDecision, field: Field, source: Field | None
) -> None:
    load.columns.append(field.name)
    if source is None:  # a variant column of an earlier run
        load.items.append(f"CAST(NULL AS {field.type.to_sql()}) AS {quote_identifier(field.name)}")
        return
    ref = quote_identifier(source.name)
    built = _coerce(ref, source.type, field.type)
    value, columns_mode = built.value, decision.contract.columns
    value = _apply_rules(load, decision, field, ref, built.value, value)
    if built.new:
        what = f"new struct field in `{field.name}`"
        _discard(load, "columns", columns_mode, what, " OR ".join(built.new))
    if built.bad:
        bad = " OR ".join(built.bad)
        check = _value_check(decision, field.name)
        if check.handling == ContractMode.FREEZE.value:
            load.frozen.append((field.name, bad, COERCE_REASON))
            value = _freeze_coercion(value, ref, bad, check)
        elif check.handling == VARIANT and check.variant_column:
            load.items.append(_item(value, field.name))
            load.items.append(
                f"CASE WHEN {bad} THEN {ref} END AS {quote_identifier(check.variant_column)}"
            )
            load.columns.append(check.variant_column)
            return
        else:
            what = f"`{field.name}` value does not coerce into {field.type.to_sql()}"
            _discard(load, "data_type", ContractMode(check.handling), what, bad)
    load.items.append(_item(value, field.name))


def _value_check(decision: ContractDecision, column: str) -> ValueCheck:
    """The per-value handling of a column (widened leaves need none)."""
    return next(
        c
        for c in decision.value_checks
        if _key(c.path)[0] == column.lower() and c.handling != WIDEN
    )


def _discard(load: _Load, entity: str, mode: ContractMode, what: str, predicate: str) -> None:
    if mode is ContractMode.DISCARD_ROW:
        load.row_filters.append((f"{entity} discard_row: {what}", predicate))
    else:
        load.value_drops.append(predicate)


def render_load_select(
    decision: ContractDecision, source: str, deployed: Struct | None, compiled: Struct, run_id: str
) -> LoadSql:
    """The one SELECT that loads `source` (a rendered relation or view) under the decision.

    `deployed` is the schema the decision was made against (its `target` already carries it).
    """
    if decision.table_action not in (CREATE, LOAD) or decision.target is None:
        raise ValueError(f"nothing to load: the contract decided {decision.table_action!r}")
    load = _Load([], [], [], [], [])
    variants = {v.lower() for v in decision.variant_columns}
    for field in decision.target.fields:
        if field.name.lower() not in variants:
            _render_column(load, decision, field, compiled.field(field.name))
    for field in compiled.fields:
        if decision.target.field(field.name) is None:
            what = f"new column `{field.name}`"
            predicate = f"{quote_identifier(field.name)} IS NOT NULL"
            _discard(load, "columns", decision.contract.columns, what, predicate)
    select = f"SELECT {', '.join(load.items)} FROM {source}"
    if load.row_filters:
        select += " WHERE " + " AND ".join(f"NOT ({p})" for _, p in load.row_filters)
    return LoadSql(
        select,
        tuple(load.columns),
        _violation_samples(load, source),
        _discard_metrics(load),
        _quarantine(load, decision, source, compiled, run_id),
        source,
    )


def _violation_samples(load: _Load, source: str) -> str | None:
    parts = [
        f"SELECT {sql_string(column)} AS column_name, value, {sql_string(reason)} AS reason "
        f"FROM (SELECT DISTINCT CAST({quote_identifier(column)} AS STRING) AS value "
        f"FROM {source} WHERE {predicate} LIMIT 5) AS s{i}"
        for i, (column, predicate, reason) in enumerate(load.frozen)
    ]
    return " UNION ALL ".join(parts) or None


def _discard_metrics(load: _Load) -> tuple[tuple[str, str], ...]:
    if not load.row_filters and not load.value_drops:
        return ()
    dropped = " OR ".join(f"({p})" for _, p in load.row_filters)
    kept = f"NOT ({dropped}) AND " if dropped else ""
    rows = f"count_if({dropped})" if dropped else "0"
    values = " + ".join(f"count_if({kept}({p}))" for p in load.value_drops) or "0"
    return (("rows_discarded", rows), ("values_discarded", values))


def _quarantine(
    load: _Load, decision: ContractDecision, source: str, compiled: Struct, run_id: str
) -> str | None:
    if not decision.contract.quarantine or not load.row_filters:
        return None
    reasons = ", ".join(f"CASE WHEN {p} THEN {sql_string(r)} END" for r, p in load.row_filters)
    columns = ", ".join(quote_identifier(f.name) for f in compiled.fields)
    where = " OR ".join(f"({p})" for _, p in load.row_filters)
    return (
        f"SELECT {columns}, concat_ws('; ', {reasons}) AS `_contract_reason`, "
        f"{sql_string(run_id)} AS `_dbt_run_id` FROM {source} WHERE {where}"
    )
