"""A model's own dbt data tests as gates on its load (`schema_contract: {data_tests: <mode>}`,
issue 42). Pure: the manifest's test nodes in, Spark SQL row predicates out.

A row-level test becomes a predicate that holds exactly for a row the test would return (its
`where` config narrows it; NULL-safe, so `NOT` keeps every other row): `not_null`,
`accepted_values` (with `quote`), and dbt_utils' `expression_is_true`, `accepted_range` and
`not_empty_string`. The set tests read more than the row: `unique` a window over the load's rows
(and, where the load adds rows to a table, the table's keys), `relationships` the parent's keys;
both as subqueries Spark joins in the same pass. Every other test of the model is listed as
checked after the load, never silently skipped. The load's SELECT (core/contracts/load_select.py)
filters, nulls or freezes by the predicates, under the contract's `data_tests` mode.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode
from dbt.adapters.spark_contracts.core.contracts.set_tests import (
    GatedLoad,
    bare_name,
    parent_relation,
    relationships_failing,
    set_test_why_not,
    unique_failing,
)
from dbt.adapters.spark_contracts.core.schema.types import Struct, quote_identifier, sql_string

NOT_NULL, ACCEPTED_VALUES = "not_null", "accepted_values"
UTILS = "dbt_utils"
EXPRESSION_IS_TRUE, ACCEPTED_RANGE = "expression_is_true", "accepted_range"
NOT_EMPTY_STRING = "not_empty_string"
# (namespace, name): the tests that gate. dbt's own tests have no namespace.
UNIQUE, RELATIONSHIPS = "unique", "relationships"
GATEABLE = (
    (None, NOT_NULL),
    (None, ACCEPTED_VALUES),
    (UTILS, EXPRESSION_IS_TRUE),
    (UTILS, ACCEPTED_RANGE),
    (UTILS, NOT_EMPTY_STRING),
    (None, UNIQUE),  # where the load's rows and the table's are known (`GatedLoad`)
    (None, RELATIONSHIPS),  # where its parent is a relation of the project
)
# the tests a NULL passes: under discard_value their failing value can be set to NULL
_NULL_PASSES = (ACCEPTED_VALUES, ACCEPTED_RANGE, NOT_EMPTY_STRING, UNIQUE, RELATIONSHIPS)
GATE_META = "gate"  # `config: {meta: {gate: false}}` opts a test out
_JINJA = re.compile(r"\{\{|\{%")
_IDENTIFIER = re.compile(r"^[`\"]?([A-Za-z_][A-Za-z0-9_]*)[`\"]?$")


@dataclass(frozen=True)
class DataTest:
    """One data test of a model, as dbt's manifest holds it. `name` and `namespace` are its
    `test_metadata` (empty for a singular test); `kwargs` its arguments (without `model`)."""

    unique_id: str
    name: str = ""
    namespace: str | None = None
    kwargs: tuple[tuple[str, Any], ...] = ()
    where: str | None = None
    gate: bool = True  # False: `meta: {gate: false}`
    # `relationships`: the relation its `to` names (the parent node's `relation_name`), None
    # where the manifest does not resolve it to a relation of the project
    parent: str | None = None

    def arg(self, key: str, default: Any = None) -> Any:
        return next((v for k, v in self.kwargs if k == key), default)

    @property
    def column(self) -> str | None:
        value = self.arg("column_name")
        return None if value is None else str(value)

    @property
    def label(self) -> str:
        """How messages and the quarantine's `_contract_reason` name the test:
        `not_null(name)`, `dbt_utils.accepted_range(amount)`."""
        prefix = f"{self.namespace}." if self.namespace else ""
        if not self.name:
            return self.unique_id  # a singular test
        subject = self.column or str(self.arg("expression", "") or "").strip()
        return f"{prefix}{self.name}({subject})"


@dataclass(frozen=True)
class AttachedTests:
    """The data tests of one model, read from the manifest by the adapter and handed to the
    build's plan (`plan_model`) as they are; `unique_key` is the model's (a merge on it updates
    the keys the table holds: `gated_load`)."""

    model: str
    tests: tuple[DataTest, ...] = ()
    unique_key: tuple[str, ...] = ()


def _meta_gate(node: Mapping[str, Any]) -> bool:
    config = node.get("config") or {}
    for meta in (config.get("meta") or {}, node.get("meta") or {}):
        if GATE_META in meta:
            return meta[GATE_META] is not False
    return True


def _data_test(
    node: Mapping[str, Any], model: str, nodes: Mapping[str, Mapping[str, Any]]
) -> DataTest:
    metadata = node.get("test_metadata") or {}
    kwargs = metadata.get("kwargs") or {}
    where = (node.get("config") or {}).get("where")
    name = str(metadata.get("name") or "")
    namespace = metadata.get("namespace") or None
    related = name == RELATIONSHIPS and namespace is None
    return DataTest(
        unique_id=str(node.get("unique_id")),
        name=name,
        namespace=namespace,
        kwargs=tuple(sorted((str(k), v) for k, v in kwargs.items() if k != "model")),
        where=None if where is None else str(where),
        gate=_meta_gate(node),
        parent=parent_relation(node, kwargs.get("to"), model, nodes) if related else None,
    )


def attached_tests(
    model: str, nodes: Mapping[str, Mapping[str, Any]], unique_key: Any = None
) -> AttachedTests:
    """The tests of `model` among the manifest's `nodes` (dbt's flat graph, its sources
    included: a `relationships` parent is found there): the generic tests attached to it, and
    the singular tests that read it (no attached node), by unique id. `unique_key`: the model's
    config (a string or a list)."""
    found = []
    for node in nodes.values():
        if node.get("resource_type") != "test":
            continue
        attached = node.get("attached_node")
        reads = model in ((node.get("depends_on") or {}).get("nodes") or ())
        if attached == model or (not attached and reads):
            found.append(_data_test(node, model, nodes))
    keys = (unique_key,) if isinstance(unique_key, str) else tuple(unique_key or ())
    return AttachedTests(
        model, tuple(sorted(found, key=lambda t: t.unique_id)), tuple(str(k) for k in keys)
    )


class GateAction(Enum):
    """What a failing row meets in the load."""

    ROW = "discard_row"  # the row is dropped (quarantined with the test's name)
    VALUE = "discard_value"  # the column's value is set to NULL
    FREEZE = "freeze"  # nothing is loaded


@dataclass(frozen=True)
class Gate:
    """One test as a predicate over the model's output that holds exactly for a failing row."""

    test: str  # the test's unique id
    reason: str  # `not_null(name)`: the quarantine's `_contract_reason`
    column: str | None  # the output column it checks (None: a model-level expression)
    predicate: str
    action: GateAction


@dataclass(frozen=True)
class GateCount:
    """The rows one gate turned away in a run: `discard_row`, the rows it fails (a row two
    gates fail counts in both; `rows_discarded` counts it once); `discard_value`, the loaded
    rows whose value it set to NULL."""

    test: str
    reason: str
    action: GateAction
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "reason": self.reason,
            "action": self.action.value,
            "rows": self.rows,
        }


@dataclass(frozen=True)
class AfterLoad:
    """A test of the model that does not gate: dbt runs it after the load, as ever."""

    test: str
    why: str


@dataclass(frozen=True)
class Gates:
    """The gates of one run, under the contract's `data_tests` mode, and the tests left to run
    after the load. Empty under `evolve` (dbt's behaviour)."""

    mode: ContractMode = ContractMode.EVOLVE
    gates: tuple[Gate, ...] = ()
    after_load: tuple[AfterLoad, ...] = ()

    def _acting(self, action: GateAction) -> tuple[Gate, ...]:
        return tuple(g for g in self.gates if g.action is action)

    @staticmethod
    def _sql(gate: Gate, refs: Mapping[str, str] | None) -> str:
        return gate.predicate if refs is None else refs[gate.test]

    def row_filters(self, refs: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
        """(reason, predicate): the rows the load drops. `refs`: each gate's SQL by test, where
        the load reads it from a column of its own (`predicate` evaluated once)."""
        return tuple((g.reason, self._sql(g, refs)) for g in self._acting(GateAction.ROW))

    def value_nulls(self, column: str, refs: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """The predicates under which `column`'s value is loaded as NULL."""
        return tuple(
            self._sql(g, refs)
            for g in self._acting(GateAction.VALUE)
            if g.column is not None and g.column.lower() == column.lower()
        )

    def frozen(self, refs: Mapping[str, str] | None = None) -> tuple[tuple[str, str, str], ...]:
        """(column, predicate, reason) of every freeze gate; column "" for a model-level one."""
        return tuple(
            (g.column or "", self._sql(g, refs), g.reason) for g in self._acting(GateAction.FREEZE)
        )

    def by_reason(self, reason: str) -> Gate | None:
        return next((g for g in self.gates if g.reason == reason), None)

    def summary_lines(self) -> list[str]:
        lines = [f"  data_tests {g.reason}: {g.action.value}" for g in self.gates]
        lines += [
            f"  data_tests {a.test}: checked after the load ({a.why})" for a in self.after_load
        ]
        return lines

    def log_lines(self) -> list[str]:
        """What the run's log says of the model's tests: the gates, and each test checked
        after the load (the plan file lists both too)."""
        if self.mode is ContractMode.EVOLVE:
            return []
        lines = []
        if self.gates:
            named = ", ".join(f"{g.reason} ({g.action.value})" for g in self.gates)
            lines.append(f"data_tests {self.mode.value} gates the load: {named}")
        lines += [
            f"data test {a.test} is checked after the load ({a.why})" for a in self.after_load
        ]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "gates": [
                {"test": g.test, "reason": g.reason, "column": g.column, "action": g.action.value}
                for g in self.gates
            ],
            "checked_after_the_load": [{"test": a.test, "why": a.why} for a in self.after_load],
        }


def _values_list(test: DataTest) -> str | None:
    values = test.arg("values")
    if not isinstance(values, (list, tuple)) or not values:
        return None
    quote = test.arg("quote", True) is not False
    return ", ".join(sql_string(str(v)) if quote else str(v) for v in values)


def _failing(test: DataTest, column: str | None, load: GatedLoad) -> str | None:
    """The SQL that holds for a row the test returns (NULL where it does not), or None where
    its arguments make no predicate. `load`: what the set tests read besides the row."""
    if test.name == NOT_NULL:
        return f"{column} IS NULL"
    if test.name == ACCEPTED_VALUES:
        values = _values_list(test)
        return None if values is None else f"{column} NOT IN ({values})"
    if test.name == EXPRESSION_IS_TRUE:
        expression = str(test.arg("expression") or "").strip()
        if not expression:
            return None
        return f"NOT ({column} {expression})" if column else f"NOT ({expression})"
    if test.name == ACCEPTED_RANGE:
        equal = "=" if test.arg("inclusive", True) is not False else ""
        bounds = [
            f"NOT ({column} {op}{equal} {value})"
            for op, value in ((">", test.arg("min_value")), ("<", test.arg("max_value")))
            if value is not None
        ]
        return " OR ".join(bounds) or None
    if test.name == NOT_EMPTY_STRING:
        trimmed = test.arg("trim_whitespace", True) is not False
        return f"trim({column}) = ''" if trimmed else f"{column} = ''"
    if test.name == UNIQUE:
        return unique_failing(column or "", test.where, load)
    if test.name == RELATIONSHIPS:
        field = _IDENTIFIER.match(str(test.arg("field") or "").strip())
        if field is None or test.parent is None or column is None:
            return None
        return relationships_failing(column, quote_identifier(field.group(1)), test.parent)
    return None


def _output_column(test: DataTest, output: Struct) -> str | None:
    """The output column a column test names, as the model names it."""
    match = _IDENTIFIER.match((test.column or "").strip())
    field = output.field(match.group(1)) if match else None
    return field.name if field is not None else None


def _quoted(column: str | None) -> str | None:
    return None if column is None else quote_identifier(column)


def _why_not(test: DataTest, load: GatedLoad) -> str | None:
    """Why a test cannot gate, or None where it can (its column aside). `load`: what the set
    tests need to know of the load."""
    if not test.name:
        return "a singular test"
    if not test.gate:
        return "opted out: meta gate false"
    if (test.namespace, test.name) not in GATEABLE:
        return "a generic test the adapter does not gate"
    if test.namespace is None and test.name in (UNIQUE, RELATIONSHIPS):
        why = set_test_why_not(test.name == UNIQUE, test.parent, load)
        if why is not None:
            return why
    texts = [str(v) for _, v in test.kwargs] + [test.where or ""]
    if any(_JINJA.search(t) for t in texts):
        return "its arguments hold Jinja, rendered only when the test runs"
    return None


def _nulls_forbidden(tests: tuple[DataTest, ...]) -> frozenset[str]:
    """The columns some not_null test (gating or not) forbids NULL in, lower-cased."""
    return frozenset(
        bare_name(t.column or "").lower() for t in tests if t.name == NOT_NULL and t.column
    )


def plan_gates(
    tests: AttachedTests | None,
    mode: ContractMode,
    compiled: Struct,
    target: Struct | None,
    load: GatedLoad = GatedLoad(),
) -> Gates:
    """The model's tests as gates on its load under `mode` (the contract's `data_tests`).
    `compiled` is the model's output (the predicates read it), `target` the table it loads
    (NULL only where its column may hold NULL). `load`: what the set tests read besides the
    load's rows (`unique`: the table the load adds to; none where it writes the whole table)."""
    if mode is ContractMode.EVOLVE or tests is None:
        return Gates(mode)
    gates: list[Gate] = []
    after: list[AfterLoad] = []
    forbidden = _nulls_forbidden(tests.tests)
    for test in tests.tests:
        why = _why_not(test, load)
        column = _output_column(test, compiled) if test.column is not None else None
        if why is None and test.column is not None and column is None:
            why = f"column {test.column} is not a column of the model's output"
        failing = None if why is not None else _failing(test, _quoted(column), load)
        if why is None and failing is None:
            why = "its arguments make no row check"
        if why is not None or failing is None:
            after.append(AfterLoad(test.unique_id, why or ""))
            continue
        predicate = f"coalesce(({failing}), false)"
        if test.where:
            predicate = f"(coalesce(({test.where}), false) AND {predicate})"
        gates.append(
            Gate(
                test.unique_id,
                test.label,
                column,
                predicate,
                _action(test, mode, column, target, forbidden),
            )
        )
    return Gates(mode, tuple(gates), tuple(after))


def _action(
    test: DataTest,
    mode: ContractMode,
    column: str | None,
    target: Struct | None,
    forbidden: frozenset[str],
) -> GateAction:
    if mode is ContractMode.FREEZE:
        return GateAction.FREEZE
    if mode is ContractMode.DISCARD_ROW or column is None or test.name not in _NULL_PASSES:
        return GateAction.ROW
    field = target.field(column) if target is not None else None
    nullable = field is None or field.nullable
    return GateAction.VALUE if nullable and column.lower() not in forbidden else GateAction.ROW
