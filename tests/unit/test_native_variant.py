"""`schema_contract: {data_type: evolve, variant_columns: native}` (issue 31 item 2): the config,
the decision, the plan (the format's feature first) and the load's SELECT. Pure."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spark_type_strategies import table_schemas

from dbt.adapters.spark_contracts.core.contracts.contract import resolve_contract
from dbt.adapters.spark_contracts.core.contracts.enforce import VARIANT_TYPE, decide, variant_name
from dbt.adapters.spark_contracts.core.contracts.load_select import render_load_select
from dbt.adapters.spark_contracts.core.evolution.operations import AddColumns, EnableTableFeature
from dbt.adapters.spark_contracts.core.evolution.plan import Policy, plan_schema_change
from dbt.adapters.spark_contracts.core.schema.diff import ColumnAdded, diff_schemas
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.schema.types import Struct
from dbt.adapters.spark_contracts.core.settings.config import ConfigError
from dbt.adapters.spark_contracts.core.settings.validate import NodeConfig, validate_node_config

NATIVE = {"data_type": "evolve", "variant_columns": "native"}


def S(columns: str) -> Struct:
    schema = parse_type(f"struct<{columns}>")
    assert isinstance(schema, Struct)
    return schema


def decision(deployed: str, compiled: str, fmt: str = "delta", value=None):
    contract = resolve_contract("m", NATIVE if value is None else value, None)
    assert contract is not None
    d, c = S(deployed), S(compiled)
    return decide(contract, d, c, diff_schemas(d, c), fmt)


def select(deployed: str, compiled: str, fmt: str = "delta") -> str:
    sql = render_load_select(
        decision(deployed, compiled, fmt), "src", S(deployed), S(compiled), "r"
    )
    text = sql.select
    for alias, expr in sql.coerced:
        text = text.replace(f"`{alias}`", expr)
    return text


# ------------------------------------------------------------------------ config


def test_typed_stays_the_default_and_native_is_reported():
    typed = resolve_contract("m", {"data_type": "evolve"}, None)
    assert typed is not None and not typed.native_variants
    assert "variant_columns" not in typed.to_dict()
    native = resolve_contract("m", NATIVE, None)
    assert native is not None and native.native_variants
    assert native.to_dict()["variant_columns"] == "native"
    # a run var mapping overrides it like an entity
    back = resolve_contract("m", NATIVE, {"variant_columns": "typed"})
    assert back is not None and not back.native_variants


def test_a_bad_value_names_the_key_and_the_choices():
    with pytest.raises(
        ConfigError,
        match=r"`schema_contract.variant_columns` is 'json'; allowed: "
        r"typed, native",
    ):
        resolve_contract("m", {"variant_columns": "json"}, None)


def node(config) -> NodeConfig:
    return NodeConfig(model="model.p.m (models/m.sql)", config=config, run_vars={})


@pytest.mark.parametrize("fmt", ["parquet", "orc", "csv", "text"])
def test_a_format_that_cannot_store_variant_fails_naming_it_and_typed(fmt):
    with pytest.raises(ConfigError) as info:
        validate_node_config(node({"file_format": fmt, "schema_contract": NATIVE}))
    message = str(info.value)
    assert f"file_format '{fmt}' cannot store a VARIANT column" in message
    assert "variant_columns: typed" in message
    # typed keeps working there
    validate_node_config(node({"file_format": fmt, "schema_contract": {"data_type": "evolve"}}))


def test_the_run_var_can_ask_for_native_on_a_format_that_cannot():
    n = NodeConfig(
        model="model.p.m (models/m.sql)",
        config={"file_format": "parquet"},
        run_vars={"schema_contract": {"variant_columns": "native"}},
    )
    with pytest.raises(ConfigError, match="file_format 'parquet'"):
        validate_node_config(n)


@pytest.mark.parametrize("version, fails", [("1", True), ("2", True), (2, True), ("3", False)])
def test_iceberg_pinned_before_v3_fails_naming_the_fix(version, fails):
    config = {
        "file_format": "iceberg",
        "tbl_properties": {"format-version": version},
        "schema_contract": NATIVE,
    }
    if not fails:
        validate_node_config(node(config))
        return
    with pytest.raises(ConfigError) as info:
        validate_node_config(node(config))
    assert f"Iceberg format-version {version}" in str(info.value)
    assert "'format-version': '3'" in str(info.value)


def test_an_iceberg_microbatch_model_fails_like_a_merge_model():
    config = {
        "file_format": "iceberg",
        "incremental_strategy": "microbatch",
        "schema_contract": NATIVE,
    }
    n = NodeConfig(
        model="model.p.m (models/m.sql)", config=config, run_vars={}, materialized="incremental"
    )
    with pytest.raises(ConfigError) as info:
        validate_node_config(n)
    assert "Iceberg microbatch model" in str(info.value)
    assert "variant_columns: typed" in str(info.value)


def test_an_iceberg_merge_model_fails_naming_the_iceberg_bug_and_typed():
    config = {
        "file_format": "iceberg",
        "incremental_strategy": "merge",
        "schema_contract": NATIVE,
    }
    n = NodeConfig(
        model="model.p.m (models/m.sql)", config=config, run_vars={}, materialized="incremental"
    )
    with pytest.raises(ConfigError) as info:
        validate_node_config(n)
    assert "Iceberg merge model" in str(info.value)
    assert "variant_columns: typed" in str(info.value)
    # append on Iceberg, and merge on Delta, are fine
    validate_node_config(
        NodeConfig(
            model=n.model,
            config={**config, "incremental_strategy": "append"},
            run_vars={},
            materialized="incremental",
        )
    )
    validate_node_config(
        NodeConfig(
            model=n.model,
            config={**config, "file_format": "delta"},
            run_vars={},
            materialized="incremental",
        )
    )


@pytest.mark.parametrize("fmt", [None, "delta", "iceberg"])
def test_delta_and_iceberg_accept_native(fmt):
    config = {"schema_contract": NATIVE, **({"file_format": fmt} if fmt else {})}
    settings_ = validate_node_config(node(config))
    assert settings_.contract is not None and settings_.contract.native_variants


# ------------------------------------------------------------------------ decision and plan


def test_variant_name():
    assert variant_name("score", S("x string").fields[0].type, native=True) == "score__v"
    assert variant_name("score", S("x string").fields[0].type) == "score__v_string"


@pytest.mark.parametrize(
    "fmt, feature",
    [
        ("delta", ("delta.feature.variantType", "supported")),
        ("iceberg", ("format-version", "3")),
    ],
)
def test_one_variant_column_planned_after_the_formats_feature(fmt, feature):
    made = decision("id int, score int", "id int, score string", fmt)
    assert made.variant_columns == ("score__v",)
    assert made.target == S("id int, score int, score__v variant")
    plan = plan_schema_change(
        made.evolve_diff, fmt, {}, Policy(), S("id int, score int"), made.target
    )
    first, add = plan.operations
    assert isinstance(first, EnableTableFeature)
    assert (first.property, first.value, first.irreversible) == (*feature, True)
    assert isinstance(add, AddColumns) and add.columns[0].type == VARIANT_TYPE
    # the feature already on: only the column
    enabled = plan_schema_change(
        made.evolve_diff,
        fmt,
        {feature[0]: feature[1]},
        Policy(),
        S("id int, score int"),
        made.target,
    )
    assert [type(op) for op in enabled.operations] == [AddColumns]


def test_values_of_every_type_share_the_one_column():
    """typed makes a column per arriving type; native reuses `score__v` (no change planned)."""
    again = decision("id int, score int, score__v variant", "id int, score date")
    assert again.variant_columns == ("score__v",)
    assert again.evolve_diff.is_empty
    typed = decision(
        "id int, score int, score__v_string string",
        "id int, score date",
        value={"data_type": "evolve"},
    )
    assert typed.variant_columns == ("score__v_date",)


def test_an_earlier_runs_variant_column_stays_and_is_null():
    kept = decision("id int, score int, score__v variant", "id int, score int")
    assert kept.evolve_diff.is_empty
    assert select("id int, score int, score__v variant", "id int, score int") == (
        "SELECT `id`, `score`, CAST(NULL AS VARIANT) AS `score__v` FROM src"
    )


# ------------------------------------------------------------------------ the load


def test_the_original_value_goes_into_the_variant():
    assert select("id int, score int", "id int, score string") == (
        "SELECT `id`, CASE WHEN (ascii(`score`) BETWEEN 33 AND 126 AND ascii(`score`) NOT IN (43, 45, 46) AND ascii(`score`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`score` AS INT) END AS `score`, CASE WHEN (`score` IS NOT NULL AND "
        "CASE WHEN (ascii(`score`) BETWEEN 33 AND 126 AND ascii(`score`) NOT IN (43, 45, 46) AND ascii(`score`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`score` AS INT) END IS NULL) THEN CAST(`score` AS VARIANT) END AS `score__v` "
        "FROM src"
    )


def test_a_struct_value_goes_in_through_to_variant_object():
    assert select("id int, s int", "id int, s struct<a:int>") == (
        "SELECT `id`, CAST(NULL AS INT) AS `s`, CASE WHEN `s` IS NOT NULL THEN "
        "to_variant_object(`s`) END AS `s__v` FROM src"
    )


def test_a_rejected_struct_field_is_kept_at_its_path():
    text = select(
        "s struct<a:int, b:int, c:struct<d:int>>",
        "s struct<a:bigint, b:string, c:struct<d:string>>",
    )
    bad_b = "(`s`.`b` IS NOT NULL AND CASE WHEN (ascii(`s`.`b`) BETWEEN 33 AND 126 AND ascii(`s`.`b`) NOT IN (43, 45, 46) AND ascii(`s`.`b`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`s`.`b` AS INT) END IS NULL)"
    bad_d = "(`s`.`c`.`d` IS NOT NULL AND CASE WHEN (ascii(`s`.`c`.`d`) BETWEEN 33 AND 126 AND ascii(`s`.`c`.`d`) NOT IN (43, 45, 46) AND ascii(`s`.`c`.`d`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`s`.`c`.`d` AS INT) END IS NULL)"
    assert text.endswith(
        f"CASE WHEN {bad_b} OR {bad_d} THEN to_variant_object(named_struct("
        f"'b', CASE WHEN {bad_b} THEN `s`.`b` END, "
        f"'c', named_struct('d', CASE WHEN {bad_d} THEN `s`.`c`.`d` END))) END AS `s__v` FROM src"
    ), text


def test_a_field_under_an_array_keeps_the_whole_column():
    text = select("a array<struct<x:int>>", "a array<struct<x:string>>")
    assert "THEN to_variant_object(`a`) END AS `a__v`" in text


@settings(max_examples=150, deadline=None)
@given(table_schemas(), table_schemas(), st.sampled_from(["delta", "iceberg"]))
def test_native_variant_columns_are_one_variant_per_column(deployed, compiled, fmt):
    contract = resolve_contract("m", NATIVE, None)
    assert contract is not None
    made = decide(contract, deployed, compiled, diff_schemas(deployed, compiled), fmt)
    assert made.target is not None
    variant_paths = {c.path[0].lower() for c in made.value_checks if c.handling == "variant"}
    names = {v.lower() for v in made.variant_columns}
    assert names == {f"{column}__v" for column in variant_paths}
    for name in made.variant_columns:
        field = made.target.field(name)
        assert field is not None
        assert field.type == VARIANT_TYPE or deployed.field(name) is not None
    added = [c for c in made.evolve_diff if isinstance(c, ColumnAdded)]
    assert all(c.field.type == VARIANT_TYPE for c in added if c.field.name.lower() in names)
    sql = render_load_select(made, "src", deployed, compiled, "r")
    for name in made.variant_columns:
        assert name in sql.columns


def test_an_iceberg_model_merging_by_default_fails_too():
    """No incremental_strategy: the adapter merges on Iceberg when the model has a unique_key
    (impl.default_incremental_strategy), and that merge scans its target first."""
    config = {"file_format": "iceberg", "unique_key": "id", "schema_contract": NATIVE}
    n = NodeConfig(
        model="model.p.m (models/m.sql)", config=config, run_vars={}, materialized="incremental"
    )
    with pytest.raises(ConfigError) as info:
        validate_node_config(n)
    assert "Iceberg merge model" in str(info.value)
    appends = {"file_format": "iceberg", "schema_contract": NATIVE}
    validate_node_config(
        NodeConfig(
            model="model.p.m (models/m.sql)",
            config=appends,
            run_vars={},
            materialized="incremental",
        )
    )
