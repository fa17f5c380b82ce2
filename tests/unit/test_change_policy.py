"""A model's change policy (`schema_evolution.on_additive_change` / `on_destructive_change`,
core/evolution/change_policy.py): each change's class, what each setting does with it, the run vars
winning, the plan file, parse-time errors, and `ignore`'s fitted schema (core/evolution/fit.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.evolution.change_policy import ChangePolicy, OnChange
from dbt.adapters.spark_contracts.core.evolution.fit import fitted_schema, fitted_select
from dbt.adapters.spark_contracts.core.evolution.operations import AddColumns, DropColumns, Plan
from dbt.adapters.spark_contracts.core.evolution.plan import Policy, plan_schema_change
from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs, plan_run
from dbt.adapters.spark_contracts.core.schema.diff import (
    ColumnRemoved,
    NullabilityRelaxed,
    NullabilityTightened,
    diff_schemas,
)
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.schema.types import Struct
from dbt.adapters.spark_contracts.core.settings.config import (
    ConfigError,
    RunVars,
    parse_policy,
    resolve_settings,
)
from dbt.adapters.spark_contracts.core.settings.validate import NodeConfig, validate_node_config
from tests.unit.spark_type_strategies import spark_types, structs

FORMATS = ("delta", "iceberg", "parquet")


def S(columns: str) -> Struct:
    parsed = parse_type(f"struct<{columns}>")
    assert isinstance(parsed, Struct)
    return parsed


def plan(deployed: str, compiled: str, fmt: str, additive=None, destructive=None, **run_vars):
    d, c = S(deployed), S(compiled)
    changes = ChangePolicy(
        OnChange(additive) if additive else None, OnChange(destructive) if destructive else None
    )
    policy = Policy(changes=changes, **run_vars)
    return plan_schema_change(diff_schemas(d, c), fmt, {}, policy, d, c)


def judged(p: Plan) -> dict[str, tuple[str, str, str]]:
    return {
        j.change.dotted: (
            j.verdict.change_class.value,
            j.verdict.action.value,
            j.verdict.cost.value,
        )
        for j in p.judged
    }


# --- classes and costs, per format, top level and nested ---


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_new_column_is_additive_and_metadata_only(fmt):
    p = plan("a int", "a int, b string", fmt)
    assert judged(p) == {"b": ("additive", "allow", "metadata only")}
    assert isinstance(p.operations[0], AddColumns)


@pytest.mark.parametrize(
    "fmt, expected",
    [
        ("delta", ("additive", "allow", "metadata only")),
        ("iceberg", ("additive", "allow", "metadata only")),
        # parquet cannot add a nested field in place: a rewrite, so destructive (and blocked:
        # a parquet rewrite is not atomic)
        ("parquet", ("destructive", "error", "rewrite of the table's data files")),
    ],
)
def test_a_new_field_in_an_array_of_structs(fmt, expected):
    p = plan("a array<struct<x:int>>", "a array<struct<x:int,y:string>>", fmt)
    assert judged(p) == {"a.element.y": expected}


@pytest.mark.parametrize("fmt", ("delta", "iceberg"))
def test_a_widening_in_metadata_is_additive(fmt):
    p = plan("a int", "a bigint", fmt)
    assert judged(p) == {"a": ("additive", "allow", "metadata only")}


@pytest.mark.parametrize("fmt", FORMATS)
def test_removals_and_narrowings_are_destructive_and_blocked_by_default(fmt):
    p = plan("a bigint, b int, s struct<x:int,y:int>", "a int, s struct<x:int>", fmt)
    classes = {path: v[:2] for path, v in judged(p).items()}
    assert classes == {
        "a": ("destructive", "error"),
        "b": ("destructive", "error"),
        "s.y": ("destructive", "error"),
    }
    assert {b.change.dotted for b in p.blocked} == {"a", "b", "s.y"}
    assert p.operations == ()


# --- the four settings ---


@pytest.mark.parametrize("fmt", FORMATS)
def test_additive_error_blocks_naming_path_class_and_setting(fmt):
    p = plan("a int", "a int, b string", fmt, additive="error")
    (blocked,) = p.blocked
    text = blocked.describe()
    assert "`b`" in text and "additive" in text and "on_additive_change: error" in text
    assert "schema_evolution: {on_additive_change: allow}" in text
    assert p.operations == ()


@pytest.mark.parametrize("fmt", FORMATS)
def test_warn_applies_and_warns_naming_path_and_class(fmt):
    p = plan("a int", "a int, b string", fmt, additive="warn")
    assert isinstance(p.operations[0], AddColumns) and not p.blocked
    (warning,) = p.warnings
    assert "`b`" in warning and "additive" in warning and "on_additive_change: warn" in warning


@pytest.mark.parametrize("fmt", ("delta", "iceberg"))
def test_destructive_allow_drops_a_column_without_the_var(fmt):
    p = plan("a int, b int", "a int", fmt, destructive="allow")
    assert not p.blocked
    assert any(isinstance(op, DropColumns) for op in p.operations)


@pytest.mark.parametrize("fmt", FORMATS)
def test_ignore_changes_nothing_and_lists_the_change(fmt):
    p = plan("a int, b int", "a int, c string", fmt, additive="ignore", destructive="ignore")
    assert p.operations == () and p.blocked == ()
    assert {j.change.dotted for j in p.ignored} == {"b", "c"}
    assert "ignored, the table keeps its schema there" in p.summary()


@pytest.mark.parametrize("fmt", FORMATS)
def test_one_class_ignored_the_other_applied(fmt):
    p = plan("a int", "a int, c string", fmt, additive="ignore")
    assert p.operations == ()
    p = plan("a int, b int", "a int, c string", fmt, additive="ignore", destructive="allow")
    assert [j.change.dotted for j in p.ignored] == ["c"]
    assert judged(p)["b"][:2] == ("destructive", "allow") and not p.blocked and p.operations


# --- the run vars win ---


@pytest.mark.parametrize("fmt", ("delta", "iceberg"))
def test_a_var_given_false_blocks_what_the_model_allows(fmt):
    p = plan("a int, b int", "a int", fmt, destructive="allow", allow_column_removal=False)
    (blocked,) = p.blocked
    assert "--vars allow_column_removal: false" in blocked.describe()


@pytest.mark.parametrize("fmt", ("delta", "iceberg"))
def test_a_var_given_true_permits_what_the_model_blocks(fmt):
    p = plan("a int, b int", "a int", fmt, destructive="error", allow_column_removal=True)
    assert not p.blocked and any(isinstance(op, DropColumns) for op in p.operations)


def test_neighbours_in_one_run_each_by_their_own_setting():
    """One run (one set of vars), two models with one change: each its own verdict."""
    allowed = plan("a int, b int", "a int", "delta", destructive="allow")
    refused = plan("a int, b int", "a int", "delta", destructive="error")
    assert not allowed.blocked and refused.blocked


# --- the plan file ---


def test_the_plan_file_shows_class_cost_and_what_decided():
    p = plan("a int, b int", "a bigint, c string", "delta", destructive="warn")
    changes = {c["path"]: c for c in p.to_dict()["changes"]}
    assert changes["a"] == {
        "change": "type widened `a`: INT -> BIGINT",
        "path": "a",
        "class": "additive",
        "cost": "metadata only",
        "action": "allow",
        "decided_by": "on_additive_change: allow (default)",
    }
    assert changes["b"]["class"] == "destructive" and changes["b"]["decided_by"] == (
        "on_destructive_change: warn"
    )


def test_a_rewrite_names_the_files_it_rewrites():
    """A Parquet column drop rewrites the table's files: once the adapter counted them the plan
    file names how many; metadata-only changes and an uncounted rewrite keep their words."""
    p = plan("a int, b int", "a int, d string", "parquet", destructive="allow")
    assert p.rewrites_files
    before = {c["path"]: c["cost"] for c in p.to_dict()["changes"]}
    assert before == {"d": "metadata only", "b": "rewrite of the table's data files"}
    counted = p.with_data_files(7)
    after = {c["path"]: c["cost"] for c in counted.to_dict()["changes"]}
    assert after == {"d": "metadata only", "b": "rewrite of 7 data files"}
    assert "cost: rewrite of 7 data files" in "\n".join(j.describe() for j in counted.judged)
    assert p.with_data_files(1).to_dict()["changes"][1]["cost"] == "rewrite of 1 data file"
    # a blocked rewrite names them too (the dry run shows what it would cost)
    blocked = plan("a int, b int", "a int", "parquet").with_data_files(3)
    assert [b.verdict.cost_text() for b in blocked.blocked if b.verdict] == [
        "rewrite of 3 data files"
    ]
    assert not plan("a int, b int", "a int", "delta", destructive="allow").rewrites_files


# --- parse time ---


@pytest.mark.parametrize("key", ["on_additive_change", "on_destructive_change"])
@pytest.mark.parametrize("value", ["allowed", "", 3, True, ["allow"]])
def test_bad_values_fail_naming_the_key_and_what_is_allowed(key, value):
    with pytest.raises(ConfigError) as raised:
        parse_policy("model.p.m", {key: value}, RunVars())
    assert f"`schema_evolution.{key}` is {value!r}" in str(raised.value)
    assert "allowed: allow, warn, error, ignore" in str(raised.value)


@pytest.mark.parametrize("value", ["ALLOW", " warn "])
def test_values_are_read_case_and_space_insensitively(value):
    policy = parse_policy("model.p.m", {"on_additive_change": value}, RunVars())
    assert policy.changes.on_additive is OnChange(value.strip().lower())


def test_ignore_with_a_schema_contract_fails_at_parse():
    with pytest.raises(ConfigError) as raised:
        resolve_settings(
            "model.p.m", {"on_additive_change": "ignore"}, {"columns": "evolve"}, None, {}
        )
    assert "discard_value" in str(raised.value)


# --- ignore: what the load writes ---

small_names = st.sampled_from(["a", "b", "c", "d"])
small_structs = structs(spark_types(names=small_names), small_names, min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(deployed=small_structs, compiled=small_structs)
def test_ignoring_every_change_leaves_nothing_to_change(deployed: Struct, compiled: Struct):
    """The fitted schema against the table: no change left but a removed top-level column
    (the table keeps it; the load writes NULL there) and a collection's null flag."""
    changes = diff_schemas(deployed, compiled).changes
    fitted = fitted_schema(deployed, compiled, changes)
    left = [
        c
        for c in diff_schemas(deployed, fitted).changes
        if not isinstance(c, ColumnRemoved)
        and not (
            isinstance(c, (NullabilityRelaxed, NullabilityTightened))
            and c.path[-1] in ("element", "value")
        )
    ]
    assert left == []
    assert {f.name for f in fitted.fields} <= {f.name for f in compiled.fields}
    fitted_select(compiled, fitted, "v")  # renders for every pair


def planned_run(deployed: Struct, compiled: Struct, strategy: str, evolution: dict):
    """`plan_run` for a Delta table `db.t` under `schema_evolution: evolution`."""
    inputs = RunInputs(
        relation="db.t",
        view="db.t__dbt_tmp",
        invocation_id="0123456789abcdef",
        table_format="delta",
        strategy=strategy,
        deployed=deployed,
        properties={},
        compiled=compiled,
        settings=resolve_settings("model.p.t", evolution, None, None, {}),
    )
    return plan_run(inputs)


def test_the_load_reads_the_fitted_output_and_the_table_keeps_its_schema():
    deployed = S("id int, s struct<x:int,y:int>, n int, gone string")
    compiled = S("id int, s struct<x:bigint,z:string>, n string, extra int")
    evolution = {"on_additive_change": "ignore", "on_destructive_change": "ignore"}
    decided = planned_run(deployed, compiled, "append", evolution)
    assert decided.plan.operations == () and decided.statements == ()
    assert [j.change.dotted for j in decided.plan.ignored] == [
        "s.x",
        "s.z",
        "s.y",
        "n",
        "extra",
        "gone",
    ]
    assert decided.fits == (
        "SELECT `id`, IF(`s` IS NULL, NULL, named_struct('x', try_cast(`s`.`x` AS INT), "
        "'y', CAST(NULL AS INT))) AS `s`, CASE WHEN (ascii(`n`) BETWEEN 33 AND 126 AND ascii(`n`) NOT IN (43, 45, 46) AND ascii(`n`) NOT BETWEEN 48 AND 57) THEN NULL ELSE try_cast(`n` AS INT) END AS `n` FROM db.t__dbt_tmp"
    )


@pytest.mark.parametrize(
    "strategy, evolution",
    [
        ("append", {"strategy": "full_refresh"}),  # the plan is a full refresh
        ("table", {}),  # a table model's rebuild
    ],
)
def test_a_rebuild_keeps_an_ignored_removed_column(strategy, evolution):
    """A rebuild writes every row from the output: an ignored removed column stays in the
    table (NULL), never dropped with its values by the rebuild (review finding)."""
    deployed = S("id int, c string")
    compiled = S("id int, d string")
    evolution = {**evolution, "on_destructive_change": "ignore"}
    decided = planned_run(deployed, compiled, strategy, evolution)
    assert decided.fits is not None and "CAST(NULL AS STRING) AS `c`" in decided.fits
    assert [j.change.dotted for j in decided.plan.ignored] == ["c"]


@pytest.mark.parametrize("key", ["on_additive_change", "on_destructive_change"])
def test_ignore_on_a_snapshot_fails_at_parse(key):
    """A snapshot records its source as it is: `ignore` is refused when dbt parses the project,
    naming the key and what is allowed; a model may ignore, a snapshot may allow."""
    config = {"schema_evolution": {key: "ignore"}}
    snapshot = NodeConfig("snapshot.p.s (snapshots/s.sql)", config, {}, resource_type="snapshot")
    with pytest.raises(ConfigError) as raised:
        validate_node_config(snapshot)
    message = str(raised.value)
    assert f"`schema_evolution.{key}` is 'ignore' on a snapshot" in message
    assert "allowed on snapshots: allow, warn, error" in message
    validate_node_config(NodeConfig("model.p.m (models/m.sql)", config, {}))
    allowed = {"schema_evolution": {key: "allow"}}
    validate_node_config(NodeConfig("snapshot.p.s", allowed, {}, resource_type="snapshot"))
