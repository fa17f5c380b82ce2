"""A contract's load as one SELECT (SPEC §3): the model's output coerced into the deployed
types, discarded rows and values filtered or nulled, variant columns filled, freeze checks and
the quarantine's rows, all from one reading of the source. Pure: rendering, no execution."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterable

from dbt.adapters.spark_contracts.core.contracts.data_tests import Gate, GateAction, GateCount
from dbt.adapters.spark_contracts.core.contracts.decision import CREATE, LOAD, ContractDecision
from dbt.adapters.spark_contracts.core.contracts.gate_scope import (
    GateScope,
    gate_columns,
    gate_scope,
)
from dbt.adapters.spark_contracts.core.contracts.load_columns import (
    LoadParts,
    discard,
    render_column,
)
from dbt.adapters.spark_contracts.core.schema.types import Struct, quote_identifier, sql_string
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
    per column. `discard_metrics`: (name, aggregate) pairs over the source, `rows_discarded`,
    `values_discarded` and each discarding data test's rows (`gate_counts`), observed in a pass that reads the source anyway where the connection can;
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
    # the model's data tests as columns over the written values (`coerced_select` adds them)
    gates: GateScope | None = None
    # (metric, gate): the `discard_metrics` that count each gate's rows
    gate_metrics: tuple[tuple[str, Gate], ...] = ()

    def gate_counts(self, counts: Mapping[str, Any]) -> tuple[GateCount, ...]:
        """Each gate's rows (a freeze gate's: its failing rows), from the counts of
        `discard_metrics` (or `counted`)."""
        return tuple(
            GateCount(g.test, g.reason, g.action, int(counts.get(name) or 0))
            for name, g in self.gate_metrics
            if name in counts
        )

    def clean_gate_counts(self) -> tuple[GateCount, ...]:
        """Each gate's rows in a load that discarded nothing (a first pass that went through):
        none, per gate, as an observed clean load reports them."""
        return self.gate_counts({name: 0 for name, _ in self.gate_metrics})

    def coerced_view(self, view: str) -> str:
        """The relation the model's output is read from: `view`, or the view over it that adds
        the coerced columns and the gates' (`coerced_select`)."""
        return f"{view}__coerced" if self.coerced or self.gates else view

    def coerced_select(self, view: str) -> str | None:
        """The model's view plus its coerced columns and one boolean column per gate (the load,
        the discard predicates, the observed metrics and the quarantine read them instead of
        repeating the cast or the test: Spark shares no expression between a filter, a
        projection and an observation)."""
        if not (self.coerced or self.gates):
            return None
        if self.coerced:
            extra = ", ".join(
                f"{expr} AS {quote_identifier(alias)}" for alias, expr in self.coerced
            )
            hoisted = f"SELECT *, {extra} FROM {view}"
            if self.gates is None:
                return hoisted
            view = f"({hoisted}) AS __dbt_hoisted"
        assert self.gates is not None
        return self.gates.over(view)

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
    `source` through that view); off where the SELECT must read `source` alone (the gates'
    columns are then computed inline, `GateScope.over`). `kept`: where
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
    load = LoadParts([], [], [], [], [], hoisting=hoist, taken=taken)
    # the model's data tests (issue 42), each read from a column of its own
    gates, used = decision.gates, set(taken)
    columns, refs = gate_columns(gates, used)
    variants = {v.lower() for v in decision.variant_columns}
    load.gate_nulls = {f.name.lower(): gates.value_nulls(f.name, refs) for f in compiled.fields}
    for field in decision.target.fields:
        if field.name.lower() not in variants:
            render_column(load, decision, field, compiled.field(field.name))
    for field in compiled.fields:
        if decision.target.field(field.name) is None:
            what = f"new column `{field.name}`"
            predicate = f"{quote_identifier(field.name)} IS NOT NULL"
            discard(load, "columns", decision.contract.columns, what, predicate)
    load.row_filters.extend(gates.row_filters(refs))
    # every gate counted, a freeze gate's failing rows too (in the same pass: a freeze run
    # stages its output, and its count is observed while staging, or counted over the stage)
    counted = tuple((alias, g) for g, (alias, _) in zip(gates.gates, columns, strict=True))
    load.frozen.extend(gates.frozen(refs))
    names = [f.name for f in compiled.fields]
    scope = gate_scope(columns, load.written, names, used)
    if scope is not None and not hoist:  # `source` is read alone: the gates' columns inline
        source = f"({scope.over(source)}) AS __dbt_gated"
    select = f"SELECT {', '.join(load.items)} FROM {source}"
    if load.row_filters and guard:
        select += " WHERE " + first_pass_guard(p for _, p in load.row_filters)
    elif load.row_filters:
        select += " WHERE " + (kept or " AND ".join(f"NOT ({p})" for _, p in load.row_filters))
    return LoadSql(
        select,
        tuple(load.columns),
        _violation_samples(load, source, names),
        _discard_metrics(load, counted),
        source,
        _discard_metrics(load, counted, kept) if kept is not None else (),
        *_quarantine(load, decision, compiled),
        run_id,
        tuple(load.coerced),
        not (load.row_filters or load.coerced or scope)
        and load.items == [quote_identifier(name) for name in names],
        batch_tag,
        scope,
        counted,
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


def _violation_samples(load: LoadParts, source: str, model: list[str]) -> str | None:
    # a check of no one column (a data test's expression) samples its failing rows whole
    row = ", ".join(quote_identifier(c) for c in model)
    parts = [
        f"SELECT {sql_string(column)} AS column_name, value, {sql_string(reason)} AS reason "
        f"FROM (SELECT DISTINCT "
        f"{f'CAST({quote_identifier(column)} AS STRING)' if column else f'to_json(struct({row}))'}"
        f" AS value FROM {source} WHERE {predicate} LIMIT 5) AS s{i}"
        for i, (column, predicate, reason) in enumerate(load.frozen)
    ]
    return " UNION ALL ".join(parts) or None


def _discard_metrics(
    load: LoadParts, gates: tuple[tuple[str, Gate], ...], kept: str | None = None
) -> tuple[tuple[str, str], ...]:
    """(name, aggregate) pairs: the rows and the values a load discards, and the rows of each
    gate (`gates`: its metric's name and the gate; the gate's column is named the same): a
    discarding gate's rows, a freeze gate's failing rows. `kept`: where the source knows its
    kept rows (a pending table's reason), a row is picked by it and the row predicates are not
    evaluated again."""
    if not load.row_filters and not load.value_drops and not gates:
        return ()
    dropped = " OR ".join(f"({p})" for _, p in load.row_filters)
    if dropped and kept is not None:
        dropped, keep = f"NOT ({kept})", f"{kept} AND "
    else:
        keep = f"NOT ({dropped}) AND " if dropped else ""
    rows = f"count_if({dropped})" if dropped else "0"
    values = " + ".join(f"count_if({keep}({p}))" for p in load.value_drops) or "0"
    per_gate = tuple(
        (name, f"count_if({quote_identifier(name)})")
        if g.action is not GateAction.VALUE
        else (name, f"count_if({keep}{quote_identifier(name)})")
        for name, g in gates
    )
    return (("rows_discarded", rows), ("values_discarded", values)) + per_gate


def _quarantine(
    load: LoadParts, decision: ContractDecision, compiled: Struct
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
