"""core/contracts/constraints.py: what each table format does with a model's constraints (no Spark), and
the adapter side that runs them through dbt's own processing and warnings."""

from __future__ import annotations

import hashlib

import pytest
from dbt_common.exceptions import DbtDatabaseError
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.constraints import (
    NotNullCatalogMissing,
    build_not_null,
    declared_constraints,
    require_not_null_catalog,
    rules_for,
    run_explicit_build,
    support_for,
)
from dbt.adapters.spark_contracts.core.contracts.constraints import (
    NOT_ENFORCED,
    NOT_SUPPORTED,
    DeclaredConstraint,
    constraint_support,
    enforced_not_null_columns,
    explicit_build,
    not_null_constraint_name,
    not_null_expression,
    table_constraints,
)
from dbt.adapters.spark_contracts.core.evolution.plan import plan_schema_change
from dbt.adapters.spark_contracts.core.materialization.build_plan import Build, BuildPlan
from dbt.adapters.spark_contracts.core.schema.types import Field, Primitive, Struct
from dbt.adapters.spark_contracts.impl import SparkContractsAdapter
from dbt.adapters.spark_contracts.run.build import PlannedBuild
from dbt.adapters.spark_contracts.run.execute import PlanExecutor
from tests.unit.spark_type_strategies import any_names

INT, STRING = Primitive("int"), Primitive("string")


def _md5_8(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()[:8]


def test_support_per_format():
    assert constraint_support("delta") == {
        "not_null": "enforced",
        "check": "enforced",
        "primary_key": NOT_ENFORCED,
        "foreign_key": NOT_ENFORCED,
        "unique": NOT_ENFORCED,
    }
    assert constraint_support("ICEBERG")["not_null"] == "enforced"
    assert constraint_support("iceberg")["check"] == NOT_SUPPORTED
    for fmt in ("parquet", "orc", "csv", "hudi"):
        assert constraint_support(fmt)["not_null"] == NOT_SUPPORTED
        assert constraint_support(fmt)["check"] == NOT_SUPPORTED


def test_adapter_class_support_is_deltas_the_default_format():
    assert SparkContractsAdapter.CONSTRAINT_SUPPORT == support_for("delta")
    assert rules_for("iceberg").CONSTRAINT_SUPPORT == support_for("iceberg")
    assert rules_for("orc").CONSTRAINT_SUPPORT == support_for("parquet")
    assert rules_for("iceberg").type() == "spark_contracts (iceberg)"


MODEL = {
    "unique_id": "model.p.m",
    "columns": {
        "id": {
            "name": "id",
            "constraints": [
                {"type": "not_null"},
                {"type": "check", "expression": "id > 0"},
                {"type": "primary_key"},
            ],
        },
        "from": {"name": "from", "quote": True, "constraints": [{"type": "not_null"}]},
        "v": {"name": "v", "constraints": []},
    },
    "constraints": [
        {"type": "check", "name": "v_small", "expression": "v < 10"},
        {"type": "unique", "columns": ["id", "v"], "warn_unenforced": False},
        {"type": "not_null", "columns": ["v"]},
    ],
}


def test_delta_properties_from_a_model():
    constraints = table_constraints("delta", declared_constraints(MODEL, "delta"))
    assert constraints.not_null == ("id", "from", "v")
    assert dict(constraints.properties()) == {
        "delta.constraints.id_not_null": "`id` IS NOT NULL",
        "delta.constraints.from_not_null": "`from` IS NOT NULL",
        "delta.constraints.v_not_null": "`v` IS NOT NULL",
        f"delta.constraints.id_check_{_md5_8('id > 0')}": "id > 0",
        "delta.constraints.v_small": "v < 10",
        "dbt.constraints.id_primary_key": "id primary key",
        "dbt.constraints.id_v_unique": "unique (id, v)",
    }
    assert not constraints.explicit_schema  # one CTAS


def test_iceberg_keeps_not_null_and_informational_only():
    constraints = table_constraints("iceberg", declared_constraints(MODEL, "iceberg"))
    assert constraints.not_null == ("id", "from", "v")
    assert constraints.checks == ()
    assert dict(constraints.properties()) == {
        "dbt.constraints.id_primary_key": "id primary key",
        "dbt.constraints.id_v_unique": "unique (id, v)",
    }
    assert constraints.explicit_schema


def test_parquet_creates_no_constraint():
    constraints = table_constraints("parquet", declared_constraints(MODEL, "parquet"))
    assert constraints.not_null == () and constraints.checks == ()
    assert not constraints.explicit_schema


def test_dbt_warnings_follow_the_format_and_options(monkeypatch):
    import dbt.adapters.base.impl as base

    fired = []
    monkeypatch.setattr(base, "warn_or_error", lambda event: fired.append(event))
    declared_constraints(MODEL, "iceberg")
    seen = sorted((type(e).__name__, e.constraint, e.adapter) for e in fired)
    # iceberg: check unsupported, primary_key unenforced; unique opted out (warn_unenforced)
    assert seen == [
        ("ConstraintNotEnforced", "primary_key", "spark_contracts (iceberg)"),
        ("ConstraintNotSupported", "check", "spark_contracts (iceberg)"),
        ("ConstraintNotSupported", "check", "spark_contracts (iceberg)"),
    ]
    fired.clear()
    declared_constraints(MODEL, "delta")
    assert [(type(e).__name__, e.constraint) for e in fired] == [
        ("ConstraintNotEnforced", "primary_key")
    ]


def test_config_tblproperties_merge_with_constraints():
    constraints = table_constraints("delta", (DeclaredConstraint("not_null", ("a",)),))
    clause = constraints.tblproperties_clause({"delta.appendOnly": "false", "owner": "o'k"})
    assert clause == (
        " TBLPROPERTIES ('delta.appendOnly' = 'false', 'owner' = 'o\\'k', "
        "'delta.constraints.a_not_null' = '`a` IS NOT NULL')"
    )
    assert table_constraints("delta", ()).tblproperties_clause(None) == ""


@given(st.lists(any_names, min_size=1, max_size=4, unique_by=str.lower))
def test_not_null_names_round_trip_through_delta_properties(names):
    constraints = table_constraints(
        "delta", tuple(DeclaredConstraint("not_null", (n,)) for n in names)
    )
    properties = dict(constraints.properties())
    assert enforced_not_null_columns(properties) == {n.lower() for n in names}
    for name in names:
        key = "delta.constraints." + not_null_constraint_name(name)
        assert properties[key] == not_null_expression(name)


def test_enforced_not_null_ignores_other_checks():
    props = {
        "delta.constraints.a": "a > 0",
        "delta.constraints.b_not_null": "b IS NOT NULL",
        "delta.constraints.c": "(`c` is not null)",
        "owner": "x is not null",
    }
    assert enforced_not_null_columns(props) == {"b", "c"}


def test_planner_new_column_check_uses_the_same_name():
    from dbt.adapters.spark_contracts.core.evolution.operations import AddNotNullCheck
    from dbt.adapters.spark_contracts.core.evolution.plan import ColumnEvolution, Policy
    from dbt.adapters.spark_contracts.core.schema.diff import diff_schemas

    deployed = Struct((Field("a", INT),))
    compiled = Struct((Field("a", INT), Field("New Col", STRING, nullable=False)))
    policy = Policy(columns={"New Col": ColumnEvolution(default="'x'")})
    plan = plan_schema_change(
        diff_schemas(deployed, compiled), "delta", {}, policy, deployed, compiled
    )
    checks = [op for op in plan.operations if isinstance(op, AddNotNullCheck)]
    assert [c.constraint for c in checks] == [not_null_constraint_name("New Col")]


def test_tightened_note_is_silent_where_a_check_holds_it():
    from dbt.adapters.spark_contracts.core.evolution.plan import Policy
    from dbt.adapters.spark_contracts.core.schema.diff import diff_schemas

    deployed = Struct((Field("a", INT), Field("b", INT)))
    compiled = Struct((Field("a", INT, nullable=False), Field("b", INT, nullable=False)))
    props = {"delta.constraints.a_not_null": "`a` IS NOT NULL"}
    plan = plan_schema_change(
        diff_schemas(deployed, compiled), "delta", props, Policy(), deployed, compiled
    )
    assert plan.notes == ("NOT NULL in the model but nullable in the table (not enforced): `b`",)


SCHEMA = Struct((Field("id", INT, nullable=False), Field("tag", STRING)))


def test_schema_makes_declared_columns_not_null_only():
    analysed = Struct((Field("ID", INT, nullable=False), Field("tag", STRING, nullable=False)))
    constraints = table_constraints("iceberg", (DeclaredConstraint("not_null", ("id",)),))
    assert constraints.schema(analysed) == Struct(
        (Field("ID", INT, nullable=False), Field("tag", STRING, nullable=True))
    )


def test_a_build_through_the_twin_catalog_is_one_commit_from_the_stage():
    """The query fills a stage with the NOT NULL columns; the table is created or replaced from
    it in one CREATE (OR REPLACE) TABLE AS SELECT through the catalog's twin, which keeps them."""
    for exists, verb in ((False, "CREATE TABLE"), (True, "CREATE OR REPLACE TABLE")):
        build = explicit_build(
            "ic.s.t", "ic.s.t__s", exists, SCHEMA, "iceberg", "PARTITIONED BY (tag)", "q"
        )
        assert (
            build.create == "CREATE TABLE ic.s.t__s (`id` INT NOT NULL, `tag` STRING) USING iceberg"
        )
        assert build.load == "INSERT INTO ic.s.t__s q"
        assert build.publish == (
            f"{verb} ic_not_null.s.t USING iceberg PARTITIONED BY (tag) AS SELECT * FROM ic.s.t__s"
        )
        recorder = _Recorder()
        run_explicit_build(recorder.run, build)
        assert recorder.ran == [
            "drop table if exists ic.s.t__s purge",
            build.create,
            build.load,
            build.publish,
            "drop table if exists ic.s.t__s purge",
            "REFRESH TABLE ic.s.t",
        ]


@pytest.mark.parametrize(
    "fail_on", ["INSERT INTO ic.s.t__s", "CREATE OR REPLACE TABLE ic_not_null"]
)
def test_a_failed_twin_build_leaves_the_old_table_and_no_stage(fail_on):
    build = explicit_build("ic.s.t", "ic.s.t__s", True, SCHEMA, "iceberg", "", "q")
    recorder = _Recorder(fail_on)
    with pytest.raises(RuntimeError):
        run_explicit_build(recorder.run, build)
    assert recorder.ran[-1] == "drop table if exists ic.s.t__s purge"
    assert not any(s.startswith("CREATE OR REPLACE TABLE ic.s.t ") for s in recorder.ran)


class _Recorder:
    def __init__(self, fail_on: str | None = None):
        self.ran: list[str] = []
        self.fail_on = fail_on

    def run(self, sql: str) -> None:
        self.ran.append(sql)
        if self.fail_on and sql.startswith(self.fail_on):
            raise RuntimeError("violation")


class _Spark:
    """What `build_not_null` reads and sends: the catalogs the Spark it reaches has."""

    def __init__(self, catalogs: tuple[str, ...]):
        self.catalogs = catalogs
        self.ran: list[str] = []

    def fetch(self, sql: str) -> list[dict]:
        self.ran.append(sql)
        catalog = sql.rsplit(" ", 1)[-1]
        if catalog not in self.catalogs:
            raise DbtDatabaseError(f"[CATALOG_NOT_FOUND] {catalog}")
        return []

    def run(self, sql: str) -> None:
        self.ran.append(sql)

    def schema(self, sql: str) -> Struct:
        self.ran.append(f"schema of {sql}")
        return SCHEMA


@pytest.mark.parametrize("exists", [False, True])
def test_a_not_null_build_without_the_catalogs_twin_is_refused_before_anything_is_written(
    exists: bool,
):
    """Without the twin the build would take two commits (the table replaced empty, then
    filled): a reader, a failure or a killed run could leave it empty. The executor asks first
    (`require_not_null_catalog`, one read) and refuses, naming the catalog to add and how,
    before the build's first statement: not even the drop a drop-first build sends first."""
    constraints = table_constraints("iceberg", (DeclaredConstraint("not_null", ("id",)),))
    action = Build.DROP_AND_CREATE if exists else Build.CREATE
    plan = PlannedBuild(
        BuildPlan(action, "iceberg", "table", "iceberg"), None, "select 1 as id", constraints
    )
    assert plan.explicit_build
    spark = _Spark(catalogs=("ic",))

    class Adapter:
        def _spark(self) -> _Spark:
            return spark

        def __getattr__(self, name: str):
            raise AssertionError(f"the build went on to {name}")

    with pytest.raises(NotNullCatalogMissing) as refused:
        PlanExecutor(Adapter()).execute(plan, "ic.s.t", object() if exists else None, "select 1")
    assert spark.ran == ["show namespaces in ic_not_null"]  # a read, and nothing else
    message = str(refused.value)
    assert "ic_not_null" in message and "use-nullable-query-schema=false" in message
    assert "nothing was changed" in message
    twin = _Spark(catalogs=("ic", "ic_not_null"))
    require_not_null_catalog(twin, "ic.s.t")  # the twin there: no refusal
    build_not_null(twin, "ic.s.t", "select 1 as id", constraints, "", exists)
    verb = "CREATE OR REPLACE TABLE" if exists else "CREATE TABLE"
    assert any(s.startswith(f"{verb} ic_not_null.s.t ") for s in twin.ran)
    assert not any(
        s.startswith(("CREATE OR REPLACE TABLE ic.", "INSERT INTO ic.s.t ")) for s in twin.ran
    )


def test_the_session_adds_the_iceberg_catalogs_twin_with_the_same_settings():
    from dbt.adapters.spark_contracts.connection.session import with_not_null_twin

    conf = {
        "spark.sql.catalog.iceberg": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.iceberg.type": "rest",
        "spark.sql.catalog.iceberg.uri": "http://127.0.0.1:8181",
        "spark.sql.catalog.icebergish": "other",
    }
    twin = with_not_null_twin(dict(conf), "iceberg")
    assert twin["spark.sql.catalog.iceberg_not_null"] == "org.apache.iceberg.spark.SparkCatalog"
    assert twin["spark.sql.catalog.iceberg_not_null.type"] == "rest"
    assert twin["spark.sql.catalog.iceberg_not_null.uri"] == "http://127.0.0.1:8181"
    assert twin["spark.sql.catalog.iceberg_not_null.use-nullable-query-schema"] == "false"
    assert twin["spark.sql.catalog.iceberg_not_null.cache-enabled"] == "false"
    assert "spark.sql.catalog.icebergish_not_null" not in twin
    assert with_not_null_twin({}, "iceberg") == {}  # no Iceberg catalog: no twin
