"""The write path decision (core/materialization/write_path.py) and the durable intent (core/recovery/intent.py)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spark_type_strategies import table_schemas

from dbt.adapters.spark_contracts.core.contracts.load_select import (
    LoadSql,
)
from dbt.adapters.spark_contracts.core.evolution.plan import Policy, plan_schema_change
from dbt.adapters.spark_contracts.core.evolution.steps import (
    DropAdded,
    DropTable,
    Rename,
    Step,
    UnsetProperty,
)
from dbt.adapters.spark_contracts.core.materialization.write_path import (
    PARTITION_OVERWRITE,
    WriteDecision,
    WritePath,
    decide_write_path,
    load_settings,
    merged_by_name,
    needs_stage,
    plan_change,
    quarantine_pends,
)
from dbt.adapters.spark_contracts.core.recovery.intent import (
    Commit,
    Intent,
    IntentUnreadable,
    commit_tag,
    find_intent,
    foreign_commits,
)
from dbt.adapters.spark_contracts.core.schema.diff import FieldsReordered, diff_schemas
from dbt.adapters.spark_contracts.core.schema.types import Array, Field, Primitive, Struct
from dbt.adapters.spark_contracts.core.settings.config import resolve_settings

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


def test_a_table_rebuild_writes_any_change_in_its_replace():
    deployed = s(("id", INT), ("gone", STRING))
    compiled = s(("id", BIGINT), ("c", STRING))
    for fmt in ("delta", "iceberg", "parquet"):
        write = decide(
            deployed, compiled, fmt, "table", allow_column_removal=True, allow_full_refresh=True
        )
        assert write.path is WritePath.REPLACE
        assert not write.multi_step and not write.evolves_in_write
    assert decide(deployed, deployed, "delta", "table").path is WritePath.NO_CHANGE


def test_iceberg_and_parquet_take_steps():
    deployed, compiled = s(("id", INT)), s(("id", INT), ("c", STRING))
    assert decide(deployed, compiled, "iceberg").path is WritePath.MULTI_STEP
    assert decide(deployed, compiled, "parquet", "append").path is WritePath.MULTI_STEP
    assert decide(deployed, compiled, "delta", "insert_overwrite").path is WritePath.MULTI_STEP


def test_defaults_drops_and_other_widenings_take_steps():
    from dbt.adapters.spark_contracts.core.evolution.plan import ColumnEvolution

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
        (("a", "b"),),
        (
            Step("ALTER", DropAdded("s.t", (("a", "b"),))),
            Step("RENAME", Rename("s.t__b", "s.t", True)),
            Step("SWAP", stands=True),
            Step("MARK", UnsetProperty("s.t", "k")),
            Step("CREATE", DropTable("s.t__x")),
        ),
    )
    assert Intent.from_json(intent.to_json()) == intent
    assert find_intent({"DBT_SPARK_CONTRACTS.INTENT": intent.to_json()}) == intent
    assert find_intent({"other": "x"}) is None
    older = json.loads(intent.to_json()) | {"writer": "local-123"}  # 0.x runs recorded it
    assert Intent.from_json(json.dumps(older)) == intent


# Spark's default redaction patterns (spark.redaction.regex, spark.sql.redaction.options.regex):
# SHOW TBLPROPERTIES hides a property whose key or value matches one
SPARK_REDACTION = re.compile(r"(?i)secret|password|token|access[.]?key|url")


@settings(max_examples=80, deadline=None)
@given(
    st.text(min_size=1, max_size=12).map(lambda s: f"model.p.{s}_url"),
    st.lists(st.sampled_from(["api_token", "avatar_url", "secret", "passwords", "ok"]), max_size=3),
)
def test_intent_property_is_never_redacted_and_round_trips(unique_id, columns):
    intent = Intent(
        "inv",
        unique_id,
        f"s.{unique_id.rsplit('.', 1)[-1]}",
        "delta",
        None,
        commit_tag("inv", unique_id),
        tuple((c,) for c in columns),
        tuple(
            Step(f"ALTER TABLE t ADD COLUMNS ({c} STRING)", DropAdded("t", ((c,),)))
            for c in columns
        ),
    )
    assert SPARK_REDACTION.search(intent.to_json())  # the plain JSON would be redacted
    value = intent.to_property()
    assert SPARK_REDACTION.search(value) is None and "'" not in value and "\\" not in value
    assert find_intent({"dbt_spark_contracts.intent": value}) == intent
    assert find_intent({"dbt_spark_contracts.intent": intent.to_json()}) == intent  # older runs


def test_a_redacted_intent_is_a_typed_error_naming_the_repair():
    with pytest.raises(IntentUnreadable, match="UNSET TBLPROPERTIES"):
        find_intent({"dbt_spark_contracts.intent": "*********(redacted)"})


def test_foreign_commits_are_the_ones_not_tagged_by_the_run():
    own = commit_tag("inv", "model.p.m")
    commits = [
        Commit(4, "SET TBLPROPERTIES", own),
        Commit(5, "WRITE", "streaming"),
        Commit(6, "MERGE", None),
    ]
    assert [c.version for c in foreign_commits(commits, own)] == [5, 6]
    assert foreign_commits(commits[:1], own) == ()


def _load(samples: bool = False, counts: bool = False, quarantine: bool = False) -> LoadSql:
    metrics = (("rows_discarded", "count_if(x IS NULL)"),) if counts else ()
    return LoadSql(
        "SELECT x FROM v",
        ("x",),
        violation_sample_sql="SELECT 1" if samples else None,
        discard_metrics=metrics,
        source="v",
        quarantine_row="x, 'why' AS `_contract_reason`" if quarantine else None,
        quarantine_where="x IS NULL" if quarantine else None,
        run_id="r1",
    )


@given(
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["delta", "iceberg", "parquet"]),
)
def test_the_output_is_staged_only_when_read_twice(
    multi_step, contract, samples, counts, quarantine, observable, table_format
):
    """A quarantining run (a microbatch batch too) goes through a pending table, read from a
    cache (run_plan.plan_run), on every format and method: it needs no durable stage."""
    write = WriteDecision(WritePath.MULTI_STEP if multi_step else WritePath.IN_WRITE)
    load = _load(samples, counts, quarantine) if contract else None
    staged = needs_stage(write, load, observable, table_format)
    assert quarantine_pends(load) == (contract and quarantine)
    assert quarantine_pends(load, "microbatch") == (contract and quarantine)
    read_twice = contract and (samples or (counts and not observable))
    assert staged == (multi_step or read_twice)


def test_the_quarantine_select_reads_the_discarded_rows_with_their_run():
    load = _load(quarantine=True)
    assert load.quarantine_select == (
        "SELECT x, 'why' AS `_contract_reason`, 'r1' AS `_dbt_run_id` FROM v WHERE x IS NULL"
    )
    assert load.quarantine_from("m") == (
        "SELECT x, 'why' AS `_contract_reason`, 'r1' AS `_dbt_run_id` FROM m WHERE x IS NULL"
    )
    assert _load().quarantine_select is None


@given(st.sampled_from(["delta", "iceberg", "parquet"]), st.sampled_from(["merge", "append"]))
def test_a_load_that_reads_its_source_twice_is_staged(table_format, strategy):
    write = WriteDecision(WritePath.NO_CHANGE)
    staged = needs_stage(write, None, True, table_format, strategy)
    assert staged == (table_format == "iceberg" and strategy == "merge")


def test_the_count_query_is_built_from_the_same_metrics():
    load = _load(counts=True)
    assert load.discard_count_sql == "SELECT count_if(x IS NULL) AS rows_discarded FROM v"
    assert _load().discard_count_sql is None


@pytest.mark.parametrize(
    "evolution, on_schema_change, mode, planned",
    [
        ({}, None, "schema_evolution", True),
        (None, "append_new_columns", "on_schema_change: append_new_columns", True),
        (None, "ignore", "on_schema_change: ignore", False),
    ],
)
def test_the_run_plans_by_evolution_or_on_schema_change(evolution, on_schema_change, mode, planned):
    deployed, compiled = s(("id", BIGINT)), s(("id", BIGINT), ("note", STRING))
    settings = resolve_settings("m", evolution, None, on_schema_change, {})
    diff, plan, chosen = plan_change(deployed, compiled, "delta", {}, settings, None)
    assert chosen.startswith(mode)
    assert [c.dotted for c in diff.changes] == ["note"]
    assert bool(plan.operations) is planned


# ---------------------------------------------------------------- the load's SQL confs

STRATEGIES = ("append", "merge", "insert_overwrite", "microbatch", "delete+insert", "table")
FORMATS = ("delta", "iceberg", "parquet")


@given(st.sampled_from(STRATEGIES), st.sampled_from(FORMATS), st.booleans(), st.booleans())
def test_load_settings_set_what_the_load_needs_and_nothing_else(
    strategy, table_format, evolves_in_write, partitioned
):
    settings = dict(load_settings(strategy, table_format, evolves_in_write, partitioned))
    dynamic = partitioned and strategy in ("insert_overwrite", "microbatch")
    assert (settings.get(PARTITION_OVERWRITE[0]) == "DYNAMIC") == dynamic
    auto_merge = "spark.databricks.delta.schema.autoMerge.enabled"
    merges = table_format == "delta" and evolves_in_write and strategy in ("append", "microbatch")
    assert (settings.get(auto_merge) == "true") == merges
    assert set(settings) <= {PARTITION_OVERWRITE[0], auto_merge}


def test_a_partitioned_insert_overwrite_is_planned_with_dynamic_overwrite():
    """dbt-spark's incremental macro set it in Jinja for the model's session and left it set;
    the run plans it for its load (the runner sets it for that statement and puts it back)."""
    assert load_settings("insert_overwrite", "parquet", False, True) == (PARTITION_OVERWRITE,)
    assert load_settings("insert_overwrite", "parquet", False, False) == ()
    assert load_settings("append", "delta", False, True) == ()
