"""A contract's load as one SELECT (SPEC §3): the model's output coerced into the deployed
types, discarded rows and values filtered or nulled, variant columns filled, freeze checks and
the quarantine's rows, all from one reading of the source. Pure: rendering, no execution."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Iterable

from dbt.adapters.spark_contracts.core.contracts.checked_cast import (
    checked_coerce,
    try_cast_sql,
)
from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode
from dbt.adapters.spark_contracts.core.contracts.decision import (
    CREATE,
    LOAD,
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
    Struct,
    quote_identifier,
    sql_string,
)
from dbt.adapters.spark_contracts.core.settings.config import ConfigError

# the quarantine's own columns
REASON_COLUMN, RUN_ID_COLUMN = "_contract_reason", "_dbt_run_id"
# a microbatch batch's discarded rows also carry its commit tag: the batches of one invocation
# share `_dbt_run_id`, and a dead batch's pending table is settled by both (core/recovery/pending.py)
BATCH_COLUMN = "_dbt_batch_tag"
# a pending table's discarded rows (its kept rows have no reason)
PENDING_DISCARDED = f"`{REASON_COLUMN}` IS NOT NULL"
PENDING_KEPT = f"`{REASON_COLUMN}` IS NULL"


def check_quarantine_columns(relation: str, compiled: Struct, batch: bool = False) -> None:
    """A model whose contract quarantines may not output the quarantine's own columns: its
    rows would carry two of one name there (Spark compares names case-insensitively).
    `batch`: a microbatch batch's, whose rows also carry `BATCH_COLUMN`."""
    own = (REASON_COLUMN, RUN_ID_COLUMN) + ((BATCH_COLUMN,) if batch else ())
    clash = [f.name for f in compiled.fields if f.name.lower() in own]
    if clash:
        named = ", ".join(f"`{name}`" for name in clash)
        raise ConfigError(
            f"{relation}: the model outputs {named}, which its quarantine adds to every "
            f"discarded row itself ({', '.join(f'`{c}`' for c in own)}); rename "
            "the column in the model, or set schema_contract quarantine: false. Nothing was "
            "changed."
        )


@dataclass(frozen=True)
class LoadSql:
    """The load query and its companions; `columns` are the written columns, in order.

    `violation_sample_sql` (after a freeze failure only): `column_name`, `value` rows, up to 5
    per column. `discard_metrics`: (name, aggregate) pairs over the source, `rows_discarded` and
    `values_discarded`, observed in a pass that reads the source anyway where the connection can;
    `discard_count_sql` is the same aggregates as a query of their own where it cannot.
    `quarantine_select`: the discarded rows plus `_contract_reason` and `_dbt_run_id`, read
    from the run's stage (never collected: they go from the executors to storage).
    `pending_from(view)`: every row of the model's output with the same two columns, its
    `_contract_reason` NULL where the row is kept: a quarantining run's pending table, which the
    load and the quarantine both read (core/recovery/pending.py).
    """

    select: str
    columns: tuple[str, ...]
    violation_sample_sql: str | None = None
    discard_metrics: tuple[tuple[str, str], ...] = ()
    source: str = ""
    # `discard_metrics` over a source that knows its kept rows (a pending table), if it does
    counted: tuple[tuple[str, str], ...] = ()
    # the quarantine: a discarded row's columns plus its reasons, and what discards a row
    quarantine_row: str | None = None
    quarantine_where: str | None = None
    run_id: str = ""
    # (alias, expression): a coercion computed once per row, below every reader of its value
    coerced: tuple[tuple[str, str], ...] = ()
    # the SELECT is `source` as it is: every column, unchanged, in order, no row left out
    passes_through: bool = False
    # a microbatch batch's commit tag: its pending rows carry it in `BATCH_COLUMN`
    batch_tag: str = ""

    def coerced_view(self, view: str) -> str:
        """The relation the model's output is read from: `view`, or the view over it that adds
        the coerced columns (`coerced_select`)."""
        return f"{view}__coerced" if self.coerced else view

    def coerced_select(self, view: str) -> str | None:
        """The model's view plus its coerced columns (the load, the discard predicates, the
        observed metrics and the quarantine read them instead of repeating the cast: Spark
        shares no expression between a filter, a projection and an observation)."""
        if not self.coerced:
            return None
        extra = ", ".join(f"{expr} AS {quote_identifier(alias)}" for alias, expr in self.coerced)
        return f"SELECT *, {extra} FROM {view}"

    def quarantine_from(self, source: str) -> str | None:
        """The discarded rows of `source` with `_contract_reason` and `_dbt_run_id`."""
        if self.quarantine_row is None:
            return None
        run_id = f"{sql_string(self.run_id)} AS {quote_identifier(RUN_ID_COLUMN)}"
        return f"SELECT {self.quarantine_row}, {run_id} FROM {source} WHERE {self.quarantine_where}"

    def pending_from(self, view: str) -> str | None:
        """Every row of `view` (the model's output) with `_contract_reason` (NULL: the row is
        kept) and `_dbt_run_id` (and a batch's `_dbt_batch_tag`): a quarantining run's pending
        table (`PENDING_DISCARDED` picks its discarded rows)."""
        if self.quarantine_row is None:
            return None
        run_id = f"{sql_string(self.run_id)} AS {quote_identifier(RUN_ID_COLUMN)}"
        if self.batch_tag:
            run_id += f", {sql_string(self.batch_tag)} AS {quote_identifier(BATCH_COLUMN)}"
        return f"SELECT {self.quarantine_row}, {run_id} FROM {view}"

    @property
    def discards_values(self) -> bool:
        """Some value is set to NULL rather than its row discarded (`discard_value`)."""
        return any(name == "values_discarded" and e != "0" for name, e in self.discard_metrics)

    @property
    def quarantine_select(self) -> str | None:
        return self.quarantine_from(self.source)

    @property
    def discard_count_sql(self) -> str | None:
        if not self.discard_metrics:
            return None
        metrics = self.counted or self.discard_metrics
        aggregates = ", ".join(f"{expr} AS {name}" for name, expr in metrics)
        return f"SELECT {aggregates} FROM {self.source}"


COERCED_PREFIX = "__dbt_coerced_"


@dataclass
class _Load:
    items: list[str]
    columns: list[str]
    row_filters: list[tuple[str, str]]  # (reason, predicate): drop the row
    value_drops: list[str]  # predicates: a value discarded
    frozen: list[tuple[str, str, str]]  # (column, predicate, reason): freeze check
    coerced: list[tuple[str, str]] = dataclass_field(default_factory=list)  # (alias, expr)
    taken: frozenset[str] = frozenset()  # the model's column names, lower-cased
    hoisting: bool = True

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
    built = checked_coerce(ref, source.type, field.type)
    if isinstance(source.type, Primitive) and isinstance(field.type, Primitive):
        built = load.hoist(built, try_cast_sql(ref, source.type, field.type))
    value, columns_mode = built.value, decision.contract.columns
    value = _apply_rules(load, decision, field, ref, built.value, value)
    value = _null_failing_values(load, decision, field.name, value)
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
            _discard(load, "data_type", ContractMode(check.handling), what, bad)
    load.items.append(_item(value, field.name))


def _value_check(decision: ContractDecision, column: str) -> ValueCheck:
    """The per-value handling of a column (widened leaves need none)."""
    return next(
        c
        for c in decision.value_checks
        if _key(c.path)[0] == column.lower() and c.handling != WIDEN
    )


def _null_failing_values(load: _Load, decision: ContractDecision, column: str, value: str) -> str:
    """`data_tests: discard_value`: the value a gating test fails loaded as NULL."""
    nulls = decision.gates.value_nulls(column)
    if not nulls:
        return value
    load.value_drops.extend(nulls)
    return f"CASE WHEN {' OR '.join(nulls)} THEN NULL ELSE {value} END"


def _discard(load: _Load, entity: str, mode: ContractMode, what: str, predicate: str) -> None:
    if mode is ContractMode.DISCARD_ROW:
        load.row_filters.append((f"{entity} discard_row: {what}", predicate))
    else:
        load.value_drops.append(predicate)


def render_load_select(
    decision: ContractDecision,
    source: str,
    deployed: Struct | None,
    compiled: Struct,
    run_id: str,
    hoist: bool = True,
    kept: str | None = None,
    batch_tag: str = "",
    guard: bool = False,
) -> LoadSql:
    """The one SELECT that loads `source` (a rendered relation or view) under the decision.

    `deployed` is the schema the decision was made against (its `target` already carries it).
    `hoist`: casts read more than once become columns of `coerced_select` (the caller reads
    `source` through that view); off where the SELECT must read `source` alone. `kept`: where
    `source` knows its kept rows already (a pending table: `PENDING_KEPT`), the load and the
    count pick them by it instead of evaluating every discard predicate again. `batch_tag`: a
    microbatch batch's commit tag, which its pending rows carry (`LoadSql.pending_from`).
    `guard`: a quarantining run's first pass (`first_pass_select`): instead of leaving a
    discarded row out, the SELECT fails its own job at the first one, so the write it feeds
    commits nothing and the run takes the pending path.
    """
    if decision.table_action not in (CREATE, LOAD) or decision.target is None:
        raise ValueError(f"nothing to load: the contract decided {decision.table_action!r}")
    taken = frozenset(f.name.lower() for f in compiled.fields)
    load = _Load([], [], [], [], [], hoisting=hoist, taken=taken)
    variants = {v.lower() for v in decision.variant_columns}
    for field in decision.target.fields:
        if field.name.lower() not in variants:
            _render_column(load, decision, field, compiled.field(field.name))
    for field in compiled.fields:
        if decision.target.field(field.name) is None:
            what = f"new column `{field.name}`"
            predicate = f"{quote_identifier(field.name)} IS NOT NULL"
            _discard(load, "columns", decision.contract.columns, what, predicate)
    load.row_filters.extend(decision.gates.row_filters)  # the model's data tests (issue 42)
    load.frozen.extend(decision.gates.frozen)
    select = f"SELECT {', '.join(load.items)} FROM {source}"
    if load.row_filters and guard:
        select += " WHERE " + first_pass_guard(p for _, p in load.row_filters)
    elif load.row_filters:
        select += " WHERE " + (kept or " AND ".join(f"NOT ({p})" for _, p in load.row_filters))
    return LoadSql(
        select,
        tuple(load.columns),
        _violation_samples(load, source),
        _discard_metrics(load),
        source,
        _discard_metrics(load, kept) if kept is not None else (),
        *_quarantine(load, decision, compiled),
        run_id,
        tuple(load.coerced),
        not (load.row_filters or load.coerced)
        and load.items == [quote_identifier(f.name) for f in compiled.fields],
        batch_tag,
    )


# what the first pass's guard raises (its text is only shown: the run never reads it back)
FIRST_PASS_MESSAGE = (
    "dbt-spark-contracts: a row this run's contract discards; the first pass writes nothing "
    "and the run takes the quarantine's pending path"
)


def first_pass_guard(predicates: Iterable[str]) -> str:
    """A row filter that keeps every row no predicate discards, as the pending path keeps it (a
    NULL predicate discards nothing), and fails the query at the first row one discards."""
    discards = " OR ".join(f"({p})" for p in predicates)
    return f"CASE WHEN {discards} THEN raise_error({sql_string(FIRST_PASS_MESSAGE)}) ELSE TRUE END"


def _violation_samples(load: _Load, source: str) -> str | None:
    # a check of no one column (a data test's expression) samples its failing rows whole
    parts = [
        f"SELECT {sql_string(column)} AS column_name, value, {sql_string(reason)} AS reason "
        f"FROM (SELECT DISTINCT "
        f"{f'CAST({quote_identifier(column)} AS STRING)' if column else 'to_json(struct(*))'}"
        f" AS value FROM {source} WHERE {predicate} LIMIT 5) AS s{i}"
        for i, (column, predicate, reason) in enumerate(load.frozen)
    ]
    return " UNION ALL ".join(parts) or None


def _discard_metrics(load: _Load, kept: str | None = None) -> tuple[tuple[str, str], ...]:
    """(name, aggregate) pairs: the rows and the values a load discards. `kept`: where the
    source knows its kept rows (a pending table's reason), a row is picked by it and the row
    predicates are not evaluated again."""
    if not load.row_filters and not load.value_drops:
        return ()
    dropped = " OR ".join(f"({p})" for _, p in load.row_filters)
    if dropped and kept is not None:
        dropped, keep = f"NOT ({kept})", f"{kept} AND "
    else:
        keep = f"NOT ({dropped}) AND " if dropped else ""
    rows = f"count_if({dropped})" if dropped else "0"
    values = " + ".join(f"count_if({keep}({p}))" for p in load.value_drops) or "0"
    return (("rows_discarded", rows), ("values_discarded", values))


def _quarantine(
    load: _Load, decision: ContractDecision, compiled: Struct
) -> tuple[str | None, str | None]:
    """A discarded row's columns plus its reasons, and the predicate that discards a row."""
    if not decision.contract.quarantine or not load.row_filters:
        return None, None
    reasons = [f"CASE WHEN {p} THEN {sql_string(r)} END" for r, p in load.row_filters]
    columns = ", ".join(quote_identifier(f.name) for f in compiled.fields)
    where = " OR ".join(f"({p})" for _, p in load.row_filters)
    # each predicate evaluated once a row: concat_ws skips the NULLs of those that hold not
    reason = (
        reasons[0] if len(reasons) == 1 else f"nullif(concat_ws('; ', {', '.join(reasons)}), '')"
    )
    return f"{columns}, {reason} AS {quote_identifier(REASON_COLUMN)}", where
