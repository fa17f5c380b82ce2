"""dbt's official clone, relation-type, hooks and unit-testing suites on real Spark (session
profile: Delta by default), plus focused tests of what they found: `dbt clone --full-refresh`
into Delta, hook errors as dbt's DbtDatabaseError, and a hook's plain CREATE TABLE being Delta."""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List

import pytest
from dbt.tests.adapter.dbt_clone.test_dbt_clone import (
    BaseClone,
    BaseCloneNotPossible,
    BaseClonePossible,
)
from dbt.tests.adapter.hooks.test_model_hooks import (
    BaseHookRefs,
    BasePrePostModelHooks,
    BasePrePostModelHooksOnSeeds,
    BasePrePostModelHooksOnSnapshots,
)
from dbt.tests.adapter.hooks.test_run_hooks import BaseAfterRunHooks, BasePrePostRunHooks
from dbt.tests.adapter.relations.test_changing_relation_type import (
    BaseChangeRelationTypeValidator,
)
from dbt.tests.adapter.unit_testing.test_case_insensitivity import BaseUnitTestCaseInsensivity
from dbt.tests.adapter.unit_testing.test_invalid_input import BaseUnitTestInvalidInput
from dbt.tests.adapter.unit_testing.test_quoted_reserved_word_column_names import (
    BaseUnitTestQuotedReservedWordColumnNames,
    my_model_sql,
    test_my_model_csv_fixtures_yml,
)
from dbt.tests.adapter.unit_testing.test_types import BaseUnitTestingTypes
from dbt.tests.util import run_dbt, run_dbt_and_capture
from dbt_common.exceptions import DbtDatabaseError

JAVA_FRAME = "\tat org."  # a line of a Java stack trace


def _provider(project: Any, relation: str) -> str:
    rows = project.run_sql(f"describe extended {relation}", fetch="all")
    return {r[0]: r[1] for r in rows}.get("Provider", "")


# ---- dbt clone ------------------------------------------------------------------------------


class TestClonePossible(BaseClonePossible):
    """Delta shallow-clones the seed, the table model and the snapshot (all Delta by default);
    the view model is cloned as a view."""


class TestCloneNotPossible(BaseCloneNotPossible):
    pass


class TestCloneFullRefreshDelta(BaseClone):
    """The dbt-spark user's project (`file_format: delta` set explicitly): clone, then clone
    again with --full-refresh over the existing clones. dbt-spark's clone replaces a non-empty
    Delta table with a clone, which Delta refuses (DELTA_UNSUPPORTED_NON_EMPTY_CLONE) with a Java
    stack trace."""

    @pytest.fixture(scope="class")
    def project_config_update(self) -> Dict[str, Any]:
        return {
            "models": {"+file_format": "delta"},
            "seeds": {"+file_format": "delta", "test": {"quote_columns": False}},
            "snapshots": {"+file_format": "delta"},
        }

    def test_clone_full_refresh(self, project: Any, other_schema: str) -> None:
        project.create_test_schema(other_schema)
        self.run_and_save_state(project.project_root, with_snapshot=True)
        clone_args = ["clone", "--state", "state", "--target", "otherschema"]

        run_dbt(clone_args)
        # the source changes after the first clone: a full refresh must show the new rows
        project.run_sql(f"insert into {project.test_schema}.table_model values (3, 'Carol')")
        results, output = run_dbt_and_capture([*clone_args, "--full-refresh"])
        assert len(results) == 4
        assert JAVA_FRAME not in output

        clone = f"{other_schema}.table_model"
        assert _provider(project, clone) == "delta"
        history = project.run_sql(f"describe history {clone}", fetch="all")
        assert "CLONE" in str(history[0][4]).upper()  # `operation`: a clone, not a copy
        rows = project.run_sql(f"select id, name from {clone} order by id", fetch="all")
        assert [tuple(r) for r in rows] == [(1, "Alice"), (2, "Bob"), (3, "Carol")]
        kinds = Counter(
            r.type
            for r in project.adapter.list_relations(database=project.database, schema=other_schema)
        )
        assert kinds == Counter({"table": 3, "view": 1})


# ---- errors: typed, no Java stack trace ------------------------------------------------------

macros__failing_clone = """
{% macro clone_twice(source, target) %}
  {% do run_query("create or replace table " ~ target ~ " shallow clone " ~ source) %}
  {% do run_query("create or replace table " ~ target ~ " shallow clone " ~ source) %}
{% endmacro %}
"""


class TestDeltaErrorWithoutJavaStackTrace:
    """A Delta error pyspark does not convert (a Py4JJavaError: DeltaIllegalStateException)
    reaches the user as a Database Error with Delta's message, without the Java stack."""

    @pytest.fixture(scope="class")
    def macros(self) -> Dict[str, str]:
        return {"clone_twice.sql": macros__failing_clone}

    def test_run_operation_error(self, project: Any) -> None:
        source = f"{project.test_schema}.clone_source"
        project.run_sql(f"create table {source} using delta as select 1 as id")
        args = f"{{source: {source}, target: {project.test_schema}.clone_target}}"
        _, output = run_dbt_and_capture(
            ["run-operation", "clone_twice", "--args", args], expect_pass=False
        )
        assert "DELTA_UNSUPPORTED_NON_EMPTY_CLONE" in output
        assert "Database Error" in output
        assert JAVA_FRAME not in output


class TestHookErrorsAreDatabaseErrors:
    """SQL that Spark rejects in a model's post-hook or an on-run-end hook is dbt's
    DbtDatabaseError, like the model's own SQL."""

    @pytest.fixture(scope="class")
    def models(self) -> Dict[str, str]:
        return {
            "hooked.sql": (
                "{{ config(post_hook='select no_such_column from {{ this }}') }}\nselect 1 as id"
            )
        }

    def test_post_hook(self, project: Any) -> None:
        results = run_dbt(["run"], expect_pass=False)
        assert len(results) == 1
        assert str(results[0].status) == "error"
        assert results[0].message.startswith("Database Error in model hooked")
        assert "no_such_column" in results[0].message


class TestOnRunEndErrorIsDatabaseError:
    @pytest.fixture(scope="class")
    def project_config_update(self) -> Dict[str, Any]:
        return {"on-run-end": ["select * from no_such_table"]}

    @pytest.fixture(scope="class")
    def models(self) -> Dict[str, str]:
        return {"plain.sql": "select 1 as id"}

    def test_on_run_end(self, project: Any) -> None:
        results = run_dbt(["run"], expect_pass=False)
        hooks = [r for r in results if r.node.resource_type == "operation"]
        assert len(hooks) == 1
        assert str(hooks[0].status) == "error"
        # dbt reports a failed run hook by the error's message alone; it is Spark's own, no
        # longer a DbtRuntimeError re-wrapping another ("Runtime Error\n  Runtime Error ...")
        assert "TABLE_OR_VIEW_NOT_FOUND" in hooks[0].message
        assert "no_such_table" in hooks[0].message
        assert "Runtime Error" not in hooks[0].message

    def test_hook_sql_raises_database_error(self, project: Any) -> None:
        # what dbt calls to run a hook's SQL (adapter.execute), and the error type it gets
        with project.adapter.connection_named("hook"):
            with pytest.raises(DbtDatabaseError, match="TABLE_OR_VIEW_NOT_FOUND"):
                project.adapter.execute("select * from no_such_table", auto_begin=False)


# ---- plain CREATE TABLE is Delta -------------------------------------------------------------


class TestPlainCreateTableIsDelta:
    """`create table` without USING, in hooks and run-operations, makes a Delta table (Spark's
    own default is parquet); an explicit USING parquet stays parquet; Iceberg is Iceberg."""

    @pytest.fixture(scope="class")
    def macros(self) -> Dict[str, str]:
        return {
            "make_tables.sql": """
{% macro make_tables() %}
  {% do run_query("create table " ~ target.schema ~ ".op_plain (id int)") %}
  {% do run_query("create table " ~ target.schema ~ ".op_parquet (id int) using parquet") %}
  {% do run_query("create namespace if not exists iceberg." ~ target.schema) %}
  {% do run_query("create table iceberg." ~ target.schema ~ ".op_iceberg (id int)") %}
{% endmacro %}
"""
        }

    @pytest.fixture(scope="class")
    def models(self) -> Dict[str, str]:
        return {
            "hooked.sql": """
{{ config(
    pre_hook="create table {{ this.schema }}.hook_plain (id int, name string)",
    post_hook="create table {{ this.schema }}.hook_ctas as select * from {{ this }}",
) }}
select 1 as id
"""
        }

    def test_hooks_and_run_operation(self, project: Any) -> None:
        run_dbt(["run"])
        run_dbt(["run-operation", "make_tables"])
        schema = project.test_schema
        try:
            assert _provider(project, f"{schema}.hook_plain") == "delta"
            assert _provider(project, f"{schema}.hook_ctas") == "delta"
            assert _provider(project, f"{schema}.op_plain") == "delta"
            assert _provider(project, f"{schema}.op_parquet") == "parquet"
            assert _provider(project, f"iceberg.{schema}.op_iceberg") == "iceberg"
        finally:
            project.run_sql(f"drop table if exists iceberg.{schema}.op_iceberg")
            project.run_sql(f"drop namespace if exists iceberg.{schema}")


# ---- relation types --------------------------------------------------------------------------


class TestChangeRelationType(BaseChangeRelationTypeValidator):
    pass


# ---- hooks -----------------------------------------------------------------------------------
# dbt's hooks suites read back what the hooks wrote. Two things differ on Spark, nothing else:
# the read-back query quotes identifiers with double quotes, which Spark reads as string
# literals (Spark quotes identifiers with backticks), and the expected target values are
# Postgres' (type `postgres`, dbname `dbt`, user `root`). The suites' data files
# (data/seed_model.sql, data/seed_run.sql) are here in Spark SQL (STRING for TEXT).

HOOK_FIELDS = [
    "test_state",
    "target_dbname",
    "target_host",
    "target_name",
    "target_schema",
    "target_threads",
    "target_type",
    "target_user",
    "target_pass",
    "run_started_at",
    "invocation_id",
    "thread_id",
]


def _hook_rows(project: Any, table: str, state: str) -> List[Dict[str, Any]]:
    fields = ", ".join(f"`{f}`" for f in HOOK_FIELDS)
    rows = project.run_sql(
        f"select {fields} from {project.test_schema}.{table} where test_state = '{state}'",
        fetch="all",
    )
    return [dict(zip(HOOK_FIELDS, row, strict=True)) for row in rows]


def _check_hook_row(ctx: Dict[str, Any], state: str, project: Any) -> None:
    target = project.adapter.config.to_target_dict()  # what `target` renders in a hook
    assert ctx["test_state"] == state
    assert ctx["target_dbname"] == target.get("dbname", "")
    assert ctx["target_host"] == target.get("host", "")
    assert ctx["target_name"] == "default"
    assert ctx["target_schema"] == project.test_schema
    assert ctx["target_threads"] == 4
    assert ctx["target_type"] == "spark_contracts"
    assert ctx["target_user"] == target.get("user", "")
    assert ctx["target_pass"] == ""
    assert ctx["run_started_at"], "run_started_at was not set"
    assert ctx["invocation_id"], "invocation_id was not set"
    assert ctx["thread_id"].startswith("Thread-") or ctx["thread_id"] == "MainThread"


class SparkModelHookChecks:
    def get_ctx_vars(self, state: str, count: int, project: Any) -> List[Dict[str, Any]]:
        ctxs = _hook_rows(project, "on_model_hook", state)
        assert len(ctxs) == count, f"{len(ctxs)} rows in the hooks table, expected {count}"
        return ctxs

    def check_hooks(self, state: str, project: Any, host: Any, count: int = 1) -> None:
        for ctx in self.get_ctx_vars(state, count, project):
            _check_hook_row(ctx, state, project)
            assert ctx["thread_id"].startswith("Thread-")


class TestPrePostModelHooks(SparkModelHookChecks, BasePrePostModelHooks):
    pass


class TestHookRefs(SparkModelHookChecks, BaseHookRefs):
    pass


class TestPrePostModelHooksOnSeeds(BasePrePostModelHooksOnSeeds):
    pass


class TestPrePostModelHooksOnSnapshots(BasePrePostModelHooksOnSnapshots):
    pass


class TestPrePostRunHooks(BasePrePostRunHooks):
    @pytest.fixture(scope="class")
    def project_config_update(self) -> Dict[str, Any]:
        # dbt's, with `string` for `text` (Spark has no TEXT type)
        return {
            "on-run-start": [
                "{{ custom_run_hook('start', target, run_started_at, invocation_id) }}",
                "create table {{ target.schema }}.start_hook_order_test ( id int )",
                "drop table {{ target.schema }}.start_hook_order_test",
                "{{ log(env_var('TERM_TEST'), info=True) }}",
            ],
            "on-run-end": [
                "{{ custom_run_hook('end', target, run_started_at, invocation_id) }}",
                "create table {{ target.schema }}.end_hook_order_test ( id int )",
                "drop table {{ target.schema }}.end_hook_order_test",
                "create table {{ target.schema }}.schemas ( schema string )",
                "insert into {{ target.schema }}.schemas (schema) values "
                "{% for schema in schemas %}( '{{ schema }}' )"
                "{% if not loop.last %},{% endif %}{% endfor %}",
                "create table {{ target.schema }}.db_schemas ( db string, schema string )",
                "insert into {{ target.schema }}.db_schemas (db, schema) values "
                "{% for db, schema in database_schemas %}('{{ db }}', '{{ schema }}' )"
                "{% if not loop.last %},{% endif %}{% endfor %}",
            ],
            "seeds": {"quote_columns": False},
        }

    def get_ctx_vars(self, state: str, project: Any) -> Dict[str, Any]:
        ctxs = _hook_rows(project, "on_run_hook", state)
        assert len(ctxs) == 1, f"{len(ctxs)} rows in the hooks table, expected 1"
        return ctxs[0]

    def check_hooks(self, state: str, project: Any, host: Any) -> None:
        _check_hook_row(self.get_ctx_vars(state, project), state, project)

    def assert_used_schemas(self, project: Any) -> None:
        # dbt's check, except the database: spark_catalog relations have none (None, as in
        # dbt-spark), which the on-run-end hook's `'{{ db }}'` writes as the text 'None'.
        rows = project.run_sql(f"select * from {project.test_schema}.schemas", fetch="all")
        assert [tuple(r) for r in rows] == [(project.test_schema,)]
        rows = project.run_sql(f"select * from {project.test_schema}.db_schemas", fetch="all")
        assert project.database is None
        assert [tuple(r) for r in rows] == [("None", project.test_schema)]


class TestAfterRunHooks(BaseAfterRunHooks):
    pass


# ---- unit tests ------------------------------------------------------------------------------


class TestUnitTestingTypes(BaseUnitTestingTypes):
    @pytest.fixture
    def data_types(self) -> List[List[str]]:
        # (sql_value, yaml_value) in Spark SQL, as dbt-databricks configures this suite: Spark has
        # no TIMESTAMPTZ literal and no json type; it has arrays, maps and structs.
        return [
            ["1", "1"],
            ["'1'", "1"],
            ["2.0", "2.0"],
            ["'string'", "string"],
            ["true", "true"],
            ["DATE '2020-01-02'", "2020-01-02"],
            ["TIMESTAMP '2013-11-03 00:00:00-0'", "2013-11-03 00:00:00-0"],
            ["'1'::numeric", "1"],
            ["array(1, 2, 3)", "'array(1, 2, 3)'"],
            [
                "map('10', 't', '15', 'f', '20', NULL)",
                """'map("10", "t", "15", "f", "20", NULL)'""",
            ],
            [
                'named_struct("a", 1, "b", 2, "c", 3)',
                """'named_struct("a", 1, "b", 2, "c", 3)'""",
            ],
        ]


class TestUnitTestCaseInsensitivity(BaseUnitTestCaseInsensivity):
    pass


class TestUnitTestInvalidInput(BaseUnitTestInvalidInput):
    pass


class TestUnitTestQuotedReservedWordColumnNames(BaseUnitTestQuotedReservedWordColumnNames):
    @pytest.fixture(scope="class")
    def models(self) -> Dict[str, str]:
        # Spark quotes identifiers with backticks ("GROUP" is a string literal in Spark SQL)
        return {
            "my_model.sql": my_model_sql,
            "my_upstream_model.sql": "select 1 as `GROUP`",
            "unit_tests.yml": test_my_model_csv_fixtures_yml,
        }
