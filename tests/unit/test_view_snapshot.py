"""Views and snapshots behind the schema contract (core/contracts/enforce.view_violations, core/materialization/snapshot)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from spark_type_strategies import table_schemas

from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract
from dbt.adapters.spark_contracts.core.contracts.enforce import view_violations
from dbt.adapters.spark_contracts.core.evolution.capabilities import row_of
from dbt.adapters.spark_contracts.core.evolution.operations import AddColumns, AlterColumnType
from dbt.adapters.spark_contracts.core.materialization.snapshot import (
    READ_ONCE_FORMATS,
    SnapshotContractError,
    merge_columns,
    plan_snapshot,
    source_columns,
    source_stage,
    staging_query,
)
from dbt.adapters.spark_contracts.core.schema.diff import diff_schemas
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.schema.types import Field, Struct
from dbt.adapters.spark_contracts.core.settings.config import resolve_settings

INT, BIGINT, STRING = (parse_type(t) for t in ("int", "bigint", "string"))
SETTINGS = resolve_settings("m", None, None, None, {})
FREEZE_ALL = SchemaContract(
    ContractMode.EVOLVE, ContractMode.FREEZE, ContractMode.FREEZE, quarantine=False
)


def s(*fields: tuple) -> Struct:
    return Struct(tuple(Field(n, t) for n, t in fields))


# ---- views ------------------------------------------------------------------------------
def test_frozen_view_refuses_added_removed_and_retyped_columns():
    deployed = s(("id", INT), ("name", STRING))
    added = view_violations(FREEZE_ALL, deployed, s(("id", INT), ("name", STRING), ("x", INT)))
    assert [(v.schema_entity, v.column) for v in added] == [("columns", "x")]
    assert added[0].deployed_type is None and added[0].compiled_type == INT
    removed = view_violations(FREEZE_ALL, deployed, s(("id", INT)))
    assert [(v.column, v.deployed_type, v.compiled_type) for v in removed] == [
        ("name", STRING, None)
    ]
    retyped = view_violations(FREEZE_ALL, deployed, s(("id", BIGINT), ("name", STRING)))
    assert [(v.schema_entity, v.column) for v in retyped] == [("data_type", "id")]


@pytest.mark.parametrize("mode", [m for m in ContractMode if m is not ContractMode.FREEZE])
def test_only_freeze_binds_a_view(mode):
    contract = SchemaContract(mode, mode, mode)
    deployed = s(("id", INT), ("name", STRING))
    assert view_violations(contract, deployed, s(("id", BIGINT), ("x", INT))) == ()


@settings(max_examples=60, deadline=None)
@given(table_schemas(), table_schemas())
def test_frozen_view_violation_iff_the_schema_differs(deployed, compiled):
    """Property: under columns + data_type freeze a view may be replaced exactly when its
    schema (up to nullability and comments) stays the same."""
    changes = [
        c
        for c in diff_schemas(deployed, compiled)
        if type(c).__name__ not in ("NullabilityRelaxed", "NullabilityTightened", "FieldsReordered")
    ]
    assert bool(view_violations(FREEZE_ALL, deployed, compiled)) == bool(changes)


# ---- snapshots --------------------------------------------------------------------------
SNAP = s(("id", INT), ("amount", INT), ("dbt_scd_id", STRING), ("dbt_valid_to", STRING))


def staged(*extra: tuple) -> Struct:
    return s(
        ("id", INT),
        ("amount", BIGINT),
        ("dbt_scd_id", STRING),
        ("dbt_valid_to", STRING),
        *extra,
        ("dbt_change_type", STRING),
        ("dbt_unique_key_1", INT),
    )


def test_snapshot_adds_new_source_columns_and_widens_never_drops():
    planned = plan_snapshot("snap", SNAP, staged(("channel", STRING)), "delta", {}, SETTINGS, None)
    ops = planned.plan.operations
    assert any(isinstance(op, AddColumns) and op.columns[0].path == ("channel",) for op in ops)
    assert any(isinstance(op, AlterColumnType) and op.path == ("amount",) for op in ops)
    assert merge_columns(staged(("channel", STRING))) == (
        "`id`",
        "`amount`",
        "`dbt_scd_id`",
        "`dbt_valid_to`",
        "`channel`",
    )
    # every column the merge inserts is one the planned table holds
    assert all(planned.target.field(c.strip("`")) for c in merge_columns(staged()))
    # a source column gone from the staging stays in the snapshot (no removal planned)
    fewer = s(("id", INT), ("dbt_scd_id", STRING), ("dbt_valid_to", STRING))
    kept = plan_snapshot("snap", SNAP, fewer, "delta", {}, SETTINGS, None)
    assert kept.plan.operations == () and not kept.plan.is_blocked
    assert kept.target.field("amount") is not None


def test_snapshot_contract_freeze():
    frozen = plan_snapshot(
        "snap", SNAP, staged(("channel", STRING)), "delta", {}, SETTINGS, FREEZE_ALL
    )
    assert {(v.schema_entity, v.column) for v in frozen.violations} == {
        ("columns", "channel"),
        ("data_type", "amount"),
    }
    assert frozen.plan.operations == ()  # nothing changes before the violation is raised


@pytest.mark.parametrize(
    "contract",
    [
        SchemaContract(columns=ContractMode.DISCARD_ROW),
        SchemaContract(columns=ContractMode.DISCARD_VALUE),
        SchemaContract(data_type=ContractMode.DISCARD_ROW),
        SchemaContract(data_type=ContractMode.DISCARD_VALUE),
        SchemaContract(data_tests=ContractMode.DISCARD_ROW),
        SchemaContract(data_tests=ContractMode.FREEZE),  # a snapshot's merge has no gate
        SchemaContract(data_type=ContractMode.FREEZE, quarantine=True),  # nothing to keep
    ],
)
def test_snapshot_refuses_row_and_value_discards(contract):
    with pytest.raises(SnapshotContractError, match="not supported on snapshots"):
        plan_snapshot("snap", SNAP, staged(), "delta", {}, SETTINGS, contract)


@pytest.mark.parametrize(
    "added", ["variant", "struct<a: int, b: variant>", "array<struct<x: variant>>", "string"]
)
def test_an_iceberg_snapshot_refuses_a_new_variant_before_any_change(added):
    """Iceberg 1.12 fails the merge into a table whose new VARIANT column no file holds."""
    source = staged(("score__v", parse_type(added)))
    if added == "string":
        assert plan_snapshot("snap", SNAP, source, "iceberg", {}, SETTINGS, None).plan.operations
        return
    with pytest.raises(SnapshotContractError, match="VARIANT column `score__v`"):
        plan_snapshot("snap", SNAP, source, "iceberg", {}, SETTINGS, None)
    # Delta merges into it
    assert plan_snapshot("snap", SNAP, source, "delta", {}, SETTINGS, None).plan.operations


def test_source_columns_drop_dbt_helpers():
    assert source_columns(staged()).names == ("id", "amount", "dbt_scd_id", "dbt_valid_to")


def test_parse_refuses_what_a_materialization_would_ignore():
    from dbt.adapters.spark_contracts.core.settings.config import ConfigError
    from dbt.adapters.spark_contracts.core.settings.validate import NodeConfig, validate_node_config

    def node(config, resource_type="model", materialized=None, run_vars=None):
        return NodeConfig(
            "m", config, run_vars or {}, resource_type=resource_type, materialized=materialized
        )

    cases = [
        (node({"schema_contract": "freeze"}, "seed", "seed"), "not supported on seeds"),
        (
            node({"schema_contract": {"columns": "discard_value"}}, "snapshot", "snapshot"),
            "columns: discard_value is not supported on snapshots",
        ),
        (
            node({}, "snapshot", "snapshot", {"schema_contract": "discard_row"}),
            "not supported on snapshots",
        ),
        (node({"pydantic_contract": "x:Y"}, "model", "view"), "not supported on views"),
        (
            node({"schema_contract": {"data_tests": "discard_row"}}, "snapshot", "snapshot"),
            "data_tests: discard_row is not supported on snapshots",
        ),
    ]
    for config, fragment in cases:
        with pytest.raises(ConfigError, match=fragment):
            validate_node_config(config)
    validate_node_config(node({"schema_contract": "freeze"}, "snapshot", "snapshot"))
    validate_node_config(node({}, "seed", "seed"))


# ---- the snapshot's query as dbt's staging SELECT reads it ---------------------------------
@pytest.mark.parametrize("fmt", ["delta", "iceberg", "hudi"])
def test_the_staging_query_is_marked_non_deterministic_only_where_the_merge_takes_it(fmt):
    sql = "select id, n from src -- the model's last line is a comment"
    read = staging_query(sql, fmt, "snap__dbt_snapshot_query")
    if fmt in READ_ONCE_FORMATS:
        assert read.startswith("select * from (\n" + sql + "\n)") and "rand()" in read
        assert read.endswith(") where rand() >= 0")  # the comment ends on its own line
        assert source_stage("`s`.`snap`", "v", fmt, "0123-4567-89ab-cdef") is None
    elif fmt == "iceberg":  # its MERGE refuses a non-deterministic source: through a view
        assert read == "select * from snap__dbt_snapshot_query"
    else:  # the query as it is
        assert read == sql
        assert source_stage("`s`.`snap`", "v", fmt, "0123-4567-89ab-cdef") is None


@pytest.mark.parametrize("fmt", ["iceberg"])
def test_the_source_stage_writes_the_query_once_and_points_its_view_at_it(fmt):
    """Where the staging SELECT reads the query through its view, the load first writes the
    query's rows from that view into a table of the run's own (named by its invocation, beside
    the snapshot, in the format's stage format), then points the view at it; the drop after."""
    stage = source_stage(
        "`iceberg`.`s`.`snap`", "snap__dbt_snapshot_query", fmt, "0123-4567-89ab-cd"
    )
    assert stage is not None
    assert stage.table == "`iceberg`.`s`.`snap__dbt_source_0123456789ab`"
    drop, create, point = stage.statements()
    assert drop == stage.drop and drop.startswith(f"drop table if exists {stage.table}")
    assert create == (
        f"create table {stage.table} using {row_of(fmt).stage_format} "
        "as select * from snap__dbt_snapshot_query"
    )
    assert point == (
        f"create or replace temporary view snap__dbt_snapshot_query as select * from {stage.table}"
    )


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_the_staging_view_is_the_snapshots_temporary_view_and_reads_the_staging_query(fmt):
    """One owner for the staging view's name (relation.SnapshotStaging): the model's view name
    (`<snapshot>__dbt_tmp`, as dbt-spark names its persistent staging view), unqualified (a
    temporary view), a view (dbt's post_snapshot drops it as one); and the plan's view of a
    snapshot, which reads it, has another name."""
    from dbt.adapters.spark_contracts.relation import (
        SnapshotStaging,
        SparkContractsRelation,
        model_view,
    )

    snapshot = SparkContractsRelation.create(
        database="iceberg" if fmt == "iceberg" else None, schema="snaps", identifier="orders_snap"
    )
    staging = SnapshotStaging.of(snapshot, "select 1 as id", fmt)
    assert staging.relation.render() == "orders_snap__dbt_tmp"
    assert staging.relation.type == "view"
    source = "orders_snap__dbt_snapshot_query"
    assert staging.query == staging_query("select 1 as id", fmt, source)
    assert (staging.source is not None) == (fmt == "iceberg")
    if staging.source is not None:  # a temporary view: unqualified
        assert staging.source.render() == source
    assert model_view(snapshot, snapshot=True).render() != staging.relation.render()
