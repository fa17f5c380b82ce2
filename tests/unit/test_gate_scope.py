"""The gates read the values the load writes (core/contracts/gate_scope.py, issue 42): each
gate is one boolean column computed over the written values, and every reader of a gate (the
row filter, the value nulls, the counts, the quarantine's reasons, the freeze samples) reads
that column. Spark runs the SQL in tests/functional/contracts/test_data_tests_gates.py."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.contracts.data_tests import (
    AttachedTests,
    DataTest,
)
from dbt.adapters.spark_contracts.core.contracts.decision import ContractDecision
from dbt.adapters.spark_contracts.core.contracts.load_select import LoadSql, render_load_select
from dbt.adapters.spark_contracts.core.contracts.set_tests import GatedLoad
from tests.unit.test_enforce import S, run

MODEL = "model.p.m"


def not_null(column: str) -> DataTest:
    return DataTest(f"test.p.not_null_{column}", "not_null", None, (("column_name", column),))


def accepted(column: str, *values: int) -> DataTest:
    kwargs = (("column_name", column), ("quote", False), ("values", list(values)))
    return DataTest(f"test.p.accepted_{column}", "accepted_values", None, kwargs)


def expression(text: str) -> DataTest:
    kwargs = (("expression", text),)
    return DataTest(f"test.p.expr_{abs(hash(text))}", "expression_is_true", "dbt_utils", kwargs)


def decided(contract, deployed: str, compiled: str, *tests: DataTest) -> ContractDecision:
    decision = run(contract, deployed, compiled)
    return decision.with_gates(AttachedTests(MODEL, tests), S(compiled))


def render(decision: ContractDecision, deployed: str, compiled: str, **kw) -> LoadSql:
    return render_load_select(decision, "src", S(deployed), S(compiled), "r", **kw)


def written_item(sql: LoadSql, column: str) -> str:
    assert sql.gates is not None
    return f"{dict(sql.gates.written)[column]} AS `{column}`"


def test_a_gate_reads_the_value_the_load_writes():
    """`data_type: discard_value` nulls 'abc' (it does not coerce into INT): not_null(score)
    reads that NULL, not the model's 'abc'."""
    contract = {"data_type": "discard_value", "data_tests": "discard_row", "quarantine": True}
    d, c = "id int, score int", "id int, score string"
    sql = render(decided(contract, d, c, not_null("score")), d, c)
    scope = sql.coerced_select("m")
    assert scope is not None and sql.coerced_view("m") == "m__coerced"
    value = dict(sql.gates.written)["score"] if sql.gates else ""
    assert "try_cast" in value or "__dbt_coerced_" in value  # the coerced value
    # the gate is computed where `score` means that value; the load writes the same value
    assert f"{value} AS `score`" in scope and written_item(sql, "score") in sql.select
    assert "coalesce((`score` IS NULL), false) AS `__dbt_gate_0`" in scope
    assert sql.select.endswith("WHERE NOT (`__dbt_gate_0`)")
    assert "CASE WHEN `__dbt_gate_0` THEN 'not_null(score)' END" in (sql.quarantine_row or "")
    assert not sql.passes_through


def test_the_scope_holds_no_freeze_check_and_the_row_rides_along():
    contract = {"data_type": "freeze", "data_tests": "discard_row"}
    d, c = "id int, score int", "id int, score string"
    sql = render(decided(contract, d, c, not_null("score")), d, c)
    scope = sql.coerced_select("m") or ""
    assert "raise_error" in sql.select and "raise_error" not in scope
    # the model's row, every column as it is, above the written values
    assert scope.startswith("SELECT `__dbt_row_0`.*, ") and "struct(*) AS `__dbt_row_0`" in scope


def test_where_nothing_changes_a_value_the_gates_read_the_source_as_it_is():
    d = c = "id int, status int"
    sql = render(decided({"data_tests": "discard_value"}, d, c, accepted("status", 1, 2)), d, c)
    assert sql.coerced_select("m") == (
        "SELECT *, coalesce((`status` NOT IN (1, 2)), false) AS `__dbt_gate_0` FROM m"
    )
    assert "CASE WHEN `__dbt_gate_0` THEN NULL ELSE `status` END AS `status`" in sql.select
    assert sql.discard_metrics == (
        ("rows_discarded", "0"),
        ("values_discarded", "count_if((`__dbt_gate_0`))"),
        ("__dbt_gate_0", "count_if(`__dbt_gate_0`)"),  # the gate's own count
    )
    (count,) = sql.gate_counts({"rows_discarded": 0, "values_discarded": 3, "__dbt_gate_0": 3})
    assert (count.reason, count.action.value, count.rows) == (
        "accepted_values(status)",
        "discard_value",
        3,
    )
    # a first pass that went through unobserved (Thrift, Connect) reports each gate at 0, as
    # an observed clean load does
    (clean,) = sql.clean_gate_counts()
    assert (clean.reason, clean.action.value, clean.rows) == (
        "accepted_values(status)",
        "discard_value",
        0,
    )


def test_a_select_that_reads_its_source_alone_computes_the_gates_inline():
    """The pending table holds the model's columns only: its load reads the gates' columns
    from the scope over it, and picks its kept rows by their reason."""
    contract = {"data_type": "discard_value", "data_tests": "discard_value", "quarantine": True}
    d, c = "id int, score int", "id int, score string"
    decision = decided(contract, d, c, accepted("score", 10, 20), not_null("id"))
    sql = render(decision, d, c, hoist=False, kept="`_contract_reason` IS NULL")
    assert sql.gates is not None and sql.coerced == ()
    inline = f"({sql.gates.over('src')}) AS __dbt_gated"
    assert sql.select.endswith(f"FROM {inline} WHERE `_contract_reason` IS NULL")
    assert sql.source == inline and (sql.discard_count_sql or "").endswith(f"FROM {inline}")
    # the model's view the pending table is written from has them too
    assert sql.coerced_select("m") == sql.gates.over("m")


names = st.sampled_from(["id", "score", "__dbt_gate_0", "__DBT_ROW_0", "__dbt_gate_1"])
modes = st.sampled_from(["freeze", "discard_row", "discard_value"])


@settings(max_examples=200, deadline=None)
@given(
    extra=st.lists(names, unique_by=str.lower, max_size=3),
    data_type=modes,
    data_tests=modes,
    which=st.sets(st.sampled_from(["not_null", "accepted", "expression"]), min_size=1),
    hoist=st.booleans(),
)
def test_each_gate_is_one_column_and_every_reader_reads_it(
    extra, data_type, data_tests, which, hoist
):
    columns = ["id", "score"] + [n for n in extra if n.lower() not in ("id", "score")]
    deployed = ", ".join(f"`{n}` int" for n in columns)
    compiled = deployed.replace("`score` int", "`score` string")
    tests = {
        "not_null": not_null("score"),
        "accepted": accepted("score", 10, 20),
        "expression": expression("id > 0"),
    }
    chosen = [tests[w] for w in sorted(which)]
    contract = {"data_type": data_type, "data_tests": data_tests, "quarantine": True}
    decision = decided(contract, deployed, compiled, *chosen)
    sql = render(decision, deployed, compiled, hoist=hoist)
    assert sql.gates is not None
    aliases = [a for a, _ in sql.gates.columns]
    taken = {n.lower() for n in columns}
    assert len(aliases) == len(chosen) and not taken & {a.lower() for a in aliases}
    assert sql.gates.row.lower() not in taken | {a.lower() for a in aliases}
    scope = sql.coerced_select("m") or ""
    for gate in decision.gates.gates:
        # computed once, in the scope; read by its alias everywhere else
        assert scope.count(gate.predicate) == 1
        readers = [sql.select, sql.quarantine_row or "", sql.violation_sample_sql or ""]
        readers += [e for _, e in sql.discard_metrics]
        # (`source` is the scope itself where the SELECT reads its source alone)
        assert not any(gate.predicate in r.replace(sql.source, "src") for r in readers)
    used = set(re.findall(r"`(__dbt_gate_\d+)`", sql.select + (sql.violation_sample_sql or "")))
    assert used - {n for n in columns} <= set(aliases) and not sql.passes_through


def test_a_freeze_gate_is_counted_in_the_same_pass():
    """A freeze gate's failing rows are one more metric of the pass that reads the output
    (observed while staging, or counted over the stage): the violation names the count."""
    d = c = "id int, score int"
    sql = render(decided({"data_tests": "freeze"}, d, c, not_null("score")), d, c)
    assert sql.violation_sample_sql is not None
    assert sql.discard_metrics == (
        ("rows_discarded", "0"),
        ("values_discarded", "0"),
        ("__dbt_gate_0", "count_if(`__dbt_gate_0`)"),
    )
    (count,) = sql.gate_counts({"rows_discarded": 0, "values_discarded": 0, "__dbt_gate_0": 7})
    assert (count.reason, count.action.value, count.rows) == ("not_null(score)", "freeze", 7)


def test_a_set_tests_subquery_is_one_gate_column():
    """`unique` on an append and `relationships` read the table and the parent in a subquery
    of their gate's column: computed once, in the scope, read by its alias."""
    unique = DataTest("test.p.unique_id", "unique", None, (("column_name", "id"),))
    related = DataTest(
        "test.p.rel_score",
        "relationships",
        None,
        (("column_name", "score"), ("field", "k"), ("to", "ref('p')")),
        parent="db.p",
    )
    d = c = "id int, score int"
    decision = run({"data_tests": "discard_row", "quarantine": True}, d, c)
    load = GatedLoad(table="db.t")
    decision = decision.with_gates(AttachedTests(MODEL, (unique, related)), S(c), load)
    sql = render(decision, d, c)
    scope = sql.coerced_select("m") or ""
    assert scope.count("FROM db.t WHERE") == 1 and scope.count("FROM db.p WHERE") == 1
    for text in (sql.select, sql.quarantine_row or "", *(e for _, e in sql.discard_metrics)):
        assert "db.t" not in text and "db.p" not in text


class _Statements:
    """A Spark that records statements (run/first_pass.prepare_first_pass sends views only)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def run(self, sql: str) -> None:
        self.sent.append(sql)


def test_an_unobserved_first_pass_records_each_row_gate_at_zero():
    """Over Thrift and Connect a first pass is not observed (no listener in the client): it
    records its row gates at 0 (its guard fails the load at any row a gate discards). A first
    pass that then fails begins the run again: the pending path's own counts replace them."""
    from types import SimpleNamespace

    from dbt.adapters.spark_contracts.run.first_pass import prepare_first_pass
    from dbt.adapters.spark_contracts.run.outcome_events import RunBook

    contract = {"data_tests": "discard_row", "quarantine": True}
    d = c = "id int, name string"
    first = render(decided(contract, d, c, not_null("name")), d, c)
    run_ = SimpleNamespace(first_pass=first, repairs=(), view="m", observed=None, source="m_src")
    book = RunBook()
    prepare_first_pass(_Statements(), book, run_)  # type: ignore[arg-type]
    counts = [(g.reason, g.action.value, g.rows) for g in book.out.gate_counts]
    assert counts == [("not_null(name)", "discard_row", 0)]
    assert book.out.rows_discarded == 0
    book.begin(())  # a failed first pass: the run begins again on its pending table
    assert book.out.gate_counts == ()
