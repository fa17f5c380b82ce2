"""Microbatch loads (core/materialization/microbatch.py): the window, the per-format load, the select list in
table order, the refusals; and microbatch as a load strategy of the write path."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.evolution.operations import AddColumns, FullRefresh, Plan
from dbt.adapters.spark_contracts.core.evolution.plan import Policy, plan_schema_change
from dbt.adapters.spark_contracts.core.materialization.microbatch import (
    BatchLoad,
    BatchWindow,
    Microbatch,
    check_batch_plan,
    check_microbatch_config,
    load_for,
    plan_microbatch,
    select_list,
)
from dbt.adapters.spark_contracts.core.materialization.write_path import (
    WritePath,
    decide_write_path,
)
from dbt.adapters.spark_contracts.core.schema.diff import diff_schemas
from dbt.adapters.spark_contracts.core.schema.types import Field, Primitive, Struct
from dbt.adapters.spark_contracts.core.settings.config import ConfigError
from dbt.adapters.spark_contracts.core.settings.validate import NodeConfig, validate_node_config

INT, TS, STRING = Primitive("int"), Primitive("timestamp"), Primitive("string")
START = datetime(2020, 1, 2, tzinfo=timezone.utc)
END = datetime(2020, 1, 3, tzinfo=timezone.utc)
BATCH = {"id": "20200102", "event_time_start": START, "event_time_end": END}
CONFIG = {"materialized": "incremental", "incremental_strategy": "microbatch"}


def s(*names: str) -> Struct:
    types = {"id": INT, "event_time": TS}
    return Struct(tuple(Field(n, types.get(n, STRING)) for n in names))


def plan(fmt: str = "delta", **config: Any) -> Microbatch:
    merged = {**CONFIG, "event_time": "event_time", **config}
    return plan_microbatch("model.p.m", fmt, merged, BATCH, s("id", "event_time", "v"))


def test_the_window_is_rendered_as_dbt_filters_the_refs() -> None:
    window = BatchWindow("event_time", START, END)
    assert window.predicate() == (
        "`event_time` >= '2020-01-02 00:00:00+00:00' and `event_time` < '2020-01-03 00:00:00+00:00'"
    )
    assert window.predicate("t").startswith("t.`event_time` >= ")


@pytest.mark.parametrize(
    ("fmt", "load"),
    [
        ("delta", BatchLoad.REPLACE_WHERE),
        ("iceberg", BatchLoad.MERGE_WINDOW),
        ("parquet", BatchLoad.PARTITION_OVERWRITE),
    ],
)
def test_each_format_has_its_load(fmt: str, load: BatchLoad) -> None:
    assert load_for(fmt) is load
    assert load.replaces_window is (fmt != "parquet")


def test_delta_replaces_the_window_in_one_insert() -> None:
    batch = plan("delta")
    sql = batch.load_sql("s.t", "v__dbt_tmp", select_list(["id", "event_time", "v"], s("id", "v")))
    assert sql.startswith(
        "insert into s.t replace where `event_time` >= '2020-01-02 00:00:00+00:00'"
    )
    assert "select `id`, null as `event_time`, `v` from v__dbt_tmp where case when" in sql
    assert "raise_error" in sql and "model.p.m" in sql


def test_iceberg_merges_one_marker_row_deleting_the_window() -> None:
    batch = plan("iceberg")
    sql = batch.load_sql("i.s.t", "src", select_list(["id", "event_time"], s("id", "event_time")))
    assert "union all select null, null, true" in sql
    assert "on s.`__dbt_batch_delete` and t.`event_time` >= '2020-01-02 00:00:00+00:00'" in sql
    assert "when matched then delete" in sql
    assert (
        "when not matched and not s.`__dbt_batch_delete` then insert (`id`, `event_time`) "
        "values (s.`id`, s.`event_time`)"
    ) in sql


def test_partition_overwrite_is_dbt_sparks_macro() -> None:
    batch = plan("parquet", partition_by=["d"])
    with pytest.raises(ValueError, match="dbt-spark"):
        batch.load_sql("t", "src", ())


@given(
    st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), unique=True, min_size=1),
    st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f"]), unique=True),
)
def test_select_list_follows_the_table_order(table: list[str], written: list[str]) -> None:
    columns = select_list(table, s(*written))
    assert [c.name for c in columns] == [f"`{n}`" for n in table]
    for column, name in zip(columns, table, strict=True):
        assert column.sql == (f"`{name}`" if name in written else f"null as `{name}`")


@pytest.mark.parametrize(
    ("config", "batch", "message"),
    [
        ({"event_time": None}, BATCH, "needs `event_time`"),
        ({"event_time": "missing"}, BATCH, "`event_time: missing` is not a column"),
        ({"event_time": "event_time"}, None, "no batch window"),
        ({"event_time": "event_time"}, {"event_time_start": START}, "no batch window"),
    ],
)
def test_a_batch_without_window_or_column_is_refused(config, batch, message) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        plan_microbatch("model.p.m", "delta", {**CONFIG, **config}, batch, s("id", "event_time"))
    assert "model.p.m" in str(err.value)


def test_parquet_needs_partition_by_at_run_time() -> None:
    with pytest.raises(ConfigError, match="needs `partition_by`"):
        plan("parquet")
    assert plan("parquet", partition_by="d").load is BatchLoad.PARTITION_OVERWRITE


def test_event_time_takes_the_output_columns_spelling() -> None:
    assert plan("delta", event_time="EVENT_TIME").window.event_time == "event_time"


@pytest.mark.parametrize(
    ("config", "refused"),
    [
        ({"file_format": "parquet"}, True),
        ({"file_format": "parquet", "partition_by": "d"}, False),
        ({"file_format": "delta"}, False),
        ({"file_format": "iceberg"}, False),
        ({}, False),  # the adapter's default format: delta
        ({"file_format": "parquet", "incremental_strategy": "append"}, False),
        ({"file_format": "parquet", "materialized": "table"}, False),
    ],
)
def test_parse_time_check(config: dict[str, Any], refused: bool) -> None:
    node = NodeConfig(model="model.p.m (models/m.sql)", config={**CONFIG, **config}, run_vars={})
    if refused:
        with pytest.raises(ConfigError) as err:
            validate_node_config(node)
        message = str(err.value)
        assert "model.p.m (models/m.sql)" in message and "file_format parquet" in message
        assert "partition_by" in message and "delta or iceberg" in message
    else:
        validate_node_config(node)
        check_microbatch_config(node.model, node.config)


def _decide(fmt: str, deployed: Struct, compiled: Struct):
    diff = diff_schemas(deployed, compiled)
    props = {"delta.enableTypeWidening": "true"}
    change = plan_schema_change(diff, fmt, props, Policy(), deployed, compiled)
    return decide_write_path(change, fmt, "microbatch", deployed, compiled)


def test_a_new_column_rides_in_a_delta_batch_and_is_a_step_on_iceberg() -> None:
    deployed, compiled = s("id", "event_time"), s("id", "event_time", "extra")
    assert _decide("delta", deployed, compiled).path is WritePath.IN_WRITE
    iceberg = _decide("iceberg", deployed, compiled)
    assert iceberg.path is WritePath.MULTI_STEP
    assert "iceberg cannot evolve the schema inside a microbatch write" in iceberg.reason
    assert _decide("delta", deployed, deployed).path is WritePath.NO_CHANGE


def test_a_batch_refuses_a_full_refresh_plan() -> None:
    batch = plan("delta")
    with pytest.raises(ConfigError) as err:
        check_batch_plan(batch, Plan("delta", (FullRefresh("type narrowed"),)))
    message = str(err.value)
    assert "model.p.m" in message and "type narrowed" in message
    assert "event_time in [2020-01-02 00:00:00+00:00, 2020-01-03 00:00:00+00:00)" in message
    check_batch_plan(batch, Plan("delta", (AddColumns(()),)))  # other plans go on
