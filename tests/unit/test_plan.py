"""Planner: every row of SPEC §4 on delta, iceberg and parquet, gates, strategies, on_schema_change."""

from __future__ import annotations

import pytest

from dbt.adapters.spark_contracts.core.evolution.capabilities import (
    COLUMN_DEFAULTS,
    COLUMN_MAPPING,
    TYPE_WIDENING,
    capabilities_for,
)
from dbt.adapters.spark_contracts.core.evolution.operations import (
    AddColumns,
    AddNotNullCheck,
    AlterColumnType,
    Backfill,
    DropColumns,
    DropNotNull,
    EnableTableFeature,
    FullRefresh,
    NewColumn,
    Plan,
    Rewrite,
    SetColumnDefault,
)
from dbt.adapters.spark_contracts.core.evolution.plan import (
    ColumnEvolution,
    Policy,
    plan_on_schema_change,
    plan_schema_change,
)
from dbt.adapters.spark_contracts.core.schema.diff import (
    ColumnRemoved,
    TypeNarrowed,
    diff_schemas,
)
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.schema.types import Struct

INT, BIGINT, STRING = (parse_type(t) for t in ("int", "bigint", "string"))
FORMATS = ("delta", "iceberg", "parquet")


def S(columns: str) -> Struct:
    schema = parse_type(f"struct<{columns}>")
    assert isinstance(schema, Struct)
    return schema


def feature(f) -> EnableTableFeature:
    return EnableTableFeature(f.property, f.value, f.irreversible, f.note)


def plan(deployed: str, compiled: str, fmt: str, props=None, **policy) -> Plan:
    d, c = S(deployed), S(compiled)
    return plan_schema_change(diff_schemas(d, c), fmt, props or {}, Policy(**policy), d, c)


def gates(p: Plan) -> list[tuple[str, str | None]]:
    return [(b.change.dotted, b.permitted_by) for b in p.blocked]


# --- row: add nullable column ---


@pytest.mark.parametrize("fmt", FORMATS)
def test_add_nullable_column(fmt):
    p = plan("a int", "a int, b string", fmt)
    assert p.operations == (AddColumns((NewColumn(("b",), STRING),)),)
    assert p.executable and not p.rewrites_data


# --- row: add column with default (NOT NULL too) ---

DEFAULTS = {"b": ColumnEvolution(default="'x'")}


def test_add_not_null_column_with_default_on_delta():
    p = plan("a int", "a int, B string not null", "delta", columns=DEFAULTS)
    assert p.operations == (
        feature(COLUMN_DEFAULTS),
        AddColumns((NewColumn(("B",), STRING),)),
        SetColumnDefault("B", "'x'"),
        Backfill("B", "'x'"),
        AddNotNullCheck("B", "b_not_null"),
    )
    assert p.rewrites_data and p.executable


def test_add_column_default_on_delta_with_feature_enabled():
    props = {"delta.feature.allowColumnDefaults": "supported"}
    p = plan("a int", "a int, b string", "delta", props, columns=DEFAULTS)
    assert p.operations == (
        AddColumns((NewColumn(("b",), STRING),)),
        SetColumnDefault("b", "'x'"),
        Backfill("b", "'x'"),
    )


def test_add_not_null_column_with_default_on_iceberg():
    p = plan("a int", "a int, b string not null", "iceberg", columns=DEFAULTS)
    assert p.operations == (
        AddColumns((NewColumn(("b",), STRING),)),
        Backfill("b", "'x'"),
    )
    assert any("cannot add NOT NULL" in n for n in p.notes)


def test_add_not_null_column_with_default_on_parquet():
    p = plan("a int", "a int, b string not null", "parquet", columns=DEFAULTS)
    assert p.operations == (AddColumns((NewColumn(("b",), STRING, default="'x'"),)),)
    assert p.notes == ("parquet cannot enforce NOT NULL on `b`",)
    assert not p.rewrites_data


@pytest.mark.parametrize("fmt", ("delta", "iceberg"))
def test_backfill_runs_one_update_per_added_column(fmt):
    columns = {
        "b": ColumnEvolution(backfill="a * 2"),
        "c": ColumnEvolution(backfill="'n'"),
    }
    p = plan("a int", "a int, b int, c string", fmt, columns=columns)
    assert p.operations == (
        AddColumns((NewColumn(("b",), INT), NewColumn(("c",), STRING))),
        Backfill("b", "a * 2"),
        Backfill("c", "'n'"),
    )


def test_backfill_on_parquet_needs_allow_full_refresh():
    columns = {"b": ColumnEvolution(backfill="a * 2")}
    blocked = plan("a int", "a int, b int", "parquet", columns=columns)
    assert gates(blocked) == [("b", "allow_full_refresh")] and blocked.operations == ()
    p = plan("a int", "a int, b int", "parquet", columns=columns, allow_full_refresh=True)
    (rewrite,) = p.operations
    assert isinstance(rewrite, Rewrite) and not rewrite.in_place
    assert [(c.name, c.fill) for c in rewrite.casts] == [("a", None), ("b", "a * 2")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_not_null_column_without_default_needs_full_refresh(fmt):
    blocked = plan("a int", "a int, b int not null", fmt)
    assert gates(blocked) == [("b", "allow_full_refresh")]
    assert "NOT NULL column without a default" in blocked.blocked[0].reason
    p = plan("a int", "a int, b int not null", fmt, allow_full_refresh=True)
    assert [type(op) for op in p.operations] == [FullRefresh]


# --- row: add nullable struct field (struct, array element, map value) ---

NESTED_ADDS = [
    ("s struct<a:int>", "s struct<a:int,c:string>", ("s", "c"), "a"),
    (
        "x array<struct<id:int>>",
        "x array<struct<id:int,c:string>>",
        ("x", "element", "c"),
        "id",
    ),
    (
        "m map<string,struct<f:int>>",
        "m map<string,struct<f:int,c:string>>",
        ("m", "value", "c"),
        "f",
    ),
]


@pytest.mark.parametrize("fmt", ("delta", "iceberg"))
@pytest.mark.parametrize(("deployed", "compiled", "path", "after"), NESTED_ADDS)
def test_add_nested_field_in_place(fmt, deployed, compiled, path, after):
    p = plan(deployed, compiled, fmt)
    assert p.operations == (AddColumns((NewColumn(path, STRING, after=after),)),)


@pytest.mark.parametrize(("deployed", "compiled", "path", "after"), NESTED_ADDS)
def test_add_nested_field_on_parquet_is_a_gated_rewrite(deployed, compiled, path, after):
    blocked = plan(deployed, compiled, "parquet")
    assert gates(blocked) == [(".".join(path), "allow_full_refresh")]
    p = plan(deployed, compiled, "parquet", allow_full_refresh=True)
    (rewrite,) = p.operations
    assert isinstance(rewrite, Rewrite) and not rewrite.in_place
    assert rewrite.target_schema == S(compiled)


# --- row: widen scalar ---


def test_widen_on_delta_enables_type_widening_once():
    p = plan("a int, b float", "a bigint, b double", "delta")
    assert p.operations == (
        feature(TYPE_WIDENING),
        AlterColumnType(("a",), BIGINT, INT),
        AlterColumnType(("b",), parse_type("double"), parse_type("float")),
    )
    assert not p.rewrites_data


def test_widen_on_delta_with_type_widening_enabled():
    p = plan("a int", "a bigint", "delta", {"delta.enableTypeWidening": "TRUE"})
    assert p.operations == (AlterColumnType(("a",), BIGINT, INT),)


WIDEN_MATRIX = [
    # (from, to, delta, iceberg): "alter" = metadata only, "rewrite" = row-keeping rewrite
    ("tinyint", "bigint", "alter", "rewrite"),
    ("int", "bigint", "alter", "alter"),
    ("int", "double", "alter", "rewrite"),
    ("int", "decimal(10,0)", "alter", "rewrite"),
    ("bigint", "decimal(20,0)", "alter", "rewrite"),
    ("float", "double", "alter", "alter"),
    ("decimal(10,2)", "decimal(12,2)", "alter", "alter"),
    ("decimal(10,2)", "decimal(12,4)", "alter", "rewrite"),
    ("date", "timestamp_ntz", "alter", "rewrite"),
    ("date", "timestamp", "rewrite", "rewrite"),
    ("varchar(3)", "string", "rewrite", "rewrite"),
]


@pytest.mark.parametrize(("src", "dst", "delta", "iceberg"), WIDEN_MATRIX)
@pytest.mark.parametrize("nested", [False, True])
def test_widening_matrix(src, dst, delta, iceberg, nested):
    deployed, compiled = (
        (f"s struct<a:{src}>", f"s struct<a:{dst}>") if nested else (f"a {src}", f"a {dst}")
    )
    path = ("s", "a") if nested else ("a",)
    props = {"delta.enableTypeWidening": "true"}
    for fmt, expected in (("delta", delta), ("iceberg", iceberg)):
        p = plan(deployed, compiled, fmt, props)
        assert p.executable, fmt
        if expected == "alter":
            assert p.operations == (AlterColumnType(path, parse_type(dst), parse_type(src)),)
        else:
            (rewrite,) = p.operations
            assert isinstance(rewrite, Rewrite) and rewrite.in_place
            assert rewrite.target_schema == S(compiled)
    assert gates(plan(deployed, compiled, "parquet")) == [(".".join(path), "allow_full_refresh")]
    (rewrite,) = plan(deployed, compiled, "parquet", allow_full_refresh=True).operations
    assert isinstance(rewrite, Rewrite) and not rewrite.in_place


# --- row: widen inside struct / array element / map value ---


@pytest.mark.parametrize(
    ("deployed", "compiled", "path"),
    [
        ("x array<int>", "x array<bigint>", ("x", "element")),
        ("m map<string,int>", "m map<string,bigint>", ("m", "value")),
        ("x array<struct<v:int>>", "x array<struct<v:bigint>>", ("x", "element", "v")),
    ],
)
@pytest.mark.parametrize("fmt", ("delta", "iceberg"))
def test_nested_widening_on_the_leaf(fmt, deployed, compiled, path):
    p = plan(deployed, compiled, fmt, {"delta.enableTypeWidening": "true"})
    assert p.operations == (AlterColumnType(path, BIGINT, INT),)


# --- row: NOT NULL -> nullable ---


@pytest.mark.parametrize("fmt", ("delta", "iceberg"))
def test_drop_not_null(fmt):
    assert plan("a int not null", "a int", fmt).operations == (DropNotNull(("a",)),)


def test_drop_not_null_on_parquet_is_nothing_to_do():
    p = plan("a int not null", "a int", "parquet")
    assert p.operations == () and p.executable
    assert p.notes == ("parquet does not enforce NOT NULL: nothing to do for `a`",)


def test_not_null_added_in_the_model_is_not_acted_on():
    p = plan("a int", "a int not null", "delta", strategy="full_refresh")
    assert p.operations == () and p.is_empty is True
    assert p.notes == ("NOT NULL in the model but nullable in the table (not enforced): `a`",)


# --- row: remove column / struct field ---


@pytest.mark.parametrize("fmt", FORMATS)
def test_removal_needs_allow_column_removal(fmt):
    p = plan("a int, b int", "a int", fmt, allow_full_refresh=True)
    assert gates(p) == [("b", "allow_column_removal")]
    assert p.operations == () and p.is_blocked


def test_removal_on_delta_enables_column_mapping():
    p = plan("a int, b int, s struct<x:int,y:int>", "a int, s struct<x:int>", "delta",
             allow_column_removal=True)  # fmt: skip
    assert p.operations == (feature(COLUMN_MAPPING), DropColumns((("s", "y"), ("b",))))
    assert p.operations[0].irreversible
    assert "irreversible" in p.summary()


def test_removal_on_delta_with_column_mapping_already_on():
    props = {"delta.columnMapping.mode": "id"}
    p = plan("a int, b int", "a int", "delta", props, allow_column_removal=True)
    assert p.operations == (DropColumns((("b",),)),)


def test_removal_inside_array_and_map_on_delta_is_in_place():
    p = plan(
        "x array<struct<a:int,b:int>>, m map<string,struct<f:int,g:int>>",
        "x array<struct<a:int>>, m map<string,struct<f:int>>",
        "delta",
        allow_column_removal=True,
    )
    assert p.operations == (
        feature(COLUMN_MAPPING),
        DropColumns((("x", "element", "b"), ("m", "value", "g"))),
    )


def test_removal_on_iceberg():
    p = plan("x array<struct<a:int,b:int>>, c int", "x array<struct<a:int>>", "iceberg",
             allow_column_removal=True)  # fmt: skip
    assert p.operations == (DropColumns((("x", "element", "b"), ("c",))),)


def test_removal_on_parquet_is_a_rewrite_gated_by_column_removal_alone():
    p = plan("a int, b int", "a int", "parquet", allow_column_removal=True)
    (rewrite,) = p.operations
    assert isinstance(rewrite, Rewrite) and not rewrite.in_place
    assert rewrite.target_schema == S("a int")


# --- row: unsafe changes need allow_full_refresh ---

UNSAFE = [
    ("a bigint", "a int", "a"),
    ("m map<int,string>", "m map<bigint,string>", "m.key"),
    ("s struct<a:int,b:int>", "s struct<b:int,a:int>", "s"),
    ("a string", "a int", "a"),
    ("a struct<x:int>", "a int", "a"),
    ("a int", "a int, b int not null", "b"),
    ("s struct<a:int>", "s struct<a:int,b:int not null>", "s.b"),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("deployed", "compiled", "path"), UNSAFE)
def test_unsafe_changes_need_full_refresh(fmt, deployed, compiled, path):
    p = plan(deployed, compiled, fmt, allow_column_removal=True)
    assert gates(p) == [(path, "allow_full_refresh")]
    assert "allow_full_refresh: true" in p.summary()
    permitted = plan(deployed, compiled, fmt, allow_full_refresh=True)
    assert [type(op) for op in permitted.operations] == [FullRefresh]
    assert permitted.full_refresh is not None and permitted.rewrites_data


# --- strategy full_refresh, combining, cheapest plan ---


@pytest.mark.parametrize("fmt", FORMATS)
def test_strategy_full_refresh_needs_no_permission(fmt):
    p = plan("a bigint, b int", "a int, c int", fmt, strategy="full_refresh")
    (op,) = p.operations
    assert isinstance(op, FullRefresh) and "strategy full_refresh" in op.reason
    assert plan("a int", "a int", fmt, strategy="full_refresh").operations == ()


def test_struct_widen_and_add_on_parquet_become_one_rewrite():
    p = plan("s struct<a:int,b:string>", "s struct<a:bigint,b:string,c:boolean>", "parquet",
             allow_full_refresh=True)  # fmt: skip
    (rewrite,) = p.operations
    assert isinstance(rewrite, Rewrite)
    assert [(c.name, c.source, c.target) for c in rewrite.casts] == [
        (
            "s",
            parse_type("struct<a:int,b:string>"),
            parse_type("struct<a:bigint,b:string,c:boolean>"),
        )
    ]


def test_struct_widen_and_add_on_delta_stay_in_metadata():
    p = plan("s struct<a:int,b:string>", "s struct<a:bigint,b:string,c:boolean>", "delta",
             {"delta.enableTypeWidening": "true"})  # fmt: skip
    assert p.operations == (
        AddColumns((NewColumn(("s", "c"), parse_type("boolean"), after="b"),)),
        AlterColumnType(("s", "a"), BIGINT, INT),
    )


def test_a_forced_rewrite_absorbs_the_alters():
    p = plan("a date, b int", "a timestamp, b bigint, c string", "delta",
             columns={"c": ColumnEvolution(default="'z'")})  # fmt: skip
    rewrite, *after = p.operations
    assert isinstance(rewrite, Rewrite) and rewrite.in_place
    assert rewrite.target_schema == S("a timestamp, b bigint, c string")
    assert [(c.name, c.fill, c.default) for c in rewrite.casts][-1] == (
        "c",
        "'z'",
        "'z'",
    )
    assert after == [feature(COLUMN_DEFAULTS), SetColumnDefault("c", "'z'")]


def test_full_refresh_wins_over_rewrite_and_alters():
    p = plan("a date, b bigint, c int", "a timestamp, b int, c bigint, d int", "delta",
             allow_full_refresh=True)  # fmt: skip
    (op,) = p.operations
    assert isinstance(op, FullRefresh) and "`b`" in op.reason and "`a`" not in op.reason


def test_blocked_plan_lists_each_change_with_reason_and_var():
    p = plan("a bigint, b int, c int", "a int, c int, d int", "parquet")
    assert gates(p) == [("a", "allow_full_refresh"), ("b", "allow_column_removal")]
    assert isinstance(p.blocked[0].change, TypeNarrowed)
    assert isinstance(p.blocked[1].change, ColumnRemoved)
    assert p.operations == ()
    assert p.summary() == (
        "schema change plan (parquet):\n"
        "blocked, nothing will change:\n"
        "  - type narrowed `a`: BIGINT -> INT: narrowing a type loses values; a destructive "
        "change, blocked by on_destructive_change: error (default); permit with "
        "schema_evolution: {on_destructive_change: allow} or --vars '{allow_full_refresh: true}'\n"
        "  - column removed `b`: parquet cannot drop `b` in place: removing it deletes its data; "
        "a destructive change, blocked by on_destructive_change: error (default); permit with "
        "schema_evolution: {on_destructive_change: allow} or --vars '{allow_column_removal: true}'"
    )
    assert p.to_dict()["blocked"][1]["permitted_by"] == "allow_column_removal"


def test_rewrite_carries_user_properties_only():
    props = {"delta.enableTypeWidening": "true", "delta.minReaderVersion": "3",
             "delta.constraints.x": "a > 0", "team": "data", "delta.feature.typeWidening": "supported"}  # fmt: skip
    (rewrite,) = plan("a date", "a timestamp", "delta", props).operations
    assert rewrite.table_properties == (
        ("delta.enableTypeWidening", "true"),
        ("team", "data"),
    )


def test_empty_diff_is_empty_plan():
    p = plan("a int", "a int", "delta")
    assert p.is_empty and p.executable and p.summary() == "no schema change (delta)"


# --- dbt on_schema_change ---


def osc(setting: str, deployed: str, compiled: str, fmt: str = "delta", **policy) -> Plan:
    d, c = S(deployed), S(compiled)
    return plan_on_schema_change(setting, diff_schemas(d, c), fmt, {}, d, c, Policy(**policy))


def test_on_schema_change_ignore():
    assert osc("ignore", "a int, b int", "a bigint, c int").is_empty


def test_on_schema_change_fail_blocks_every_change():
    p = osc("fail", "a int, b int", "a bigint, c int not null")
    assert gates(p) == [("a", None), ("c", None), ("b", None)]
    assert "on_schema_change is 'fail'" in p.summary()
    assert osc("fail", "a int not null", "a int").executable


def test_on_schema_change_append_new_columns():
    p = osc("append_new_columns", "a int, b int, s struct<x:int>",
            "a string, c int not null, s struct<x:int,y:int>")  # fmt: skip
    assert p.operations == (
        AddColumns((NewColumn(("c",), INT), NewColumn(("s", "y"), INT, after="x"))),
    )


def test_on_schema_change_append_on_parquet_nested_rewrite_keeps_removed_columns():
    p = osc("append_new_columns", "a int, b int, s struct<x:int>", "a bigint, s struct<y:int,x:int>",
            "parquet", allow_full_refresh=True)  # fmt: skip
    (rewrite,) = p.operations
    assert rewrite.target_schema == S("a int, b int, s struct<y:int,x:int>")


def test_on_schema_change_sync_all_columns():
    p = osc("sync_all_columns", "a bigint, b int, c int", "a int, c bigint, d string")
    (rewrite,) = p.operations
    assert isinstance(rewrite, Rewrite) and rewrite.in_place
    assert rewrite.target_schema == S("a int, c bigint, d string")
    metadata = osc("sync_all_columns", "b int, c int", "c bigint, d string")
    assert metadata.operations == (
        feature(TYPE_WIDENING),
        feature(COLUMN_MAPPING),
        DropColumns((("b",),)),
        AddColumns((NewColumn(("d",), STRING),)),
        AlterColumnType(("c",), BIGINT, INT),
    )


def test_on_schema_change_sync_on_parquet_narrowing_needs_allow_full_refresh():
    p = osc("sync_all_columns", "a bigint, b int", "a int", "parquet")
    assert gates(p) == [("a", "allow_full_refresh")]


def test_on_schema_change_rejects_unknown_values():
    with pytest.raises(ValueError, match="on_schema_change must be one of"):
        osc("append", "a int", "a int")


# --- policy and capability table ---


def test_policy_validation_and_case_insensitive_columns():
    with pytest.raises(ValueError, match="strategy"):
        Policy(strategy="rebuild")
    policy = Policy(columns={"Status": ColumnEvolution(default="'x'")})
    assert policy.column("STATUS").default == "'x'"
    assert policy.column("other") == ColumnEvolution()
    assert policy.unknown_columns(S("status int")) == ()
    assert policy.unknown_columns(S("a int")) == ("status",)


def test_capability_table():
    delta, iceberg, parquet = (capabilities_for(f) for f in ("DELTA", "iceberg", "parquet"))
    assert delta.can_widen(INT, BIGINT, nested=True)
    assert not iceberg.can_widen(INT, parse_type("double"), nested=False)
    assert not parquet.can_widen(INT, BIGINT, nested=False)
    assert (delta.atomic_rewrite, iceberg.atomic_rewrite, parquet.atomic_rewrite) == (
        True,
        True,
        False,
    )
    assert (delta.update, iceberg.update, parquet.update) == (True, True, False)
    assert (
        not parquet.add_nested_field and not parquet.drop_column and not parquet.enforces_not_null
    )
    assert iceberg.carried_properties({"format-version": "2", "format": "iceberg/parquet"}) == {
        "format-version": "2"
    }
    with pytest.raises(ValueError, match="unknown table format 'orc'"):
        capabilities_for("orc")


def test_removal_on_iceberg_relaxes_a_required_column_first():
    """Iceberg drops a removed column after the load (its rollback keeps the schema), so the
    load writes no value into it: a NOT NULL one is made nullable first; a nullable one not."""
    p = plan("a int, b int not null, c int", "a int", "iceberg", allow_column_removal=True)
    assert p.operations == (DropColumns((("b",), ("c",))), DropNotNull(("b",))), p.operations
    p = plan("a int, b int not null", "a int", "delta", {"delta.columnMapping.mode": "id"},
             allow_column_removal=True)  # fmt: skip
    assert p.operations == (DropColumns((("b",),)),)
