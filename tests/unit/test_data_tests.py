"""A model's data tests as gates on its load (core/contracts/data_tests.py, issue 42).

SQLite is the oracle (no Spark): the SQL dbt's own test macros run is evaluated beside the
gate's predicate over random rows, and the rows the predicate turns away are exactly the rows
the test returns; after the gate, the test returns none.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode
from dbt.adapters.spark_contracts.core.contracts.data_tests import (
    AttachedTests,
    DataTest,
    GateAction,
    Gates,
    attached_tests,
    plan_gates,
)
from dbt.adapters.spark_contracts.core.contracts.set_tests import GatedLoad, gated_load
from dbt.adapters.spark_contracts.core.schema.types import Field, Primitive, Struct

E, F, R, V = (
    ContractMode.EVOLVE,
    ContractMode.FREEZE,
    ContractMode.DISCARD_ROW,
    ContractMode.DISCARD_VALUE,
)
STRING, INT = Primitive("string"), Primitive("int")
OUTPUT = Struct(
    (Field("id", INT), Field("name", STRING), Field("status", STRING), Field("amount", INT))
)
MODEL = "model.p.m"


def test_(name: str, column: str | None = None, namespace: str | None = None, **kwargs: Any):
    """A test as `attached_tests` reads it (`test_` so pytest does not collect it)."""
    args = dict(kwargs)
    where = args.pop("where", None)
    gate = args.pop("gate", True)
    if column is not None:
        args["column_name"] = column
    uid = f"test.p.{name}_{column or 'm'}_{abs(hash(repr(sorted(kwargs.items())))) % 997}"
    return DataTest(uid, name, namespace, tuple(sorted(args.items())), where, gate)


test_.__test__ = False  # type: ignore[attr-defined]


def gates(*tests: DataTest, mode: ContractMode = R, target: Struct | None = OUTPUT) -> Gates:
    return plan_gates(AttachedTests(MODEL, tests), mode, OUTPUT, target)


# -- dbt's own test SQL (its macros, rendered as dbt renders them), the oracle


def dbt_test_sql(test: DataTest, table: str) -> str:
    model = f"(select * from {table} where {test.where}) s" if test.where else table
    column = test.column
    if test.name == "not_null":
        return f"select id from {model} where {column} is null"
    if test.name == "accepted_values":
        quote = test.arg("quote", True)
        values = ", ".join(f"'{v}'" if quote else str(v) for v in test.arg("values"))
        return f"select id from {model} where {column} not in ({values})"  # group by aside: rows
    if test.name == "not_empty_string":
        value = f"trim({column})" if test.arg("trim_whitespace", True) else column
        return f"select id from {model} where {value} = ''"
    if test.name == "accepted_range":
        eq = "=" if test.arg("inclusive", True) else ""
        parts = ["1 = 2"]
        if test.arg("min_value") is not None:
            parts.append(f"not {column} >{eq} {test.arg('min_value')}")
        if test.arg("max_value") is not None:
            parts.append(f"not {column} <{eq} {test.arg('max_value')}")
        return f"select id from {model} where {' or '.join(parts)}"
    if test.name == "expression_is_true":
        expression = test.arg("expression")
        body = f"{column} {expression}" if column else expression
        return f"select id from {model} where not({body})"
    raise AssertionError(test.name)


def load(rows: list[tuple[Any, ...]]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("create table t (id int, name text, status text, amount int)")
    db.executemany("insert into t values (?, ?, ?, ?)", rows)
    return db


def ids(db: sqlite3.Connection, sql: str) -> set[int]:
    return {row[0] for row in db.execute(sql)}


statuses = st.sampled_from(["a", "b", "c", "", " ", None])
names = st.sampled_from(["x", "", "  ", None])
amounts = st.one_of(st.none(), st.integers(-5, 15))
rows = st.lists(st.tuples(names, statuses, amounts), max_size=25).map(
    lambda rs: [(i, *r) for i, r in enumerate(rs)]
)
wheres = st.sampled_from([None, "amount > 3", "status = 'a'", "name is not null"])
tests = st.one_of(
    st.builds(
        lambda c, w: test_("not_null", c, where=w), st.sampled_from(["name", "status"]), wheres
    ),
    st.builds(
        lambda vs, w: test_("accepted_values", "status", values=vs, where=w),
        st.lists(st.sampled_from(["a", "b", "c", " "]), min_size=1, max_size=3, unique=True),
        wheres,
    ),
    st.builds(
        lambda vs, w: test_("accepted_values", "amount", values=vs, quote=False, where=w),
        st.lists(st.integers(0, 6), min_size=1, max_size=3, unique=True),
        wheres,
    ),
    st.builds(
        lambda lo, hi, inc, w: test_(
            "accepted_range",
            "amount",
            "dbt_utils",
            min_value=lo,
            max_value=hi,
            inclusive=inc,
            where=w,
        ),
        st.integers(0, 5),  # neither bound: no row check (test below)
        st.one_of(st.none(), st.integers(5, 10)),
        st.booleans(),
        wheres,
    ),
    st.builds(
        lambda trim, w: test_(
            "not_empty_string", "name", "dbt_utils", trim_whitespace=trim, where=w
        ),
        st.booleans(),
        wheres,
    ),
    st.builds(
        lambda e, w: test_("expression_is_true", None, "dbt_utils", expression=e, where=w),
        st.sampled_from(["amount < 10", "status <> 'c' or amount is null", "length(name) > 0"]),
        wheres,
    ),
    st.builds(
        lambda e, w: test_("expression_is_true", "amount", "dbt_utils", expression=e, where=w),
        st.sampled_from(["> 2", "between 0 and 9"]),
        wheres,
    ),
)


def spark_to_sqlite(predicate: str) -> str:
    return predicate  # backticks, coalesce, trim, NOT IN, false: both dialects


@settings(max_examples=300, deadline=None)
@given(rows, tests)
def test_a_gate_turns_away_exactly_the_rows_the_test_returns(data, test):
    db = load(data)
    (gate,) = gates(test).gates
    gated = ids(db, f"select id from t where {spark_to_sqlite(gate.predicate)}")
    assert gated == ids(db, dbt_test_sql(test, "t"))
    # the predicate is NULL-safe: its negation keeps every other row
    kept = ids(db, f"select id from t where not ({gate.predicate})")
    assert kept | gated == {r[0] for r in data} and not kept & gated


@settings(max_examples=200, deadline=None)
@given(rows, st.lists(tests, min_size=1, max_size=4))
def test_after_discard_row_every_gated_test_passes(data, chosen):
    db = load(data)
    planned = gates(*chosen)
    keep = " AND ".join(f"NOT ({p})" for _, p in planned.row_filters())
    db.execute(f"create table kept as select * from t where {keep}")
    for test in chosen:
        assert ids(db, dbt_test_sql(test, "kept")) == set(), test
    dropped = len(data) - db.execute("select count(*) from kept").fetchone()[0]
    assert dropped == len(
        ids(db, "select id from t where " + " OR ".join(f"({p})" for _, p in planned.row_filters()))
    )


@settings(max_examples=200, deadline=None)
@given(rows, st.lists(tests, min_size=1, max_size=4))
def test_after_discard_value_every_gated_test_passes(data, chosen):
    """Failing values set to NULL where a NULL passes, the other failing rows dropped."""
    db = load(data)
    planned = gates(*chosen, mode=V)
    columns = []
    for column in ("id", "name", "status", "amount"):
        nulls = planned.value_nulls(column)
        when = " OR ".join(f"({p})" for p in nulls)
        columns.append(
            f"CASE WHEN {when} THEN NULL ELSE {column} END AS {column}" if nulls else column
        )
    keep = " AND ".join(f"NOT ({p})" for _, p in planned.row_filters()) or "1 = 1"
    db.execute(f"create table kept as select {', '.join(columns)} from t where {keep}")
    for test in chosen:
        assert ids(db, dbt_test_sql(test, "kept")) == set(), test


def test_modes_map_to_actions():
    accepted = test_("accepted_values", "status", values=["a"])
    not_null = test_("not_null", "name")
    assert gates(accepted, mode=E) == Gates(E)
    assert [g.action for g in gates(accepted, not_null, mode=F).gates] == [GateAction.FREEZE] * 2
    assert [g.action for g in gates(accepted, not_null, mode=R).gates] == [GateAction.ROW] * 2
    by_reason = {g.reason: g.action for g in gates(accepted, not_null, mode=V).gates}
    # a NULL fails not_null: its row goes; a NULL passes accepted_values: its value goes
    assert by_reason == {
        "accepted_values(status)": GateAction.VALUE,
        "not_null(name)": GateAction.ROW,
    }


def test_discard_value_drops_the_row_where_null_is_forbidden():
    accepted = test_("accepted_values", "status", values=["a"])
    # another test forbids NULL in the column (even one that does not gate)
    also = test_("not_null", "status", gate=False)
    assert gates(accepted, also, mode=V).gates[0].action is GateAction.ROW
    # the table's column is NOT NULL
    required = Struct(tuple(Field(f.name, f.type, f.name != "status") for f in OUTPUT.fields))
    assert gates(accepted, mode=V, target=required).gates[0].action is GateAction.ROW
    # an expression may fail on NULL: its row goes
    expr = test_("expression_is_true", "amount", "dbt_utils", expression="> 0")
    assert gates(expr, mode=V).gates[0].action is GateAction.ROW


def test_reasons_name_the_test_and_column():
    planned = gates(
        test_("not_null", "name"),
        test_("accepted_values", "status", values=["a"]),
        test_("accepted_range", "amount", "dbt_utils", min_value=0),
        test_("expression_is_true", None, "dbt_utils", expression="amount < 10"),
    )
    assert [g.reason for g in planned.gates] == [
        "not_null(name)",
        "accepted_values(status)",
        "dbt_utils.accepted_range(amount)",
        "dbt_utils.expression_is_true(amount < 10)",
    ]
    assert [g.column for g in planned.gates] == ["name", "status", "amount", None]


def test_quote_false_renders_values_as_sql():
    (gate,) = gates(test_("accepted_values", "amount", values=[1, 2], quote=False)).gates
    assert "`amount` NOT IN (1, 2)" in gate.predicate
    (gate,) = gates(test_("accepted_values", "status", values=["it's"])).gates
    assert "NOT IN ('it\\'s')" in gate.predicate


@pytest.mark.parametrize(
    ("test", "why"),
    [
        (DataTest("test.p.singular"), "a singular test"),
        (test_("unique", "id"), "the load replaces part of the table"),
        (test_("relationships", "id", to="ref('x')", field="id"), "its parent (`to`)"),
        (test_("my_test", "id"), "a generic test the adapter does not gate"),
        (test_("not_empty_string", "name"), "a generic test the adapter does not gate"),
        (test_("expression_is_true", None, "other_pkg", expression="1=1"), "does not gate"),
        (test_("not_null", "name", gate=False), "opted out"),
        (test_("not_null", "missing"), "not a column of the model's output"),
        (test_("not_null", "lower(name)"), "not a column of the model's output"),
        (test_("accepted_values", "status", values=[]), "make no row check"),
        (test_("accepted_range", "amount", "dbt_utils"), "make no row check"),
        (test_("accepted_values", "status", values=["{{ var('v') }}"]), "hold Jinja"),
        (test_("not_null", "name", where="day = '{{ var(\"d\") }}'"), "hold Jinja"),
    ],
)
def test_tests_that_do_not_gate_are_listed_after_the_load(test, why):
    planned = gates(test)
    assert planned.gates == ()
    (after,) = planned.after_load
    assert after.test == test.unique_id and why in after.why
    assert "checked after the load" in "\n".join(planned.summary_lines())
    assert planned.log_lines() == [
        f"data test {test.unique_id} is checked after the load ({after.why})"
    ]


def dbt_unique_sql(column: str, where: str | None, table: str) -> str:
    """dbt's `unique` test: the keys more than one row holds (among the rows `where` keeps)."""
    model = f"(select * from {table} where {where}) s" if where else table
    return (
        f"select {column} from {model} where {column} is not null "
        f"group by {column} having count(*) > 1"
    )


@settings(max_examples=300, deadline=None)
@given(rows, st.sampled_from(["name", "status", "amount"]), wheres, st.sampled_from([R, V]))
def test_unique_turns_away_every_row_of_a_duplicated_key(data, column, where, mode):
    """On a load that writes the whole table: every row of a key the test returns (the rows
    `where` keeps), and after it the test returns none (the gate is a window: a column)."""
    db = load(data)
    test = test_("unique", column, where=where)
    whole = GatedLoad(whole=True)
    (gate,) = plan_gates(AttachedTests(MODEL, (test,)), mode, OUTPUT, OUTPUT, whole).gates
    db.execute(f"create table g as select *, {gate.predicate} as failing from t")
    keys = dbt_unique_sql(column, where, "t")
    returned = f"{column} in ({keys})" + (f" and coalesce(({where}), false)" if where else "")
    assert ids(db, "select id from g where failing") == ids(
        db, f"select id from t where {returned}"
    )
    assert gate.action is (GateAction.ROW if mode is R else GateAction.VALUE)
    if mode is R:  # the row dropped
        db.execute("create table kept as select * from g where not failing")
    else:  # a NULL passes unique: the value nulled (the column is nullable, no not_null)
        values = [
            f"CASE WHEN failing THEN NULL ELSE {c} END AS {c}" if c == column else c
            for c in ("id", "name", "status", "amount")
        ]
        db.execute(f"create table kept as select {', '.join(values)} from g")
    assert ids(db, dbt_unique_sql(column, where, "kept")) == set()


def test_unique_gates_by_what_the_load_does_to_the_table():
    test = test_("unique", "id")
    keyed = AttachedTests(MODEL, (test,), unique_key=("ID",))

    def planned(strategy: str, tests: AttachedTests = keyed) -> Gates:
        return plan_gates(
            tests, R, OUTPUT, OUTPUT, gated_load(strategy, "db.t", tests.unique_key, "table")
        )

    # a rebuild: the load's rows only; an append: and the table's keys (a subquery of it)
    (whole,) = planned("table").gates
    assert "db.t" not in whole.predicate and "OVER (PARTITION BY `id`)" in whole.predicate
    (append,) = planned("append").gates
    assert "`id` IN (SELECT `id` FROM db.t WHERE `id` IS NOT NULL)" in append.predicate
    # a merge on the key updates the table's row of it: the load's own duplicates only
    (merge,) = planned("merge").gates
    assert merge.predicate == whole.predicate
    # a merge on another key: the table's keys but those on the row's own merge key
    other = AttachedTests(MODEL, (test,), unique_key=("id", "`name`"))
    (on_other,) = planned("merge", other).gates
    assert "(`id`, `id`, `name`) IN (SELECT `id`, `id`, `name` FROM db.t" in on_other.predicate
    # a narrowed merge (incremental_predicates, a column list): after the load, on any key
    for tests in (keyed, other):
        narrowed = gated_load("merge", "db.t", tests.unique_key, "table", narrowed=True)
        (after,) = plan_gates(tests, R, OUTPUT, OUTPUT, narrowed).after_load
        assert "the merge is narrowed" in after.why
    # a load that replaces part of the table: after the load
    for strategy in ("insert_overwrite", "microbatch"):
        assert "replaces part of the table" in planned(strategy).after_load[0].why


# the table a run appends to (or merges into): its rows unique under the test, as a build
# whose test passed left it
table_rows = st.lists(st.tuples(names, statuses, amounts), max_size=12).map(
    lambda rs: [(100 + i, *r) for i, r in enumerate(rs)]
)


def unique_table(db: sqlite3.Connection, rows: list[Any], column: str, where: str | None) -> None:
    db.execute("create table tbl (id int, name text, status text, amount int)")
    db.executemany("insert into tbl values (?, ?, ?, ?)", rows)
    # as a table the test passed on: one row of each key it counts
    dup = dbt_unique_sql(column, where, "tbl")
    counted = f"coalesce(({where}), false)" if where else "1 = 1"
    db.execute(
        f"delete from tbl where {counted} and {column} in ({dup}) and id not in "
        f"(select min(id) from tbl where {counted} group by {column})"
    )
    assert ids(db, dup) == set()


@settings(max_examples=300, deadline=None)
@given(
    rows,
    table_rows,
    st.sampled_from(["name", "status", "amount"]),
    wheres,
    st.sampled_from([R, V]),
)
def test_unique_on_an_append_turns_away_keys_the_load_or_the_table_holds(
    data, existing, column, where, mode
):
    """An append: every row of a key the load holds twice, and every row whose key the table
    holds (the rows `where` keeps); after the append dbt's test returns none."""
    db = load(data)
    unique_table(db, existing, column, where)
    test = test_("unique", column, where=where)
    append = GatedLoad(table="tbl")
    (gate,) = plan_gates(AttachedTests(MODEL, (test,)), mode, OUTPUT, OUTPUT, append).gates
    db.execute(f"create table g as select *, {gate.predicate} as failing from t")
    counted = f" and coalesce(({where}), false)" if where else ""
    held = f"select {column} from tbl where {column} is not null{counted}"
    in_batch = dbt_unique_sql(column, where, "t")
    expected = ids(
        db, f"select id from t where ({column} in ({in_batch}) or {column} in ({held})){counted}"
    )
    assert ids(db, "select id from g where failing") == expected
    values = [
        f"CASE WHEN failing THEN NULL ELSE {c} END AS {c}" if c == column and mode is V else c
        for c in ("id", "name", "status", "amount")
    ]
    keep = "not failing" if mode is R else "1 = 1"
    db.execute(f"insert into tbl select {', '.join(values)} from g where {keep}")
    assert ids(db, dbt_unique_sql(column, where, "tbl")) == set()


@settings(max_examples=200, deadline=None)
@given(rows, table_rows, st.sampled_from(["name", "status", "amount"]), wheres)
def test_unique_under_a_merge_on_the_key_turns_away_only_the_loads_duplicates(
    data, existing, column, where
):
    """A merge on the tested key: the table's row of a key the load brings is updated, so
    only the load's own duplicates go; after the merge dbt's test returns none."""
    db = load(data)
    unique_table(db, existing, column, where)
    # a merge on the key: the table holds each key once
    db.execute(
        f"delete from tbl where id not in (select min(id) from tbl group by {column}) "
        f"and {column} is not null"
    )
    test = test_("unique", column, where=where)
    merge = GatedLoad(table="tbl", merge_keys=(column,))
    (gate,) = plan_gates(AttachedTests(MODEL, (test,)), R, OUTPUT, OUTPUT, merge).gates
    db.execute(f"create table g as select *, {gate.predicate} as failing from t")
    db.execute("create table kept as select id, name, status, amount from g where not failing")
    # the merge: a kept row whose key the table holds updates it, the others are inserted
    db.execute(f"delete from tbl where {column} in (select {column} from kept)")
    db.execute("insert into tbl select * from kept")
    assert ids(db, dbt_unique_sql(column, where, "tbl")) == set()
    # nothing but the load's own duplicates went
    gated = ids(db, "select id from g where failing")
    counted = f" and coalesce(({where}), false)" if where else ""
    in_batch = dbt_unique_sql(column, where, "t")
    assert gated == ids(db, f"select id from t where {column} in ({in_batch}){counted}")


COLUMN_NAMES = ("id", "name", "status", "amount")
# rows of a merge's load or of the table it merges into: ids from one small range (so keys
# match) or NULL (a key no merge matches)
keyed_rows = st.lists(
    st.tuples(st.one_of(st.none(), st.integers(0, 12)), names, statuses, amounts), max_size=20
)


def one_row_per_key(rows: list[Any], keys: tuple[str, ...]) -> list[Any]:
    """`rows` with each non-NULL merge key once (a MERGE fails on two source rows for one
    target row, and a table merged into on its key holds each key once)."""
    seen, kept = set(), []
    for row in rows:
        key = tuple(row[COLUMN_NAMES.index(k)] for k in keys)
        if None not in key and key in seen:
            continue
        seen.add(key)
        kept.append(row)
    return kept


@settings(max_examples=400, deadline=None)
@given(
    keyed_rows,
    keyed_rows,
    st.sampled_from(["name", "status", "amount"]),
    wheres,
    st.sampled_from([("id",), ("id", "status")]),
)
def test_unique_under_a_merge_on_another_key_leaves_the_table_passing_the_test(
    data, existing, column, where, keys
):
    """A merge on `keys` (not the tested column alone) gated by `unique(column)`: the load's own
    duplicates go, and every row whose key the table holds on a row of another merge key (or a
    NULL one); after the merge (a kept row updates the table's row of its merge key, or is
    inserted) dbt's test returns none. NULL merge keys and composite ones included."""
    db = load(one_row_per_key(data, keys))
    db.execute("create table tbl (id int, name text, status text, amount int)")
    db.executemany("insert into tbl values (?, ?, ?, ?)", one_row_per_key(existing, keys))
    counted = f"coalesce(({where}), false)" if where else "1 = 1"
    dup = dbt_unique_sql(column, where, "tbl")  # as a table the test passed on
    db.execute(
        f"delete from tbl where {counted} and {column} in ({dup}) and rowid not in "
        f"(select min(rowid) from tbl where {counted} group by {column})"
    )
    test = test_("unique", column, where=where)
    merge = GatedLoad(table="tbl", merge_keys=keys)
    (gate,) = plan_gates(AttachedTests(MODEL, (test,)), R, OUTPUT, OUTPUT, merge).gates
    db.execute(f"create table g as select rowid as rid, *, {gate.predicate} as failing from t")
    in_batch = dbt_unique_sql(column, where, "t")
    same_key = " and ".join(f"tbl.{k} = t.{k}" for k in keys)  # NULL: no match
    # (`where` inside the subquery reads the table's row: the inner scope's columns)
    elsewhere = (
        f"select 1 from tbl where tbl.{column} = t.{column} and {counted} "
        f"and not coalesce({same_key}, 0)"
    )
    expected = ids(
        db,
        f"select rowid from t where {counted} and {column} is not null and "
        f"({column} in ({in_batch}) or exists ({elsewhere}))",
    )
    assert ids(db, "select rid from g where failing") == expected
    db.execute("create table kept as select id, name, status, amount from g where not failing")
    matched = " and ".join(f"kept.{k} = tbl.{k}" for k in keys)
    db.execute(f"delete from tbl where exists (select 1 from kept where {matched})")  # updated
    db.execute("insert into tbl select * from kept")  # ... or inserted
    assert ids(db, dbt_unique_sql(column, where, "tbl")) == set()


def dbt_relationships_sql(column: str, field: str, parent: str, where: str | None) -> str:
    """dbt's `relationships` test (its macro, rendered): the child's keys the parent lacks."""
    model = f"(select * from t where {where}) s" if where else "t"
    return (
        f"with child as (select id, {column} as from_field from {model} "
        f"where {column} is not null), parent as (select {field} as to_field from {parent}) "
        "select id from child left join parent on child.from_field = parent.to_field "
        "where parent.to_field is null"
    )


@settings(max_examples=300, deadline=None)
@given(
    rows,
    st.lists(st.one_of(st.none(), st.integers(-5, 15)), max_size=10),
    wheres,
    st.sampled_from([R, V]),
)
def test_relationships_turns_away_exactly_the_keys_the_parent_lacks(data, parents, where, mode):
    db = load(data)
    db.execute("create table parents (pid int)")
    db.executemany("insert into parents values (?)", [(p,) for p in parents])
    test = DataTest(
        "test.p.relationships_m_amount",
        "relationships",
        None,
        (("column_name", "amount"), ("field", "pid"), ("to", "ref('parent')")),
        where,
        parent="parents",
    )
    (gate,) = gates(test, mode=mode).gates
    assert gate.reason == "relationships(amount)"
    assert gate.action is (GateAction.ROW if mode is R else GateAction.VALUE)
    returned = ids(db, dbt_relationships_sql("amount", "pid", "parents", where))
    assert ids(db, f"select id from t where {gate.predicate}") == returned
    if mode is R:
        db.execute(f"create table kept as select * from t where not ({gate.predicate})")
    else:  # a NULL passes: the value nulled
        db.execute(
            "create table kept as select id, name, status, "
            f"CASE WHEN {gate.predicate} THEN NULL ELSE amount END AS amount from t"
        )
    db.execute("drop table t")
    db.execute("alter table kept rename to t")
    assert ids(db, dbt_relationships_sql("amount", "pid", "parents", where)) == set()


def test_a_quoted_or_differently_cased_column_is_the_output_column():
    (gate,) = gates(test_("not_null", "`NAME`")).gates
    assert gate.column == "name" and "`name` IS NULL" in gate.predicate


def test_freeze_gates_list_column_predicate_and_reason():
    planned = gates(
        test_("not_null", "name"),
        test_("expression_is_true", None, "dbt_utils", expression="amount < 10"),
        mode=F,
    )
    assert [(c, r) for c, _, r in planned.frozen()] == [
        ("name", "not_null(name)"),
        ("", "dbt_utils.expression_is_true(amount < 10)"),
    ]
    assert planned.row_filters() == () and planned.value_nulls("name") == ()
    assert planned.by_reason("not_null(name)") is planned.gates[0]
    assert planned.to_dict()["gates"][0] == {
        "test": planned.gates[0].test,
        "reason": "not_null(name)",
        "column": "name",
        "action": "freeze",
    }


def node(uid: str, **extra: Any) -> dict[str, Any]:
    return {"unique_id": uid, "resource_type": "test", **extra}


def test_attached_tests_reads_the_manifest():
    nodes = {
        "model.p.m": {"unique_id": "model.p.m", "resource_type": "model"},
        "test.p.not_null_m_name": node(
            "test.p.not_null_m_name",
            attached_node=MODEL,
            test_metadata={
                "name": "not_null",
                "namespace": None,
                "kwargs": {"column_name": "name", "model": "{{ get_where_subquery(ref('m')) }}"},
            },
            config={"where": "id > 0", "meta": {}},
            depends_on={"nodes": [MODEL]},
        ),
        "test.p.range": node(
            "test.p.range",
            attached_node=MODEL,
            test_metadata={
                "name": "accepted_range",
                "namespace": "dbt_utils",
                "kwargs": {"column_name": "amount", "min_value": 0},
            },
            config={"meta": {"gate": False}},
        ),
        # a singular test that reads the model
        "test.p.singular": node("test.p.singular", depends_on={"nodes": [MODEL, "model.p.o"]}),
        # another model's relationships test that points here: not this model's
        "test.p.rel": node(
            "test.p.rel",
            attached_node="model.p.o",
            test_metadata={"name": "relationships", "kwargs": {"to": "ref('m')"}},
            depends_on={"nodes": [MODEL, "model.p.o"]},
        ),
        # this model's: its parent found by `to` among the nodes it depends on
        "test.p.rel_m": node(
            "test.p.rel_m",
            attached_node=MODEL,
            test_metadata={
                "name": "relationships",
                "kwargs": {"column_name": "amount", "to": "ref('o')", "field": "id"},
            },
            depends_on={"nodes": ["model.p.o", MODEL]},
        ),
        "model.p.o": {"unique_id": "model.p.o", "name": "o", "relation_name": "`s`.`o`"},
        "test.p.rel_src": node(
            "test.p.rel_src",
            attached_node=MODEL,
            test_metadata={
                "name": "relationships",
                "kwargs": {"column_name": "name", "to": "source('raw', 'c')", "field": "n"},
            },
            depends_on={"nodes": ["source.p.raw.c", MODEL]},
        ),
        "source.p.raw.c": {"source_name": "raw", "name": "c", "relation_name": "`raw`.`c`"},
        "test.p.other": node("test.p.other", attached_node="model.p.o"),
    }
    found = attached_tests(MODEL, nodes, "id")
    assert found.unique_key == ("id",)
    assert [t.unique_id for t in found.tests] == [
        "test.p.not_null_m_name",
        "test.p.range",
        "test.p.rel_m",
        "test.p.rel_src",
        "test.p.singular",
    ]
    not_null, ranged, rel, src, singular = found.tests
    assert (rel.parent, src.parent) == ("`s`.`o`", "`raw`.`c`")
    assert (not_null.name, not_null.column, not_null.where, not_null.gate) == (
        "not_null",
        "name",
        "id > 0",
        True,
    )
    assert "model" not in dict(not_null.kwargs)
    assert (ranged.namespace, ranged.gate, ranged.arg("min_value")) == ("dbt_utils", False, 0)
    assert singular.name == "" and singular.label == "test.p.singular"
    planned = plan_gates(found, R, OUTPUT, OUTPUT)
    assert [g.reason for g in planned.gates] == [
        "not_null(name)",
        "relationships(amount)",
        "relationships(name)",
    ]
    assert "NOT IN (SELECT `id` FROM `s`.`o` WHERE `id` IS NOT NULL)" in planned.gates[1].predicate
    assert [a.test for a in planned.after_load] == ["test.p.range", "test.p.singular"]
    # a relationships test whose `to` is the model itself is checked after the load
    itself = node(
        "test.p.rel_self",
        attached_node=MODEL,
        test_metadata={
            "name": "relationships",
            "kwargs": {"column_name": "amount", "to": "ref('m')", "field": "id"},
        },
        depends_on={"nodes": [MODEL]},
    )
    nodes[MODEL].update(name="m", relation_name="`s`.`m`")
    (alone,) = attached_tests(MODEL, {MODEL: nodes[MODEL], "test.p.rel_self": itself}).tests
    assert alone.parent is None
    assert (
        "the model itself"
        in plan_gates(AttachedTests(MODEL, (alone,)), R, OUTPUT, OUTPUT).after_load[0].why
    )


def test_log_lines_name_each_gate_and_its_action():
    planned = gates(
        test_("not_null", "name"), test_("accepted_values", "status", values=["a"]), mode=V
    )
    assert planned.log_lines() == [
        "data_tests discard_value gates the load: not_null(name) (discard_row), "
        "accepted_values(status) (discard_value)"
    ]
    assert gates(test_("not_null", "name"), mode=E).log_lines() == []


def test_no_tests_or_evolve_plans_nothing():
    assert plan_gates(None, R, OUTPUT, OUTPUT) == Gates(R)
    assert plan_gates(AttachedTests(MODEL, (test_("not_null", "name"),)), E, OUTPUT, None) == Gates(
        E
    )
