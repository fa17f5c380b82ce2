"""What the model's data tests read when they gate its load (`schema_contract: {data_tests:
...}`, issue 42): the values the load writes, not the model's output as it is. A value that
does not coerce, or that `data_type: discard_value` or a rule nulls, is NULL there, as it is in
the table dbt's test reads after the load.

A gate's predicate is SQL over the model's column names (a test's `where` and a model-level
expression are the user's own SQL), so it is evaluated in a scope where each name means the
written value: a projection of the written values, the model's row carried beside them in one
struct, and above it the row again with each gate as a boolean column. Every reader of a gate
(the row filter, the value nulls, the counts, the quarantine's reasons, the freeze samples)
reads that column: each predicate is evaluated once a row. Pure: rendering only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dbt.adapters.spark_contracts.core.contracts.data_tests import Gates
from dbt.adapters.spark_contracts.core.schema.types import quote_identifier

GATE_PREFIX = "__dbt_gate_"
ROW_PREFIX = "__dbt_row_"


def fresh(prefix: str, used: set[str]) -> str:
    """`prefix` numbered past every name in `used` (lower-cased), and taken."""
    n = 0
    while f"{prefix}{n}" in used:
        n += 1
    used.add(f"{prefix}{n}")
    return f"{prefix}{n}"


@dataclass(frozen=True)
class GateScope:
    """The gates of one load as columns over its source.

    `written`: (column, value) the written values, before any gate nulls one; `read`: the
    names a source row has besides them (the model's columns the load does not write), which
    the scope passes through as they are; `columns`: (alias, predicate) one boolean column per
    gate; `row`: the struct column the model's row rides in."""

    written: tuple[tuple[str, str], ...]
    columns: tuple[tuple[str, str], ...]
    row: str
    passed: tuple[str, ...] = ()

    def over(self, relation: str) -> str:
        """`relation`'s rows, every column as it is, plus one boolean column per gate computed
        over the written values."""
        gates = ", ".join(f"{p} AS {quote_identifier(a)}" for a, p in self.columns)
        if all(v == quote_identifier(c) for c, v in self.written):  # nothing changes a value
            return f"SELECT *, {gates} FROM {relation}"
        row = quote_identifier(self.row)
        scope = [f"{v} AS {quote_identifier(c)}" for c, v in self.written]
        scope += [quote_identifier(c) for c in self.passed]
        return (
            f"SELECT {row}.*, {gates} FROM (SELECT {', '.join(scope)}, struct(*) AS {row} "
            f"FROM {relation}) AS {quote_identifier(self.row + '_scope')}"
        )


def gate_columns(
    gates: Gates, used: set[str]
) -> tuple[tuple[tuple[str, str], ...], Mapping[str, str]]:
    """(alias, predicate): one column per gate, named apart from `used` (the source's names,
    lower-cased, extended by these); and each gate's SQL by its test: its quoted column."""
    columns = tuple((fresh(GATE_PREFIX, used), g.predicate) for g in gates.gates)
    refs = {g.test: quote_identifier(a) for g, (a, _) in zip(gates.gates, columns, strict=True)}
    return columns, refs


def gate_scope(
    columns: tuple[tuple[str, str], ...],
    written: Iterable[tuple[str, str]],
    model: Iterable[str],
    used: set[str],
) -> GateScope | None:
    """The scope the gate `columns` are computed in (None where there are none). `written`:
    (column, value) the load's written values; `model`: the model's column names."""
    if not columns:
        return None
    written = tuple(written)
    names = {c.lower() for c, _ in written}
    passed = tuple(c for c in model if c.lower() not in names)
    return GateScope(written, columns, fresh(ROW_PREFIX, used), passed)
