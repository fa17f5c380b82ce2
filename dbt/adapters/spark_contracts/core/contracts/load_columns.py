"""One written column of a contract's load (core/contracts/load_select.py assembles the SELECT):
the model's value coerced into the deployed type, the declared rules and the data tests' value
nulls applied, a value that does not coerce frozen, discarded or kept in a variant column.
Besides the SELECT's item, each column leaves the value as the load writes it before the gates
(no freeze check inside): the value the model's data tests read. Pure: rendering only."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field

from dbt.adapters.spark_contracts.core.contracts.checked_cast import (
    checked_coerce,
    try_cast_sql,
)
from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode
from dbt.adapters.spark_contracts.core.contracts.decision import (
    VARIANT,
    WIDEN,
    ContractDecision,
    ValueCheck,
    _key,
)
from dbt.adapters.spark_contracts.core.contracts.native_variant import native_variant_value
from dbt.adapters.spark_contracts.core.schema.coerce import Built
from dbt.adapters.spark_contracts.core.schema.types import (
    Field,
    Primitive,
    quote_identifier,
    sql_string,
)

COERCED_PREFIX = "__dbt_coerced_"
COERCE_REASON = "values do not coerce into the deployed column's type"


@dataclass
class LoadParts:
    """What the columns of one load add up to, collected column by column."""

    items: list[str]
    columns: list[str]
    row_filters: list[tuple[str, str]]  # (reason, predicate): drop the row
    value_drops: list[str]  # predicates: a value discarded
    frozen: list[tuple[str, str, str]]  # (column, predicate, reason): freeze check
    coerced: list[tuple[str, str]] = dataclass_field(default_factory=list)  # (alias, expr)
    taken: frozenset[str] = frozenset()  # the model's column names, lower-cased
    hoisting: bool = True
    # (column, value): each written column as the load writes it, before the data tests' gates
    # null a value, without the freeze checks (which raise): what the gates read
    written: list[tuple[str, str]] = dataclass_field(default_factory=list)
    # lower-cased column -> the SQL of each gate that nulls its value (`data_tests: discard_value`)
    gate_nulls: dict[str, tuple[str, ...]] = dataclass_field(default_factory=dict)

    def hoist(self, built: Built, expr: str) -> Built:
        """`expr` (a cast of a top-level column) computed once, as a column of the source,
        where `built` uses it more than once."""
        uses = built.value.count(expr) + sum(p.count(expr) for p in built.bad)
        if not self.hoisting or uses < 2:
            return built
        used = self.taken | {a.lower() for a, _ in self.coerced}
        n = len(self.coerced)
        while f"{COERCED_PREFIX}{n}" in used:  # a model column of that name keeps it
            n += 1
        alias = f"{COERCED_PREFIX}{n}"
        self.coerced.append((alias, expr))
        ref = quote_identifier(alias)
        return Built(
            built.value.replace(expr, ref),
            tuple(p.replace(expr, ref) for p in built.bad),
            built.new,
        )


def _item(value: str, name: str) -> str:
    column = quote_identifier(name)
    return column if value == column else f"{value} AS {column}"


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
    load: LoadParts, decision: ContractDecision, field: Field, ref: str, checked: str, value: str
) -> tuple[str, str]:
    """The declared rules of `field` on its coerced value `checked`, under the data_type mode:
    the value written, and the same without a freeze check."""
    rules = decision.rules_of(field.name)
    predicate = rules.violated(checked) if rules is not None else None
    if rules is None or predicate is None:
        return value, value
    mode = decision.contract.data_type
    broken = f"breaks {rules.describe()}"
    if mode is ContractMode.FREEZE:
        load.frozen.append(
            (field.name, predicate, f"values break the contract: {rules.describe()}")
        )
        shown = f"coalesce(cast({ref} AS STRING), 'NULL')"
        return _freeze(value, predicate, field.name, "", shown, f" {broken}"), value
    if mode is ContractMode.DISCARD_VALUE and rules.nulling_repairs:
        load.value_drops.append(predicate)
        nulled = f"CASE WHEN {predicate} THEN NULL ELSE {value} END"
        return nulled, nulled
    # discard_row; or discard_value on a required field, where NULL is no valid value either
    load.row_filters.append((f"data_type {mode.value}: `{field.name}` {broken}", predicate))
    return value, value


def render_column(
    load: LoadParts, decision: ContractDecision, field: Field, source: Field | None
) -> None:
    """The deployed column `field` filled from the model's column `source` (None: a variant
    column of an earlier run, loaded as NULL)."""
    load.columns.append(field.name)
    if source is None:
        null = f"CAST(NULL AS {field.type.to_sql()})"
        load.items.append(f"{null} AS {quote_identifier(field.name)}")
        load.written.append((field.name, null))
        return
    ref = quote_identifier(source.name)
    built = checked_coerce(ref, source.type, field.type)
    if isinstance(source.type, Primitive) and isinstance(field.type, Primitive):
        built = load.hoist(built, try_cast_sql(ref, source.type, field.type))
    columns_mode = decision.contract.columns
    value, plain = _apply_rules(load, decision, field, ref, built.value, built.value)
    load.written.append((field.name, plain))
    value = _null_failing_values(load, field.name, value)
    if built.new:
        what = f"new struct field in `{field.name}`"
        discard(load, "columns", columns_mode, what, " OR ".join(built.new))
    if built.bad:
        bad = " OR ".join(built.bad)
        check = _value_check(decision, field.name)
        if check.handling == ContractMode.FREEZE.value:
            load.frozen.append((field.name, bad, COERCE_REASON))
            value = _freeze_coercion(value, ref, bad, check)
        elif check.handling == VARIANT and check.variant_column:
            load.items.append(_item(value, field.name))
            kept = ref
            if decision.contract.native_variants:
                kept = native_variant_value(decision, ref, source)
            load.items.append(
                f"CASE WHEN {bad} THEN {kept} END AS {quote_identifier(check.variant_column)}"
            )
            load.columns.append(check.variant_column)
            return
        else:
            what = f"`{field.name}` value does not coerce into {field.type.to_sql()}"
            discard(load, "data_type", ContractMode(check.handling), what, bad)
    load.items.append(_item(value, field.name))


def _value_check(decision: ContractDecision, column: str) -> ValueCheck:
    """The per-value handling of a column (widened leaves need none)."""
    return next(
        c
        for c in decision.value_checks
        if _key(c.path)[0] == column.lower() and c.handling != WIDEN
    )


def _null_failing_values(load: LoadParts, column: str, value: str) -> str:
    """`data_tests: discard_value`: the value a gating test fails loaded as NULL."""
    nulls = load.gate_nulls.get(column.lower(), ())
    if not nulls:
        return value
    load.value_drops.extend(nulls)
    return f"CASE WHEN {' OR '.join(nulls)} THEN NULL ELSE {value} END"


def discard(load: LoadParts, entity: str, mode: ContractMode, what: str, predicate: str) -> None:
    if mode is ContractMode.DISCARD_ROW:
        load.row_filters.append((f"{entity} discard_row: {what}", predicate))
    else:
        load.value_drops.append(predicate)
