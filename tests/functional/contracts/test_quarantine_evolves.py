"""The quarantine table follows the model: a run that discards rows after the model gained a
column quarantines them with it (delta, iceberg and parquet), and so after it gained a nested
field (delta, iceberg: parquet cannot add one to the model's table in place either), instead of
failing on the quarantine insert and taking its load back.

One model per case, three bodies (`--vars '{v: N}'`): v1 builds the table, v2 quarantines a
row whose `n` does not cast into the deployed bigint, v3 adds `note` (columns: evolve), or the
field `s.b`, and quarantines again."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contracts.test_contract_matrix import rel

FORMATS = ("delta", "iceberg", "parquet")
CONTRACT = "{'columns': 'evolve', 'data_type': 'discard_row', 'quarantine': true}"
BODIES = (
    "select 1 as id, cast(1 as bigint) as n",
    "select 2 as id, 'bad' as n union all select 3 as id, '3' as n",
    "select 4 as id, 'worse' as n, 'x' as note union all select 5 as id, '5' as n, 'y' as note",
)


NESTED = (
    "select 1 as id, cast(1 as bigint) as n, named_struct('a', 1) as s",
    "select 2 as id, 'bad' as n, named_struct('a', 2) as s"
    " union all select 3 as id, '3' as n, named_struct('a', 3) as s",
    "select 4 as id, 'worse' as n, named_struct('a', 4, 'b', 'x') as s"
    " union all select 5 as id, '5' as n, named_struct('a', 5, 'b', 'y') as s",
)


def model(fmt: str, bodies: tuple[str, ...] = BODIES) -> str:
    head = (
        "{{ config(materialized='incremental', incremental_strategy='append', "
        f"file_format='{fmt}', schema_contract={CONTRACT}) }}}}\n"
    )
    branches = "".join(
        ("{% if " if i == 0 else "{% elif ") + f"var('v', 1) == {i + 1} %}}\n{body}\n"
        for i, body in enumerate(bodies)
    )
    return head + branches + "{% endif %}\n"


class TestQuarantineFollowsTheModel:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            **{f"q_{fmt}.sql": model(fmt) for fmt in FORMATS},
            **{f"qn_{fmt}.sql": model(fmt, NESTED) for fmt in ("delta", "iceberg")},
        }

    @pytest.fixture(scope="class")
    def runs(self, project):
        return [
            {r.node.name: r for r in run_dbt(["run", "--vars", f"{{v: {v}}}"], expect_pass=None)}
            for v in (1, 2, 3)
        ]

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_a_new_column_reaches_the_quarantine(self, project, runs, fmt):
        kept, quarantined = tables_after(project, runs, f"q_{fmt}", "id, n, note")
        assert kept == [(1, 1, None), (3, 3, None), (5, 5, "y")]
        assert quarantined == [(2, "bad", None), (4, "worse", "x")]

    @pytest.mark.parametrize("fmt", ("delta", "iceberg"))
    def test_a_new_nested_field_reaches_the_quarantine(self, project, runs, fmt):
        kept, quarantined = tables_after(project, runs, f"qn_{fmt}", "id, n, s.a, s.b")
        assert kept == [(1, 1, 1, None), (3, 3, 3, None), (5, 5, 5, "y")]
        assert quarantined == [(2, "bad", 2, None), (4, "worse", 4, "x")]


def tables_after(project, runs, name: str, columns: str) -> tuple[list, list]:
    """`columns` of the model's table and of its quarantine once every run succeeded."""
    for v, results in enumerate(runs, start=1):
        assert str(results[name].status) == "success", (v, results[name].message)
    table = rel(project, name)
    read = lambda t: [  # noqa: E731
        tuple(r) for r in project.run_sql(f"select {columns} from {t} order by id", fetch="all")
    ]
    return read(table), read(f"{table}__quarantine")


CLASH = (
    "select 1 as id, cast(1 as bigint) as n, 'a' as _Contract_Reason",
    "select 2 as id, 'bad' as n, 'b' as _Contract_Reason"
    " union all select 3 as id, '3' as n, 'c' as _Contract_Reason",
)


class TestQuarantineOwnColumnsRefused:
    """A model that outputs a column named like one the quarantine adds (`_contract_reason`,
    here in another case) is refused before its run changes anything, with an error naming the
    column and the two ways out (before: the rows collided in the quarantine insert, after the
    load, which was then taken back)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"q_clash_delta.sql": model("delta", CLASH)}

    def test_the_run_fails_naming_the_column_and_changes_nothing(self, project):
        run_dbt(["run", "--vars", "{v: 1}"])
        results = run_dbt(["run", "--vars", "{v: 2}"], expect_pass=False)
        message = results[0].message or ""
        assert "outputs `_Contract_Reason`, which its quarantine adds" in message, message
        assert "set schema_contract quarantine: false" in message, message
        table = rel(project, "q_clash_delta")
        rows = project.run_sql(f"select id, n from {table} order by id", fetch="all")
        assert [tuple(r) for r in rows] == [(1, 1)]
        history = project.run_sql(f"describe history {table}", fetch="all")
        assert len(history) == 1, history  # the first build's commit only


MISMATCH = (
    "select 1 as id, cast(1 as bigint) as n",
    "select 2 as id, 'bad' as n union all select 3 as id, '3' as n",
)


class TestQuarantineThatCannotHoldTheRows:
    """An existing quarantine stores `n` as bigint (an older model's rows); the model now
    outputs `n` as a string and a row is discarded: Spark refuses the quarantine insert, which
    no change to the quarantine could make fit. The run fails with QuarantineMismatch naming
    both types and the way out, and leaves the table and the quarantine as they were (the
    embedded session had loaded first: its load is taken back; over thrift and Spark Connect
    the quarantine insert comes before the load)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {f"qm_{fmt}.sql": model(fmt, MISMATCH) for fmt in FORMATS}

    @pytest.fixture(scope="class")
    def runs(self, project):
        first = run_dbt(["run", "--vars", "{v: 1}"])
        for fmt in FORMATS:
            table = rel(project, f"qm_{fmt}")
            project.run_sql(
                f"create table {table}__quarantine (id int, n bigint, _contract_reason string,"
                f" _dbt_run_id string) using {'parquet' if fmt == 'parquet' else fmt}"
            )
            project.run_sql(f"insert into {table}__quarantine values (0, 0, 'old', 'inv-old')")
        second = run_dbt(["run", "--vars", "{v: 2}"], expect_pass=False)
        return first, {r.node.name: r for r in second}

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_the_run_fails_and_leaves_both_tables_as_they_were(self, project, runs, fmt):
        result = runs[1][f"qm_{fmt}"]
        assert str(result.status) == "error"
        message = result.message or ""
        assert "cannot hold this run's discarded rows" in message, message
        assert "`n` is BIGINT there, the model outputs STRING" in message, message
        table = rel(project, f"qm_{fmt}")
        read = lambda sql: [tuple(r) for r in project.run_sql(sql, fetch="all")]  # noqa: E731
        assert read(f"select id, n from {table} order by id") == [(1, 1)]
        assert read(f"select id, n, _dbt_run_id from {table}__quarantine") == [(0, 0, "inv-old")]
