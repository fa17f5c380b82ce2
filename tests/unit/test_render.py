"""Rendered Spark SQL for representative plans (exact snapshots)."""

from __future__ import annotations

import pytest

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
    SetColumnDefault,
)
from dbt.adapters.spark_contracts.core.evolution.plan import (
    ColumnEvolution,
    Policy,
    plan_schema_change,
)
from dbt.adapters.spark_contracts.core.evolution.render import (
    cast_expression,
    render_operation,
    render_plan,
    suffixed,
)
from dbt.adapters.spark_contracts.core.evolution.steps import DropAdded, DropTable, Rename, undo
from dbt.adapters.spark_contracts.core.schema.diff import diff_schemas
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.schema.types import Struct

T = "`db`.`t`"


def S(columns: str) -> Struct:
    schema = parse_type(f"struct<{columns}>")
    assert isinstance(schema, Struct)
    return schema


def rendered(deployed: str, compiled: str, fmt: str, props=None, **policy) -> list[str]:
    d, c = S(deployed), S(compiled)
    p = plan_schema_change(diff_schemas(d, c), fmt, props or {}, Policy(**policy), d, c)
    return [step.sql for step in render_plan(p, T, fmt)]


OPERATIONS = [
    (
        AddColumns((NewColumn(("s", "c"), parse_type("string"), after="a"),)),
        "ALTER TABLE `db`.`t` ADD COLUMNS (`s`.`c` STRING AFTER `a`)",
    ),
    (
        AddColumns((NewColumn(("s", "c"), parse_type("int"), "note", first=True),)),
        "ALTER TABLE `db`.`t` ADD COLUMNS (`s`.`c` INT COMMENT 'note' FIRST)",
    ),
    (
        AddColumns((NewColumn(("c",), parse_type("int"), default="0"),)),
        "ALTER TABLE `db`.`t` ADD COLUMNS (`c` INT DEFAULT 0)",
    ),
    (
        AlterColumnType(("s", "a"), parse_type("bigint"), parse_type("int")),
        "ALTER TABLE `db`.`t` ALTER COLUMN `s`.`a` TYPE BIGINT",
    ),
    (DropNotNull(("c",)), "ALTER TABLE `db`.`t` ALTER COLUMN `c` DROP NOT NULL"),
    (
        EnableTableFeature("delta.columnMapping.mode", "name", True, "n"),
        "ALTER TABLE `db`.`t` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')",
    ),
    (
        DropColumns((("a",), ("s", "b"))),
        "ALTER TABLE `db`.`t` DROP COLUMNS (`a`, `s`.`b`)",
    ),
    (
        SetColumnDefault("c", "'x'"),
        "ALTER TABLE `db`.`t` ALTER COLUMN `c` SET DEFAULT 'x'",
    ),
    (Backfill("c", "a * 2"), "UPDATE `db`.`t` SET `c` = a * 2"),
    (
        AddNotNullCheck("c", "c_not_null"),
        "ALTER TABLE `db`.`t` ADD CONSTRAINT `c_not_null` CHECK (`c` IS NOT NULL)",
    ),
    (
        AddColumns((NewColumn(("we`ird",), parse_type("int")),)),
        "ALTER TABLE `db`.`t` ADD COLUMNS (`we``ird` INT)",
    ),
]


@pytest.mark.parametrize(("op", "sql"), OPERATIONS)
def test_render_operation(op, sql):
    assert [step.sql for step in render_operation(op, T, "delta")] == [sql]


def test_full_refresh_renders_nothing():
    assert render_plan(Plan("delta", (FullRefresh("x"),)), T, "delta") == ()


@pytest.mark.parametrize(("fmt", "drops"), [("delta", True), ("iceberg", True), ("parquet", False)])
def test_an_add_columns_step_carries_the_drop_of_what_it_adds_where_the_format_drops(fmt, drops):
    add = AddColumns(
        (NewColumn(("s", "c"), parse_type("int")), NewColumn(("d",), parse_type("string")))
    )
    (step,) = render_operation(add, T, fmt)
    assert step.inverse == (DropAdded(T, (("s", "c"), ("d",))) if drops else None)
    assert not step.stands


def test_only_a_parquet_rewrite_has_inverses_and_a_step_that_stands():
    steps = render_plan(
        plan_schema_change(
            diff_schemas(S("a int, b int"), S("a bigint")),
            "parquet",
            {},
            Policy(allow_full_refresh=True, allow_column_removal=True),
            S("a int, b int"),
            S("a bigint"),
        ),
        T,
        "parquet",
    )
    beside, backup = "`db`.`t__dbt_rewrite`", "`db`.`t__dbt_backup`"
    assert [s.inverse for s in steps] == [
        None,
        DropTable(beside),
        DropTable(beside),
        None,
        Rename(backup, T),
        None,
        None,
    ]
    assert [s.stands for s in steps] == [False] * 5 + [True, False]


def test_delta_add_default_not_null_column():
    assert rendered(
        "a int",
        "a int, b string not null",
        "delta",
        columns={"b": ColumnEvolution("'x'")},
    ) == [
        "ALTER TABLE `db`.`t` SET TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')",
        "ALTER TABLE `db`.`t` ADD COLUMNS (`b` STRING)",
        "ALTER TABLE `db`.`t` ALTER COLUMN `b` SET DEFAULT 'x'",
        "UPDATE `db`.`t` SET `b` = 'x'",
        "ALTER TABLE `db`.`t` ADD CONSTRAINT `b_not_null` CHECK (`b` IS NOT NULL)",
    ]


def test_parquet_add_column_with_default():
    assert rendered("a int", "a int, b int", "parquet", columns={"b": ColumnEvolution("0")}) == [
        "ALTER TABLE `db`.`t` ADD COLUMNS (`b` INT DEFAULT 0)"
    ]


def test_delta_nested_add_and_widen():
    assert rendered(
        "s struct<a:int,b:string>, x array<struct<id:int>>",
        "s struct<a:bigint,b:string,c:boolean>, x array<struct<id:int,score:double>>",
        "delta",
    ) == [
        "ALTER TABLE `db`.`t` SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
        (
            "ALTER TABLE `db`.`t` ADD COLUMNS "
            "(`s`.`c` BOOLEAN AFTER `b`, `x`.`element`.`score` DOUBLE AFTER `id`)"
        ),
        "ALTER TABLE `db`.`t` ALTER COLUMN `s`.`a` TYPE BIGINT",
    ]


def test_delta_rewrite_is_one_atomic_replace():
    assert rendered(
        "id int, a date, s struct<x:int>, m map<string,int>",
        "id int, a timestamp, s struct<x:int, y:string>, m map<string,bigint>, n int",
        "delta",
        {"delta.enableTypeWidening": "true", "delta.minWriterVersion": "7"},
    ) == [
        (
            "CREATE OR REPLACE TABLE `db`.`t` USING delta "
            "TBLPROPERTIES ('delta.enableTypeWidening' = 'true') AS SELECT "
            "`id` AS `id`, "
            "CAST(`a` AS TIMESTAMP) AS `a`, "
            "IF(`s` IS NULL, NULL, named_struct('x', `s`.`x`, 'y', CAST(NULL AS STRING))) AS `s`, "
            "transform_values(`m`, (k0, v0) -> CAST(v0 AS BIGINT)) AS `m`, "
            "CAST(NULL AS INT) AS `n` "
            "FROM `db`.`t`"
        )
    ]


def test_iceberg_rewrite_with_table_options():
    d, c = S("a int"), S("a double")
    p = plan_schema_change(diff_schemas(d, c), "iceberg", {}, Policy(), d, c)
    assert [s.sql for s in render_plan(p, "cat.db.t", "iceberg", "PARTITIONED BY (a)")] == [
        (
            "CREATE OR REPLACE TABLE cat.db.t USING iceberg PARTITIONED BY (a) "
            "AS SELECT CAST(`a` AS DOUBLE) AS `a` FROM cat.db.t"
        )
    ]


def test_parquet_rewrite_builds_beside_and_swaps_keeping_a_backup():
    assert rendered(
        "a int, b int", "a bigint, c string", "parquet",
        allow_full_refresh=True, allow_column_removal=True,
        columns={"c": ColumnEvolution(default="'n'")},
    ) == [
        "DROP TABLE IF EXISTS `db`.`t__dbt_backup`",
        "DROP TABLE IF EXISTS `db`.`t__dbt_rewrite`",
        "CREATE TABLE `db`.`t__dbt_rewrite` (`a` BIGINT, `c` STRING DEFAULT 'n') USING parquet",
        ("INSERT INTO `db`.`t__dbt_rewrite` "
        "SELECT CAST(`a` AS BIGINT) AS `a`, CAST('n' AS STRING) AS `c` FROM `db`.`t`"),
        "ALTER TABLE `db`.`t` RENAME TO `db`.`t__dbt_backup`",
        "ALTER TABLE `db`.`t__dbt_rewrite` RENAME TO `db`.`t`",
        "DROP TABLE `db`.`t__dbt_backup`",
    ]  # fmt: skip


def test_blocked_plan_renders_nothing():
    assert rendered("a bigint", "a int", "delta") == []


CASTS = [
    ("int", "int", "`c`"),
    ("struct<A:int>", "struct<a:int>", "`c`"),
    ("int", "bigint", "CAST(`c` AS BIGINT)"),
    (
        "struct<b:int,a:int>",
        "struct<a:bigint,b:int>",
        "IF(`c` IS NULL, NULL, named_struct('a', CAST(`c`.`a` AS BIGINT), 'b', `c`.`b`))",
    ),
    (
        "array<array<int>>",
        "array<array<bigint>>",
        "transform(`c`, x0 -> transform(x0, x1 -> CAST(x1 AS BIGINT)))",
    ),
    (
        "map<int,struct<f:int>>",
        "map<bigint,struct<f:int,g:int>>",
        (
            "transform_values(transform_keys(`c`, (k0, v0) -> CAST(k0 AS BIGINT)), (k0, v0) -> "
            "IF(v0 IS NULL, NULL, named_struct('f', v0.`f`, 'g', CAST(NULL AS INT))))"
        ),
    ),
    ("struct<x:int>", "string", "CAST(`c` AS STRING)"),
]


@pytest.mark.parametrize(("src", "dst", "sql"), CASTS)
def test_cast_expression(src, dst, sql):
    assert cast_expression("`c`", parse_type(src), parse_type(dst)) == sql


def test_suffixed_relation():
    assert suffixed("`db`.`t`", "__x") == "`db`.`t__x`"
    assert suffixed("db.t", "__x") == "db.t__x"


def _apply(tables: dict, statement: str) -> None:
    """A catalog of names: just enough to follow the rewrite's statements."""
    words = statement.split()
    if statement.startswith("DROP TABLE"):
        tables.pop(words[-1], None)
    elif statement.startswith("CREATE TABLE"):
        tables[words[2]] = "empty"
    elif statement.startswith("INSERT INTO"):
        tables[words[2]] = "new"
    elif " RENAME TO " in statement:
        assert words[-1] not in tables, statement
        tables[words[-1]] = tables.pop(words[2])


@pytest.mark.parametrize("completed", range(8))
def test_a_rewrite_stopped_anywhere_leaves_the_old_table_or_the_new_one(completed):
    d, c = S("a int, b int"), S("a bigint")
    policy = Policy(allow_full_refresh=True, allow_column_removal=True)
    steps = render_plan(
        plan_schema_change(diff_schemas(d, c), "parquet", {}, policy, d, c), T, "parquet"
    )
    assert len(steps) == 7
    tables = {"`db`.`t`": "old", "`db`.`t__dbt_backup`": "stale"}
    for step in steps[:completed]:
        _apply(tables, step.sql)
    for inverse in undo(steps[:completed]):
        _apply(tables, inverse.sql)
    swapped = completed >= 6
    assert tables.get("`db`.`t`") == ("new" if swapped else "old"), (completed, tables)
    if not swapped and completed:
        assert set(tables) == {"`db`.`t`"}, tables  # nothing half-built left behind


@pytest.mark.parametrize(("fmt", "after"), [("iceberg", True), ("delta", False)])
def test_a_removal_is_the_last_step_where_a_rollback_keeps_the_schema(fmt, after):
    """Iceberg's rollback keeps the schema, so its DROP COLUMNS is sent after the load; the
    flag travels in the intent (Step.to_dict / from_dict)."""
    from dbt.adapters.spark_contracts.core.evolution.steps import Step

    [step] = render_operation(DropColumns((("a",),)), T, fmt)
    assert step.after_load is after
    assert Step.from_dict(step.to_dict()) == step


def test_an_iceberg_struct_field_removal_goes_after_the_load_too():
    """A rollback keeps the schema whatever it drops: a struct's field goes after the load
    as a top-level column does (the load writes it NULL: core/evolution/fit.kept_for_load)."""
    steps = render_operation(DropColumns((("a",), ("s", "b"))), T, "iceberg")
    assert [(s.sql, s.after_load) for s in steps] == [
        ("ALTER TABLE `db`.`t` DROP COLUMNS (`a`, `s`.`b`)", True),
    ]
