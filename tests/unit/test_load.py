"""core/materialization/load.py: the run's one write, typed and rendered in one place."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.evolution.operations import Plan
from dbt.adapters.spark_contracts.core.evolution.plan import Policy, plan_schema_change
from dbt.adapters.spark_contracts.core.materialization.load import (
    Append,
    InsertOverwrite,
    LoadOptions,
    Merge,
    Rebuild,
    ReplaceWindow,
    columns_after,
    merge_columns,
    plan_load,
    render_load,
)
from dbt.adapters.spark_contracts.core.materialization.microbatch import plan_microbatch
from dbt.adapters.spark_contracts.core.schema.diff import diff_schemas
from dbt.adapters.spark_contracts.core.schema.types import Field, Primitive, Struct
from tests.unit.spark_type_strategies import table_schemas

INT, STRING = Primitive("int"), Primitive("string")


def s(*fields: tuple) -> Struct:
    return Struct(tuple(Field(n, t) for n, t in fields))


def planned(deployed: Struct, compiled: Struct, fmt: str = "delta", **policy: bool) -> Plan:
    props = {"delta.enableTypeWidening": "true"}
    return plan_schema_change(
        diff_schemas(deployed, compiled), fmt, props, Policy(**policy), deployed, compiled
    )


def load(strategy: str, deployed: Struct, written: Struct, fmt: str = "delta", **kw):
    options = kw.pop("options", LoadOptions())
    plan = kw.pop("plan", Plan(fmt))
    return plan_load(
        strategy,
        "db.t",
        "v",
        fmt,
        deployed,
        written,
        plan,
        kw.pop("in_write", False),
        kw.pop("microbatch", None),
        options,
    )


def test_options_from_a_models_config():
    options = LoadOptions.from_config(
        {
            "unique_key": "id",
            "incremental_predicates": ["x > 1"],
            "merge_exclude_columns": ["u"],
            "partition_by": ["d", "h"],
        }
    )
    assert options == LoadOptions(("id",), ("x > 1",), (), ("u",), ("d", "h"))
    assert LoadOptions.from_config({"unique_key": ["a", "b"]}).unique_key == ("a", "b")
    assert LoadOptions.from_config({}) == LoadOptions()
    # what makes a merge narrowed (a unique gate is then checked after it)
    assert options.narrowed and options.column_lists
    assert LoadOptions.from_config({"predicates": ["x > 1"]}).narrowed
    assert not LoadOptions.from_config({"predicates": ["x > 1"]}).column_lists
    assert LoadOptions.from_config({"merge_update_columns": ["a"]}).column_lists
    assert not LoadOptions.from_config({"unique_key": "id"}).narrowed


def test_an_append_writes_by_name_what_the_table_keeps():
    deployed, written = s(("id", INT), ("n", INT)), s(("id", INT), ("n", INT), ("extra", STRING))
    appended = load("append", deployed, written)
    assert appended == Append("db.t", "v", ("`id`", "`n`"))  # `extra` is not in the table
    assert render_load(appended) == "insert into db.t by name\nselect `id`, `n` from v"
    # a column the plan adds first is written
    adds = load("append", deployed, written, plan=planned(deployed, written))
    assert adds.columns == ("`id`", "`n`", "`extra`")


def test_a_merge_by_key_and_predicates_with_column_lists():
    table = s(("id", INT), ("n", INT), ("u", STRING))
    options = LoadOptions(
        unique_key=("id",), predicates=("DBT_INTERNAL_DEST.n > 0",), exclude_columns=("U",)
    )
    merged = load("merge", table, table, options=options)
    assert isinstance(merged, Merge)
    assert merged.on == ("DBT_INTERNAL_DEST.n > 0", "DBT_INTERNAL_SOURCE.id = DBT_INTERNAL_DEST.id")
    assert merged.insert == ("`id`", "`n`", "`u`") and merged.update == ("`id`", "`n`")
    sql = render_load(merged)
    assert sql.startswith(
        "merge into db.t as DBT_INTERNAL_DEST\n    using v as DBT_INTERNAL_SOURCE"
    )
    assert "on DBT_INTERNAL_DEST.n > 0 and DBT_INTERNAL_SOURCE.id = DBT_INTERNAL_DEST.id" in sql
    assert "update set DBT_INTERNAL_DEST.`id` = DBT_INTERNAL_SOURCE.`id`, " in sql
    assert "DBT_INTERNAL_DEST.`u` =" not in sql
    assert sql.endswith(
        "insert (`id`, `n`, `u`) values (DBT_INTERNAL_SOURCE.`id`, "
        "DBT_INTERNAL_SOURCE.`n`, DBT_INTERNAL_SOURCE.`u`)"
    )


def test_a_keyless_merge_matches_nothing_and_an_evolving_merge_uses_star_actions():
    table = s(("id", INT))
    assert load("merge", table, table).on == ("FALSE",)
    # predicates without a key still match nothing: the merge only inserts (as dbt-spark's)
    only_predicates = LoadOptions(predicates=("DBT_INTERNAL_DEST.id > 0",))
    assert load("merge", table, table, options=only_predicates).on == (
        "DBT_INTERNAL_DEST.id > 0",
        "FALSE",
    )
    assert "on DBT_INTERNAL_DEST.id > 0 and FALSE" in render_load(
        load("merge", table, table, options=only_predicates)
    )
    evolving = render_load(load("merge", table, s(("id", INT), ("c", STRING)), in_write=True))
    assert evolving.startswith("merge with schema evolution into db.t")
    assert "update set *" in evolving and "insert *" in evolving


def test_merge_update_columns_narrow_the_update_case_insensitively():
    insert, update = merge_columns(["id", "Name", "x"], update_columns=["name"])
    assert insert == ("`id`", "`Name`", "`x`") and update == ("`Name`",)
    assert merge_columns(["id"], exclude_columns=["ID"]) == (("`id`",), ())


@pytest.mark.parametrize(
    "fmt,head",
    [
        ("delta", "insert overwrite table db.t partition (d) by name"),
        ("parquet", "insert overwrite table db.t partition (d) by name"),
        ("iceberg", "insert overwrite db.t by name"),  # Iceberg takes no `table`, no partition
    ],
)
def test_insert_overwrite_per_format(fmt, head):
    deployed, written = s(("id", INT), ("gone", INT), ("d", STRING)), s(("id", INT), ("d", STRING))
    overwrite = load(
        "insert_overwrite", deployed, written, fmt, options=LoadOptions(partition_by=("d",))
    )
    assert isinstance(overwrite, InsertOverwrite)
    # a column the model no longer outputs is written NULL
    assert render_load(overwrite) == f"{head}\nselect `id`, null as `gone`, `d` from v"


def test_a_microbatch_batch_replaces_its_window_or_needs_a_partition():
    table = s(("id", INT), ("ts", Primitive("timestamp")))
    config = {"event_time": "ts", "batch_size": "day"}
    batch = {"event_time_start": datetime(2026, 1, 1), "event_time_end": datetime(2026, 1, 2)}
    delta = plan_microbatch("m", "delta", config, batch, table)
    window = load("microbatch", table, table, microbatch=delta)
    assert isinstance(window, ReplaceWindow)
    assert render_load(window).startswith("insert into db.t replace where ")
    parquet_config = {**config, "partition_by": ["ts"]}
    parquet = plan_microbatch("m", "parquet", parquet_config, batch, table)
    by_partition = load(
        "microbatch",
        table,
        table,
        "parquet",
        microbatch=parquet,
        options=LoadOptions.from_config(parquet_config),
    )
    assert isinstance(by_partition, InsertOverwrite)
    assert render_load(by_partition).startswith("insert overwrite table db.t partition (ts)")


def test_a_rebuild_is_dbt_sparks_create_statement():
    table = s(("id", INT))
    rebuild = load("table", table, table)
    assert rebuild == Rebuild("db.t", "v")
    with pytest.raises(ValueError, match="create_table_as"):
        render_load(rebuild)


@settings(max_examples=150, deadline=None)
@given(table_schemas(), table_schemas(), st.sampled_from(["delta", "iceberg", "parquet"]))
def test_columns_after_the_steps_are_the_tables_columns_once_they_ran(deployed, compiled, fmt):
    """What the load writes names only columns the table has once the plan's steps ran: an
    added column is there, a dropped one is gone, a rewrite's schema replaces the table's."""
    plan = planned(deployed, compiled, fmt, allow_column_removal=True)
    after = columns_after(deployed, compiled, plan, False)
    added = {
        c.path[0].lower()
        for op in plan.operations
        for c in getattr(op, "columns", ())
        if len(c.path) == 1
    }
    dropped = {
        p[0].lower() for op in plan.operations for p in getattr(op, "paths", ()) if len(p) == 1
    }
    rewritten = any(hasattr(op, "target_schema") for op in plan.operations)
    if not rewritten:
        deployed_names = {n.lower() for n in deployed.names}
        assert {n.lower() for n in after} == (deployed_names | added) - dropped
    appended = load("append", deployed, compiled, fmt, plan=plan)
    assert {c.strip("`").lower() for c in appended.columns} <= {n.lower() for n in after}


@pytest.mark.parametrize(
    "fmt,logged,stage,history,purges,batch,own_catalog",
    [
        ("delta", True, "parquet", "delta", False, "REPLACE_WHERE", False),
        ("iceberg", True, "iceberg", "iceberg", True, "MERGE_WINDOW", True),
        ("parquet", False, "parquet", "delta", False, "PARTITION_OVERWRITE", False),
        ("csv", False, "parquet", "delta", False, "PARTITION_OVERWRITE", False),
    ],
)
def test_every_per_format_fact_of_the_run_is_the_capability_rows(
    fmt, logged, stage, history, purges, batch, own_catalog
):
    """The run path asks the capability row, never the format's name: a table with a log, its
    stage's and history's format, DROP ... PURGE, how a batch replaces its window."""
    from dbt.adapters.spark_contracts.core.evolution.capabilities import (
        describable,
        drop_sql,
        row_of,
    )
    from dbt.adapters.spark_contracts.core.evolution.capabilities import logged as is_logged
    from dbt.adapters.spark_contracts.core.materialization.microbatch import load_for

    row = row_of(fmt)
    assert is_logged(fmt) is logged and describable(fmt) is (not logged)
    assert (row.stage_format, row.history_format, row.in_own_catalog) == (
        stage,
        history,
        own_catalog,
    )
    assert drop_sql("db.t", fmt).endswith(" purge") is purges
    assert load_for(fmt).name == batch
