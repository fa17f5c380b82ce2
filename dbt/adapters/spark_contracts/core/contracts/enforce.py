"""Enforce a `SchemaContract` on one run (SPEC §3): decide from metadata, render the one load query
(load_select.py).

`decide` compares the deployed schema (None: no table) with the compiled one and says what the run
does: create, fail, skip or load, which changes the §4 planner carries out (`target`, whose diff
against the deployed schema is `evolve_diff`), and which per-value work the load does.
`render_load_select` turns that into one Spark SELECT over the model's staged view: casts,
`raise_error` for freeze, filters for discard_row, NULLs for discard_value, variant columns.
Pure: no Spark, no dbt.
"""

from __future__ import annotations

import re
from dataclasses import replace

from dbt.adapters.spark_contracts.core.contracts.checks import ColumnRules
from dbt.adapters.spark_contracts.core.contracts.contract import (
    ContractMode,
    SchemaContract,
    for_new_table,
)
from dbt.adapters.spark_contracts.core.contracts.decision import (
    CREATE,
    FAIL,
    LOAD,
    NATIVE_VARIANT_SUFFIX,
    SKIP,
    VARIANT,
    VARIANT_INFIX,
    WIDEN,
    AddedColumn,
    ContractDecision,
    ContractViolation,
    Declared,
    ValueCheck,
    _Key,
    _key,
)
from dbt.adapters.spark_contracts.core.evolution.capabilities import (
    FormatCapabilities,
    capabilities_for,
)
from dbt.adapters.spark_contracts.core.schema.diff import (
    ColumnAdded,
    ColumnRemoved,
    FieldAdded,
    FieldRemoved,
    SchemaDiff,
    TypeChanged,
    TypeNarrowed,
    TypeWidened,
    diff_schemas,
)
from dbt.adapters.spark_contracts.core.schema.merge import MergeRules, Order, merge_structs
from dbt.adapters.spark_contracts.core.schema.types import (
    Field,
    Primitive,
    SparkType,
    Struct,
    as_nullable,
    is_nested,
    is_widening,
    type_kind,
)


def safe_cast(compiled: SparkType, deployed: SparkType) -> bool:
    """Every compiled value fits the deployed type (§3's safe widening): never a violation."""
    return compiled == deployed or is_widening(compiled, deployed) or compiled == Primitive("void")


def type_tag(t: SparkType) -> str:
    """Identifier-friendly simple name of a type: `string`, `bigint`, `decimal_12_2`, `struct`."""
    if is_nested(t):
        return type_kind(t)
    return re.sub(r"[^a-z0-9]+", "_", t.simple_string().lower()).strip("_")


VARIANT_TYPE = Primitive("variant")


def variant_name(column: str, compiled_type: SparkType, native: bool = False) -> str:
    """dlt's variant column: `score__v_string` for string values of the column `score`; with
    `variant_columns: native`, `score__v` (of type VARIANT) for values of any type."""
    if native:
        return f"{column}{NATIVE_VARIANT_SUFFIX}"
    return f"{column}{VARIANT_INFIX}{type_tag(compiled_type)}"


def is_native_variant(field: Field, columns: set[str]) -> bool:
    """`field` is the native variant column `<column>__v` of one of `columns` (lower-cased)."""
    name = field.name.lower()
    return (
        field.type == VARIANT_TYPE
        and name.endswith(NATIVE_VARIANT_SUFFIX)
        and name[: -len(NATIVE_VARIANT_SUFFIX)] in columns
    )


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
                checks.append(_decide_value(change, contract, caps, compiled))
    action = FAIL if violations else LOAD
    accepted = {_key(n.path) for n in new_columns if n.mode is ContractMode.EVOLVE}
    widened = {_key(c.path) for c in checks if c.handling == WIDEN}
    target = merge_structs(deployed, compiled, _accepted(accepted, widened))
    target = _with_variants(target, deployed, compiled, checks, contract.native_variants)
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
    contract: SchemaContract,
    caps: FormatCapabilities,
    compiled: Struct,
) -> ValueCheck:
    path, old, new, mode = change.path, change.deployed, change.compiled, contract.data_type
    if mode is not ContractMode.EVOLVE:
        return ValueCheck(path, old, new, mode.value)
    if caps.can_widen(old, new, nested=len(path) > 1):
        return ValueCheck(path, old, new, WIDEN)
    column = compiled.field(path[0])
    assert column is not None, f"compiled schema lacks {path[0]}"
    name = variant_name(path[0], column.type, contract.native_variants)
    return ValueCheck(path, old, new, VARIANT, name)


def _accepted(add: set[_Key], widen: set[_Key]) -> MergeRules:
    """The deployed schema after the accepted changes (compiled struct order, as the planner
    sees): the added fields in `add`, the widened leaves in `widen`, safe map key casts."""
    return MergeRules(
        top=Order.NEW,
        nested=Order.NEW,
        leaf=lambda path, old, new: new if path in widen else old,
        map_key=lambda old, new: old if safe_cast(new, old) else new,  # else the planner decides
        adds=lambda path: path in add,
    )


def _with_variants(
    target: Struct, deployed: Struct, compiled: Struct, checks: list[ValueCheck], native: bool
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
        fields.append(existing or Field(name, VARIANT_TYPE if native else as_nullable(column.type)))
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
        and (
            (VARIANT_INFIX in f.name and f.name.lower().rsplit(VARIANT_INFIX, 1)[0] in columns)
            or is_native_variant(f, columns)
        )
    ]
