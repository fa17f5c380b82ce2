"""The write path decision (core/write_path.py) and the durable intent (core/intent.py)."""

from __future__ import annotations

from hypothesis import given, settings
from spark_type_strategies import table_schemas

from dbt.adapters.spark_contracts.core.diff import FieldsReordered, diff_schemas
from dbt.adapters.spark_contracts.core.intent import (
    Commit,
    Intent,
    commit_tag,
    find_intent,
    foreign_commits,
)
from dbt.adapters.spark_contracts.core.plan import Policy, plan_schema_change
from dbt.adapters.spark_contracts.core.types import Array, Field, Primitive, Struct
from dbt.adapters.spark_contracts.core.write_path import (
    WritePath,
    decide_write_path,
    merged_by_name,
)

INT, BIGINT, STRING = Primitive("int"), Primitive("bigint"), Primitive("string")


def s(*fields: tuple) -> Struct:
    return Struct(tuple(Field(n, t) for n, t in fields))


def decide(deployed: Struct, compiled: Struct, fmt: str = "delta", strategy: str = "merge", **kw):
    props = {"delta.enableTypeWidening": "true"}
    policy = Policy(**kw)
    plan = plan_schema_change(
        diff_schemas(deployed, compiled), fmt, props, policy, deployed, compiled
    )
    return decide_write_path(plan, fmt, strategy, deployed, compiled)


def test_additive_delta_changes_ride_in_the_write():
    deployed = s(("id", INT), ("st", s(("a", INT))), ("arr", Array(s(("x", INT)))))
    compiled = s(
        ("id", BIGINT),
        ("st", s(("a", INT), ("b", STRING))),
        ("arr", Array(s(("x", INT), ("y", STRING)))),
        ("c", STRING),
    )
    for strategy in ("merge", "append"):
        assert decide(deployed, compiled, strategy=strategy).path is WritePath.IN_WRITE


def test_no_change_is_no_change():
    schema = s(("id", INT))
    assert decide(schema, schema).path is WritePath.NO_CHANGE


def test_iceberg_and_parquet_take_steps():
    deployed, compiled = s(("id", INT)), s(("id", INT), ("c", STRING))
    assert decide(deployed, compiled, "iceberg").path is WritePath.MULTI_STEP
    assert decide(deployed, compiled, "parquet", "append").path is WritePath.MULTI_STEP
    assert decide(deployed, compiled, "delta", "insert_overwrite").path is WritePath.MULTI_STEP


def test_defaults_drops_and_other_widenings_take_steps():
    from dbt.adapters.spark_contracts.core.plan import ColumnEvolution

    deployed, compiled = s(("id", INT)), s(("id", INT), ("c", STRING))
    with_default = decide(deployed, compiled, columns={"c": ColumnEvolution(default="'x'")})
    assert with_default.path is WritePath.MULTI_STEP
    dropped = decide(s(("id", INT), ("c", STRING)), s(("id", INT)), allow_column_removal=True)
    assert dropped.path is WritePath.MULTI_STEP
    to_double = decide(s(("n", INT)), s(("n", Primitive("double"))))
    assert to_double.path is WritePath.MULTI_STEP


def test_a_field_added_mid_struct_takes_steps():
    deployed = s(("st", s(("a", INT), ("c", INT))))
    compiled = s(("st", s(("a", INT), ("b", INT), ("c", INT))))
    decision = decide(deployed, compiled)
    assert decision.path is WritePath.MULTI_STEP and "last" in decision.reason


def test_merge_column_lists_take_steps():
    deployed, compiled = s(("id", INT)), s(("id", INT), ("c", STRING))
    props = {"delta.enableTypeWidening": "true"}
    plan = plan_schema_change(
        diff_schemas(deployed, compiled), "delta", props, Policy(), deployed, compiled
    )
    assert decide_write_path(plan, "delta", "merge", deployed, compiled, True).multi_step


@settings(max_examples=150, deadline=None)
@given(table_schemas(), table_schemas())
def test_in_write_result_is_the_compiled_schema(deployed, compiled):
    """Whenever the write path is IN_WRITE, what the evolving write leaves has every compiled
    column with its compiled type, and no struct reorder for the next run to trip on."""
    decision = decide(deployed, compiled)
    if decision.path is not WritePath.IN_WRITE:
        return
    after = merged_by_name(deployed, compiled)
    changes = diff_schemas(after, compiled)
    assert not any(isinstance(c, FieldsReordered) for c in changes)
    assert {f.name.lower() for f in compiled.fields} <= {f.name.lower() for f in after.fields}


def test_intent_round_trip_and_lookup():
    intent = Intent(
        "inv",
        "model.p.m",
        "s.t",
        "delta",
        3,
        commit_tag("inv", "model.p.m"),
        "",
        (("a", "b"),),
        ("ALTER",),
    )
    assert Intent.from_json(intent.to_json()) == intent
    assert find_intent({"DBT_SPARK_CONTRACTS.INTENT": intent.to_json()}) == intent
    assert find_intent({"other": "x"}) is None


def test_foreign_commits_are_the_ones_not_tagged_by_the_run():
    own = commit_tag("inv", "model.p.m")
    commits = [
        Commit(4, "SET TBLPROPERTIES", own),
        Commit(5, "WRITE", "streaming"),
        Commit(6, "MERGE", None),
    ]
    assert [c.version for c in foreign_commits(commits, own)] == [5, 6]
    assert foreign_commits(commits[:1], own) == ()
