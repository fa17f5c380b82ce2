"""Contract enforcement: every cell of SPEC §3's entity × mode table, and the rendered load SQL."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spark_type_strategies import table_schemas

from dbt.adapters.spark_contracts.core.contracts.contract import (
    MODES,
    ContractMode,
    SchemaContract,
    resolve_contract,
)
from dbt.adapters.spark_contracts.core.contracts.decision import (
    CREATE,
    FAIL,
    LOAD,
    SKIP,
    ContractDecision,
    ContractViolation,
)
from dbt.adapters.spark_contracts.core.contracts.enforce import (
    decide,
    type_tag,
    variant_name,
)
from dbt.adapters.spark_contracts.core.contracts.load_select import (
    PENDING_KEPT,
    LoadSql,
    render_load_select,
)
from dbt.adapters.spark_contracts.core.evolution.plan import Policy, plan_schema_change
from dbt.adapters.spark_contracts.core.schema.diff import (
    ColumnAdded,
    FieldAdded,
    TypeWidened,
    diff_schemas,
)
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.schema.types import Field, Struct, quote_identifier

FORMATS = ("delta", "iceberg", "parquet")
INT, BIGINT, STRING = (parse_type(t) for t in ("int", "bigint", "string"))


def expanded(text, sql):
    """`text` with the load's coerced columns written out (what it computes over the model's
    view: the load reads them from `coerced_select`, computed once per row)."""
    if text is None:
        return None
    for alias, expr in sql.coerced:
        text = text.replace(f"`{alias}`", expr)
    return text


def test_a_cast_read_more_than_once_is_computed_once_below_its_readers():
    sql = render_load_select(
        run("discard_row", "id int, n int", "id int, n string", "delta"),
        "src",
        S("id int, n int"),
        S("id int, n string"),
        "r",
    )
    assert sql.coerced == (
        (
            "__dbt_coerced_0",
            "CASE WHEN (ascii(`n`) BETWEEN 33 AND 126 AND ascii(`n`) NOT IN (43, 45, 46) AND ascii(`n`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`n` AS INT) END",
        ),
    )
    assert (
        sql.coerced_select("m")
        == "SELECT *, CASE WHEN (ascii(`n`) BETWEEN 33 AND 126 AND ascii(`n`) NOT IN (43, 45, 46) AND ascii(`n`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`n` AS INT) END AS `__dbt_coerced_0` FROM m"
    )
    assert "try_cast" not in sql.select
    assert sql.discard_count_sql is not None and "try_cast" not in sql.discard_count_sql
    # a SELECT that must read its source alone (a first build's CREATE) hoists nothing
    alone = render_load_select(
        run("discard_row", "id int, n int", "id int, n string", "delta"),
        "src",
        S("id int, n int"),
        S("id int, n string"),
        "r",
        hoist=False,
    )
    assert alone.coerced == () and "__dbt_coerced" not in alone.select
    assert alone.select == expanded(sql.select, sql)


def test_a_model_column_named_like_a_coerced_one_keeps_its_name_and_value():
    """The coerced view is `SELECT *, <cast> AS <alias>`: an alias equal to one of the model's
    columns would make every reference to it ambiguous, so the alias skips the model's names."""
    deployed, compiled = (
        "id int, n int, __DBT_Coerced_0 int",
        "id int, n string, __DBT_Coerced_0 int",
    )
    sql = render_load_select(
        run("discard_row", deployed, compiled, "delta"), "src", S(deployed), S(compiled), "r"
    )
    assert [alias for alias, _ in sql.coerced] == ["__dbt_coerced_1"]
    assert "`__DBT_Coerced_0`" in sql.select  # the model's own column, read as it is
    assert sql.select.count("`__dbt_coerced_1`") >= 2  # the cast, in the value and the filter


def S(columns: str) -> Struct:
    schema = parse_type(f"struct<{columns}>")
    assert isinstance(schema, Struct)
    return schema


def contract(value) -> SchemaContract:
    resolved = resolve_contract("m", value, None)
    assert resolved is not None
    return resolved


def run(value, deployed: str | None, compiled: str, fmt: str = "delta") -> ContractDecision:
    d = None if deployed is None else S(deployed)
    c = S(compiled)
    diff = diff_schemas(d, c) if d is not None else diff_schemas(Struct(), c)
    return decide(contract(value), d, c, diff, fmt)


def load(value, deployed: str, compiled: str, fmt: str = "delta", run_id="r1") -> LoadSql:
    decision = run(value, deployed, compiled, fmt)
    return render_load_select(decision, "src", S(deployed), S(compiled), run_id)


def changes(decision: ContractDecision) -> list[str]:
    return [change.describe() for change in decision.evolve_diff]


# ------------------------------------------------------------------------ tables


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("mode", "action"),
    [("evolve", CREATE), ("freeze", FAIL), ("discard_row", SKIP), ("discard_value", SKIP)],
)
def test_tables_row(mode, action, fmt):
    decision = run({"tables": mode}, None, "id int", fmt)
    assert decision.table_action == action
    assert decision.table_format == fmt
    if mode == "freeze":
        assert decision.violations == (
            ContractViolation(
                "tables",
                "freeze",
                None,
                None,
                None,
                "the relation does not exist and schema_contract.tables is freeze: nothing created",
            ),
        )
    else:
        assert decision.violations == ()
    if action == SKIP:
        assert decision.warnings == (
            f"the relation does not exist and schema_contract.tables is {mode}: skipped",
        )


def test_new_table_rule_columns_and_data_type_evolve_on_create():
    value = {"tables": "evolve", "columns": "freeze", "data_type": "freeze"}
    decision = run(value, None, "a int, `B` string")
    assert decision.table_action == CREATE
    assert decision.contract == SchemaContract(columns=ContractMode.EVOLVE)
    assert decision.target == S("a int, `B` string")
    sql = render_load_select(decision, "src", None, S("a int, `B` string"), "r")
    assert expanded(sql.select, sql) == "SELECT `a`, `B` FROM src"
    assert sql.columns == ("a", "B")
    assert (sql.violation_sample_sql, sql.discard_count_sql, sql.quarantine_select) == (None,) * 3
    assert sql.passes_through  # the load reads `src` itself: no view of it is made


def test_new_table_rule_binds_from_the_next_run():
    assert run("freeze", "a int", "a int, b int").table_action == FAIL


@pytest.mark.parametrize("mode", ["freeze", "discard_row", "discard_value"])
def test_nothing_to_load_after_fail_or_skip(mode):
    decision = run({"tables": mode}, None, "a int")
    with pytest.raises(ValueError, match="nothing to load"):
        render_load_select(decision, "src", None, S("a int"), "r")


# ------------------------------------------------------------------------ columns


def test_columns_evolve_hands_new_column_and_field_to_planner():
    decision = run(
        {"columns": "evolve"}, "id int, s struct<a:int>", "id int, s struct<a:int, b:string>, c int"
    )
    assert decision.table_action == LOAD
    assert [(n.dotted, n.mode.value) for n in decision.new_columns] == [
        ("s.b", "evolve"),
        ("c", "evolve"),
    ]
    assert [type(c) for c in decision.evolve_diff] == [FieldAdded, ColumnAdded]
    assert changes(decision) == ["field added `s.b` STRING", "column added `c` INT"]
    assert decision.target == S("id int, s struct<a:int, b:string>, c int")
    sql = render_load_select(decision, "src", S("id int, s struct<a:int>"), decision.target, "r")
    assert expanded(sql.select, sql) == "SELECT `id`, `s`, `c` FROM src"


@pytest.mark.parametrize(
    ("compiled", "column", "what"),
    [
        ("id int, c int", "c", "column"),
        ("id int, s struct<a:int, b:string>", "s.b", "struct field"),
        ("id int, arr array<struct<a:int, b:int>>", "arr.element.b", "struct field"),
    ],
)
def test_columns_freeze_fails_before_anything(compiled, column, what):
    deployed = "id int, s struct<a:int>, arr array<struct<a:int>>"
    full = compiled + ("" if "s " in compiled else ", s struct<a:int>")
    full += "" if "arr" in full else ", arr array<struct<a:int>>"
    decision = run({"columns": "freeze"}, deployed, full)
    assert decision.table_action == FAIL
    (violation,) = decision.violations
    assert violation.schema_entity == "columns"
    assert violation.contract_mode == "freeze"
    assert violation.column == column
    assert violation.deployed_type is None
    assert violation.compiled_type == (STRING if column == "s.b" else INT)
    assert violation.reason == (
        f"the model outputs a new {what} `{column}` the deployed table lacks"
    )


def test_columns_discard_row_top_level():
    sql = load({"columns": "discard_row"}, "id int", "id int, c string")
    assert expanded(sql.select, sql) == "SELECT `id` FROM src WHERE NOT (`c` IS NOT NULL)"
    assert sql.columns == ("id",)
    assert expanded(sql.discard_count_sql, sql) == (
        "SELECT count_if((`c` IS NOT NULL)) AS rows_discarded, 0 AS values_discarded FROM src"
    )


def test_columns_discard_value_top_level():
    decision = run({"columns": "discard_value"}, "id int", "id int, c string")
    assert decision.evolve_diff.is_empty
    assert decision.target == S("id int")
    sql = render_load_select(decision, "src", S("id int"), S("id int, c string"), "r")
    assert expanded(sql.select, sql) == "SELECT `id` FROM src"
    assert expanded(sql.discard_count_sql, sql) == (
        "SELECT 0 AS rows_discarded, count_if((`c` IS NOT NULL)) AS values_discarded FROM src"
    )


def test_columns_discard_value_rebuilds_struct_without_new_field():
    sql = load(
        "discard_value",
        "id int, s struct<a:int, z:int>",
        "id int, s struct<a:int, b:string, z:int>",
    )
    assert expanded(sql.select, sql) == (
        "SELECT `id`, IF(`s` IS NULL, NULL, named_struct('a', `s`.`a`, 'z', `s`.`z`)) AS `s` "
        "FROM src"
    )


def test_columns_discard_row_nested_field_filters_rows():
    sql = load("discard_row", "id int, s struct<a:int>", "id int, s struct<a:int, b:string>")
    assert expanded(sql.select, sql) == (
        "SELECT `id`, IF(`s` IS NULL, NULL, named_struct('a', `s`.`a`)) AS `s` FROM src "
        "WHERE NOT (`s`.`b` IS NOT NULL)"
    )


def test_columns_discard_row_in_array_of_struct_uses_exists():
    sql = load("discard_row", "arr array<struct<a:int>>", "arr array<struct<a:int, b:int>>")
    assert expanded(sql.select, sql) == (
        "SELECT transform(`arr`, x0 -> IF(x0 IS NULL, NULL, named_struct('a', x0.`a`))) AS `arr` "
        "FROM src WHERE NOT (coalesce(exists(`arr`, x0 -> x0.`b` IS NOT NULL), false))"
    )


def test_columns_discard_row_in_map_value_struct():
    sql = load("discard_row", "m map<string,struct<a:int>>", "m map<string,struct<a:int,b:int>>")
    assert expanded(sql.select, sql) == (
        "SELECT transform_values(`m`, (k0, v0) -> IF(v0 IS NULL, NULL, named_struct('a', v0.`a`)))"
        " AS `m` FROM src WHERE NOT (coalesce(exists(map_values(`m`), v0 -> v0.`b` IS NOT NULL),"
        " false))"
    )


@pytest.mark.parametrize("mode", ["discard_row", "discard_value"])
def test_columns_discard_keeps_schema(mode):
    decision = run(
        {"columns": mode}, "id int, s struct<a:int>", "id int, s struct<a:int,b:int>, c int"
    )
    assert decision.table_action == LOAD
    assert decision.evolve_diff.is_empty
    assert decision.target == S("id int, s struct<a:int>")
    assert [n.mode.value for n in decision.new_columns] == [mode, mode]


# ------------------------------------------------------------------------ data_type


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("deployed", "compiled"),
    [
        ("n bigint", "n int"),
        ("n double", "n float"),
        ("n decimal(12,2)", "n decimal(10,2)"),
        ("n timestamp", "n date"),
        ("n string", "n varchar(3)"),
        ("s struct<a:bigint>", "s struct<a:int>"),
        ("arr array<bigint>", "arr array<int>"),
        ("n int", "n void"),
    ],
)
def test_safe_widening_is_never_a_violation(deployed, compiled, mode, fmt):
    decision = run({"data_type": mode}, deployed, compiled, fmt)
    assert decision.table_action == LOAD
    assert decision.violations == ()
    assert decision.value_checks == ()
    assert decision.evolve_diff.is_empty
    sql = render_load_select(decision, "src", S(deployed), S(compiled), "r")
    assert "try_cast" not in sql.select and "WHERE" not in sql.select
    assert sql.discard_count_sql is None


def test_safe_widening_renders_plain_cast():
    assert (
        load("freeze", "n bigint", "n int").select == "SELECT CAST(`n` AS BIGINT) AS `n` FROM src"
    )


@pytest.mark.parametrize(
    ("fmt", "widened"), [("delta", True), ("iceberg", True), ("parquet", False)]
)
def test_data_type_evolve_widens_when_the_format_can(fmt, widened):
    decision = run("evolve", "id int, n int", "id int, n bigint", fmt)
    (check,) = decision.value_checks
    if widened:
        assert (check.handling, check.variant_column) == ("widen", None)
        assert [type(c) for c in decision.evolve_diff] == [TypeWidened]
        assert decision.target == S("id int, n bigint")
        assert load("evolve", "id int, n int", "id int, n bigint", fmt).select == (
            "SELECT `id`, `n` FROM src"
        )
    else:
        assert (check.handling, check.variant_column) == ("variant", "n__v_bigint")
        assert changes(decision) == ["column added `n__v_bigint` BIGINT"]
        assert decision.target == S("id int, n int, n__v_bigint bigint")


def test_data_type_evolve_widening_plans_metadata_only_on_delta():
    decision = run("evolve", "n int", "n bigint", "delta")
    assert decision.target is not None
    plan = plan_schema_change(
        decision.evolve_diff, "delta", {}, Policy(), S("n int"), decision.target
    )
    assert [type(op).__name__ for op in plan.operations] == [
        "EnableTableFeature",
        "AlterColumnType",
    ]


def test_iceberg_cannot_widen_decimal_scale_so_variant():
    decision = run("evolve", "d decimal(10,2)", "d decimal(12,4)", "iceberg")
    assert [c.variant_column for c in decision.value_checks] == ["d__v_decimal_12_4"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_data_type_evolve_incompatible_goes_to_variant_column(fmt):
    decision = run("evolve", "id int, score int", "id int, score string", fmt)
    assert decision.variant_columns == ("score__v_string",)
    assert changes(decision) == ["column added `score__v_string` STRING"]
    sql = render_load_select(
        decision, "src", S("id int, score int"), S("id int, score string"), "r"
    )
    assert expanded(sql.select, sql) == (
        "SELECT `id`, CASE WHEN (ascii(`score`) BETWEEN 33 AND 126 AND ascii(`score`) NOT IN (43, 45, 46) AND ascii(`score`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`score` AS INT) END AS `score`, CASE WHEN (`score` IS NOT NULL AND "
        "CASE WHEN (ascii(`score`) BETWEEN 33 AND 126 AND ascii(`score`) NOT IN (43, 45, 46) AND ascii(`score`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`score` AS INT) END IS NULL) THEN `score` END AS `score__v_string` FROM src"
    )
    assert sql.columns == ("id", "score", "score__v_string")
    plan = plan_schema_change(
        decision.evolve_diff, fmt, {}, Policy(), S("id int, score int"), decision.target
    )
    assert [type(op).__name__ for op in plan.operations] == ["AddColumns"]


def test_variant_column_of_an_earlier_run_is_reused_or_kept():
    reused = run("evolve", "score int, score__v_string string", "score string", "parquet")
    assert reused.evolve_diff.is_empty
    assert reused.target == S("score int, score__v_string string")
    kept = run("evolve", "score int, score__v_string string", "score int", "parquet")
    assert kept.evolve_diff.is_empty
    sql = render_load_select(
        kept, "src", S("score int, score__v_string string"), S("score int"), "r"
    )
    assert (
        expanded(sql.select, sql)
        == "SELECT `score`, CAST(NULL AS STRING) AS `score__v_string` FROM src"
    )


def test_data_type_freeze_raises_inside_the_load():
    sql = load("freeze", "id int, score int", "id int, score string")
    assert expanded(sql.select, sql) == (
        "SELECT `id`, CASE WHEN (`score` IS NOT NULL AND CASE WHEN (ascii(`score`) BETWEEN 33 AND 126 AND ascii(`score`) NOT IN (43, 45, 46) AND ascii(`score`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`score` AS INT) END IS NULL) THEN "
        "raise_error(concat('schema_contract data_type freeze: column ', 'score', ' (deployed "
        "INT, compiled STRING) value ', cast(`score` AS STRING), ' does not coerce')) ELSE "
        "CASE WHEN (ascii(`score`) BETWEEN 33 AND 126 AND ascii(`score`) NOT IN (43, 45, 46) AND ascii(`score`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`score` AS INT) END END AS `score` FROM src"
    )
    assert expanded(sql.violation_sample_sql, sql) == (
        "SELECT 'score' AS column_name, value, 'values do not coerce into the deployed column\\'s "
        "type' AS reason FROM (SELECT DISTINCT CAST(`score` AS STRING) AS "
        "value FROM src WHERE (`score` IS NOT NULL AND CASE WHEN (ascii(`score`) BETWEEN 33 AND 126 AND ascii(`score`) NOT IN (43, 45, 46) AND ascii(`score`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`score` AS INT) END IS NULL) LIMIT 5)"
        " AS s0"
    )
    assert sql.discard_count_sql is None


def test_data_type_freeze_is_not_a_static_violation():
    decision = run("freeze", "score int", "score string")
    assert decision.table_action == LOAD and decision.violations == ()
    assert [(c.dotted, c.handling) for c in decision.value_checks] == [("score", "freeze")]


def test_data_type_discard_row_filters_and_quarantines():
    sql = load(
        {"data_type": "discard_row", "quarantine": True},
        "id int, n int",
        "id int, n bigint",
        run_id="run-7",
    )
    bad = "(`n` IS NOT NULL AND try_cast(`n` AS INT) IS NULL)"
    assert (
        expanded(sql.select, sql)
        == f"SELECT `id`, try_cast(`n` AS INT) AS `n` FROM src WHERE NOT ({bad})"
    )
    reason = (
        f"CASE WHEN {bad} THEN 'data_type discard_row: "
        f"`n` value does not coerce into INT' END AS `_contract_reason`, "
        f"'run-7' AS `_dbt_run_id`"
    )
    assert expanded(sql.quarantine_select, sql) == (
        f"SELECT `id`, `n`, {reason} FROM src WHERE ({bad})"
    )
    # the pending table: every row, the kept ones without a reason
    assert expanded(sql.pending_from("model"), sql) == f"SELECT `id`, `n`, {reason} FROM model"
    assert expanded(sql.discard_count_sql, sql) == (
        f"SELECT count_if(({bad})) AS rows_discarded, 0 AS values_discarded FROM src"
    )


def test_no_quarantine_without_the_flag_or_without_discarded_rows():
    assert load("discard_row", "n int", "n string").quarantine_select is None
    both = {"data_type": "discard_value", "quarantine": True}
    assert load(both, "n int", "n string").quarantine_select is None


def test_data_type_discard_value_nulls_the_value():
    sql = load("discard_value", "id int, score int", "id int, score string")
    assert (
        expanded(sql.select, sql)
        == "SELECT `id`, CASE WHEN (ascii(`score`) BETWEEN 33 AND 126 AND ascii(`score`) NOT IN (43, 45, 46) AND ascii(`score`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`score` AS INT) END AS `score` FROM src"
    )
    assert expanded(sql.discard_count_sql, sql) == (
        "SELECT 0 AS rows_discarded, count_if(((`score` IS NOT NULL AND CASE WHEN (ascii(`score`) BETWEEN 33 AND 126 AND ascii(`score`) NOT IN (43, 45, 46) AND ascii(`score`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`score` AS INT) END "
        "IS NULL))) AS values_discarded FROM src"
    )


def test_the_reason_evaluates_each_discard_predicate_once():
    """Two ways to discard a row: the quarantine's reason names each that holds, and reads each
    predicate once a row (the pending table holds every row: no predicate twice per row)."""
    sql = load(
        {"columns": "discard_row", "data_type": "discard_row", "quarantine": True},
        "id int, n int",
        "id int, n string, extra int",
    )
    row = expanded(sql.quarantine_row, sql) or ""
    reason = row.split(", ", 3)[3]
    bad_n = "(`n` IS NOT NULL AND CASE WHEN (ascii(`n`) BETWEEN 33 AND 126 AND ascii(`n`) NOT IN (43, 45, 46) AND ascii(`n`) NOT BETWEEN 48 AND 57) THEN NULL ELSE "
    assert reason.startswith("nullif(concat_ws('; ', CASE WHEN ")
    assert reason.count(bad_n) == 1 and reason.count("`extra` IS NOT NULL") == 1
    assert reason.endswith("END), '') AS `_contract_reason`")


def test_a_pending_source_picks_its_kept_rows_by_their_reason():
    """A pending table knows which rows it keeps: the load and the count read the reason, the
    discard predicates (and their casts) are not evaluated again."""
    decision = run(
        {"data_type": "discard_row", "quarantine": True}, "id int, n int", "id int, n string"
    )
    sql = render_load_select(
        decision, "p", S("id int, n int"), S("id int, n string"), "r1", False, PENDING_KEPT
    )
    assert sql.select.endswith("FROM p WHERE `_contract_reason` IS NULL")
    assert sql.discard_count_sql == (
        "SELECT count_if(NOT (`_contract_reason` IS NULL)) AS rows_discarded, "
        "0 AS values_discarded FROM p"
    )
    # observed over the model's rows (no reason there yet): the predicates themselves
    assert "try_cast" in sql.discard_metrics[0][1]


def test_fractional_into_integral_checks_the_value_round_trips():
    sql = load("discard_value", "v int", "v double")
    assert (
        expanded(sql.select, sql)
        == "SELECT IF(try_cast(`v` AS INT) = `v`, try_cast(`v` AS INT), NULL) AS `v` FROM src"
    )


def test_uncastable_type_rejects_every_non_null_value():
    sql = load("discard_row", "s struct<a:int>", "s string")
    assert expanded(sql.select, sql) == (
        "SELECT CAST(NULL AS STRUCT<`a`: INT>) AS `s` FROM src WHERE NOT (`s` IS NOT NULL)"
    )


def test_nested_leaf_change_per_value_and_variant_of_whole_column():
    decision = run("evolve", "s struct<a:int, b:int>", "s struct<a:bigint, b:string>", "delta")
    assert [(c.dotted, c.handling, c.variant_column) for c in decision.value_checks] == [
        ("s.a", "widen", None),
        ("s.b", "variant", "s__v_struct"),
    ]
    assert decision.target == S("s struct<a:bigint, b:int>, s__v_struct struct<a:bigint, b:string>")
    sql = render_load_select(
        decision, "src", S("s struct<a:int, b:int>"), S("s struct<a:bigint, b:string>"), "r"
    )
    assert expanded(sql.select, sql) == (
        "SELECT IF(`s` IS NULL, NULL, named_struct('a', `s`.`a`, 'b', CASE WHEN (ascii(`s`.`b`) BETWEEN 33 AND 126 AND ascii(`s`.`b`) NOT IN (43, 45, 46) AND ascii(`s`.`b`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`s`.`b` AS INT) END)) "
        "AS `s`, CASE WHEN (`s`.`b` IS NOT NULL AND CASE WHEN (ascii(`s`.`b`) BETWEEN 33 AND 126 AND ascii(`s`.`b`) NOT IN (43, 45, 46) AND ascii(`s`.`b`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`s`.`b` AS INT) END IS NULL) THEN `s` "
        "END AS `s__v_struct` FROM src"
    )


def test_map_value_discard_row():
    sql = load("discard_row", "m map<string,int>", "m map<string,string>")
    assert expanded(sql.select, sql) == (
        "SELECT transform_values(`m`, (k0, v0) -> CASE WHEN (ascii(v0) BETWEEN 33 AND 126 AND ascii(v0) NOT IN (43, 45, 46) AND ascii(v0) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(v0 AS INT) END) AS `m` FROM src WHERE NOT "
        "(coalesce(exists(map_values(`m`), v0 -> (v0 IS NOT NULL AND CASE WHEN (ascii(v0) BETWEEN 33 AND 126 AND ascii(v0) NOT IN (43, 45, 46) AND ascii(v0) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(v0 AS INT) END IS "
        "NULL)), false))"
    )


def test_mixed_modes_count_values_only_in_kept_rows():
    value = {"columns": "discard_row", "data_type": "discard_value"}
    sql = load(value, "n int", "n string, c int")
    bad = "(`n` IS NOT NULL AND CASE WHEN (ascii(`n`) BETWEEN 33 AND 126 AND ascii(`n`) NOT IN (43, 45, 46) AND ascii(`n`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`n` AS INT) END IS NULL)"
    assert expanded(sql.discard_count_sql, sql) == (
        "SELECT count_if((`c` IS NOT NULL)) AS rows_discarded, "
        f"count_if(NOT ((`c` IS NOT NULL)) AND ({bad})) AS values_discarded FROM src"
    )


# ------------------------------------------------------------------------ names, reports


def test_case_insensitive_names():
    decision = run("freeze", "id int, Name string", "ID int, NAME string")
    assert decision.table_action == LOAD and decision.evolve_diff.is_empty
    sql = render_load_select(
        decision, "src", S("id int, Name string"), S("ID int, NAME string"), "r"
    )
    assert expanded(sql.select, sql) == "SELECT `ID` AS `id`, `NAME` AS `Name` FROM src"
    assert sql.columns == ("id", "Name")


@pytest.mark.parametrize(
    ("type_sql", "tag"),
    [
        ("string", "string"),
        ("bigint", "bigint"),
        ("decimal(12,2)", "decimal_12_2"),
        ("interval day to second", "interval_day_to_second"),
        ("struct<a:int>", "struct"),
        ("array<int>", "array"),
        ("map<string,int>", "map"),
        ("varchar(5)", "varchar_5"),
    ],
)
def test_type_tag(type_sql, tag):
    assert type_tag(parse_type(type_sql)) == tag


def test_variant_name():
    assert variant_name("score", STRING) == "score__v_string"
    assert variant_name("n", BIGINT) == "n__v_bigint"


def test_summary_and_to_dict():
    decision = run(
        {"columns": "freeze", "data_type": "discard_row"},
        "id int, n int",
        "id int, n string, c int",
    )
    assert decision.to_dict() == {
        "contract": {
            "tables": "evolve",
            "columns": "freeze",
            "data_type": "discard_row",
            "data_tests": "evolve",
            "quarantine": False,
        },
        "table_action": "fail",
        "table_format": "delta",
        "violations": [
            {
                "schema_entity": "columns",
                "contract_mode": "freeze",
                "column": "c",
                "deployed_type": None,
                "compiled_type": "INT",
                "reason": "the model outputs a new column `c` the deployed table lacks",
            }
        ],
        "new_columns": [],
        "value_checks": [
            {
                "path": "n",
                "deployed_type": "INT",
                "compiled_type": "STRING",
                "handling": "discard_row",
                "variant_column": None,
            }
        ],
        "evolve": [],
        "warnings": [],
    }
    assert decision.summary() == (
        "schema_contract {tables: evolve, columns: freeze, data_type: discard_row, data_tests: "
        "evolve, quarantine: False} (delta): fail\n"
        "  violation: columns freeze column `c` (deployed (absent), compiled INT): the model "
        "outputs a new column `c` the deployed table lacks\n"
        "  data_type n (STRING into INT): discard_row"
    )


# ------------------------------------------------------------------------ properties


@settings(max_examples=60, deadline=None)
@given(table_schemas(), st.sampled_from(MODES), st.sampled_from(FORMATS))
def test_identical_schemas_load_a_plain_projection(schema, mode, fmt):
    decision = decide(contract(mode), schema, schema, diff_schemas(schema, schema), fmt)
    assert decision.table_action == LOAD
    assert decision.violations == () and decision.value_checks == () and decision.new_columns == ()
    assert decision.evolve_diff.is_empty
    sql = render_load_select(decision, "src", schema, schema, "r")
    projection = ", ".join(quote_identifier(name) for name in schema.names)
    assert expanded(sql.select, sql) == f"SELECT {projection} FROM src"
    assert (sql.violation_sample_sql, sql.discard_count_sql, sql.quarantine_select) == (None,) * 3
    assert sql.passes_through  # the load reads `src` itself: no view of it is made


@pytest.mark.parametrize(
    "value, deployed, compiled, through",
    [
        ("evolve", "a int, b string", "a int, b string", True),
        ("evolve", "a int, b string", "b string, a int", True),  # columns load by name
        ("freeze", "s struct<a:int>", "s struct<A:int>", False),  # renames a field
        ("discard_row", "n bigint", "n string", False),  # casts and filters
        ("discard_value", "id int", "id int, c string", False),  # leaves a column out
        ("evolve", "n int", "n bigint", True),  # the table widens, the value is as it is
        ("freeze", "n bigint", "n int", False),  # cast up to the table's type
    ],
)
def test_the_load_passes_its_source_through_only_when_it_changes_nothing(
    value, deployed, compiled, through
):
    sql = load(value, deployed, compiled)
    assert sql.passes_through == through, sql.select
    names = ", ".join(quote_identifier(n) for n in S(compiled).names)
    assert (sql.select == f"SELECT {names} FROM src") == through


@settings(max_examples=60, deadline=None)
@given(table_schemas(), st.sampled_from(FORMATS))
def test_evolve_diff_is_the_diff_to_the_target(schema, fmt):
    compiled = Struct((*schema.fields, Field("zz_new", INT)))
    for mode in MODES:
        decision = decide(contract(mode), schema, compiled, diff_schemas(schema, compiled), fmt)
        assert decision.target is not None
        assert decision.evolve_diff == diff_schemas(schema, decision.target)
        added = mode == "evolve"
        assert (decision.target.field("zz_new") is not None) == added
        assert decision.table_action == (FAIL if mode == "freeze" else LOAD)


def test_nullability_and_comment_differences_need_no_rebuild():
    deployed, compiled = "s struct<a:int NOT NULL>", "s struct<a:int COMMENT 'x'>"
    assert load("freeze", deployed, compiled).select == "SELECT `s` FROM src"
    assert load("freeze", "s struct<a:int>", "s struct<A:int>").select == (
        "SELECT IF(`s` IS NULL, NULL, named_struct('a', `s`.`A`)) AS `s` FROM src"
    )
