"""dbt-tests-adapter's constraints suites on Delta (the default file_format), unchanged except for
the fixtures adapters are meant to override. Every changed expectation says why; none is looser
than dbt's: where dbt-spark expects the replaced table after a violating rebuild (`red`), these
expect the previous table and rows (`blue`) and no new commit."""

import pytest
from dbt.tests.adapter.constraints import fixtures
from dbt.tests.adapter.constraints.test_constraints import (
    BaseConstraintQuotedColumn,
    BaseConstraintsRollback,
    BaseConstraintsRuntimeDdlEnforcement,
    BaseIncrementalConstraintsColumnsEqual,
    BaseIncrementalConstraintsRollback,
    BaseIncrementalConstraintsRuntimeDdlEnforcement,
    BaseModelConstraintsRuntimeEnforcement,
    BaseTableConstraintsColumnsEqual,
    BaseViewConstraintsColumnsEqual,
)
from dbt.tests.util import relation_from_name


def spark_types(schema_yml: str) -> str:
    # Spark SQL has no `text` type: the same columns as `string`.
    return schema_yml.replace("data_type: text", "data_type: string")


class SparkTypes:
    """Spark's names for the types dbt's suites write in Postgres' (TEXT, bool, timestamptz, ...).
    The contract error prints types as Spark's simple strings, upper-cased."""

    @pytest.fixture
    def string_type(self):
        return "STRING"

    @pytest.fixture
    def int_type(self):
        return "INT"

    @pytest.fixture
    def data_types(self, schema_int_type, int_type, string_type):
        # sql_column_value, schema_data_type, error_data_type: every Spark type family the
        # contract compares (nested ones included), where dbt's list is Postgres'
        return [
            ["1", schema_int_type, int_type],
            ["'1'", string_type, string_type],
            ["true", "boolean", "BOOLEAN"],
            ["cast('2013-11-03 00:00:00' as timestamp)", "timestamp", "TIMESTAMP"],
            ["cast('2013-11-03' as date)", "date", "DATE"],
            ["array('a','b','c')", "array<string>", "ARRAY<STRING>"],
            ["array(1,2,3)", "array<int>", "ARRAY<INT>"],
            ["cast(1 as decimal(4,2))", "decimal", "DECIMAL"],
            ["named_struct('a', 1, 'b', 'x')", "struct<a:int,b:string>", "STRUCT<A:INT,B:STRING>"],
            ["map('k', 1)", "map<string,int>", "MAP<STRING,INT>"],
        ]


class TestTableConstraintsColumnsEqual(SparkTypes, BaseTableConstraintsColumnsEqual):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model_wrong_order.sql": fixtures.my_model_wrong_order_sql,
            "my_model_wrong_name.sql": fixtures.my_model_wrong_name_sql,
            "constraints_schema.yml": spark_types(fixtures.model_schema_yml),
        }


class TestViewConstraintsColumnsEqual(SparkTypes, BaseViewConstraintsColumnsEqual):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model_wrong_order.sql": fixtures.my_model_view_wrong_order_sql,
            "my_model_wrong_name.sql": fixtures.my_model_view_wrong_name_sql,
            "constraints_schema.yml": spark_types(fixtures.model_schema_yml),
        }


class TestIncrementalConstraintsColumnsEqual(SparkTypes, BaseIncrementalConstraintsColumnsEqual):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model_wrong_order.sql": fixtures.my_model_incremental_wrong_order_sql,
            "my_model_wrong_name.sql": fixtures.my_model_incremental_wrong_name_sql,
            "constraints_schema.yml": spark_types(fixtures.model_schema_yml),
        }


# The DDL dbt's suites expect is Postgres' `create table (columns constraints); insert`. On Delta
# the same constraints ride in ONE `create or replace table ... as select`: not_null and check as
# CHECK constraints (`delta.constraints.*`, checked against the rows the statement writes), the
# informational primary_key / foreign_key / unique as `dbt.constraints.*` properties.
_COLUMN_CONSTRAINTS_SQL = """
create or replace table <model_identifier>
    using delta
    tblproperties (
      'delta.constraints.id_not_null' = '`id` IS NOT NULL',
      'delta.constraints.id_check_{check_a}' = '(id > 0)',
      'delta.constraints.id_check_{check_b}' = 'id >= 1',
      'dbt.constraints.id_primary_key' = 'id primary key',
      'dbt.constraints.id_foreign_key' = 'id references <foreign_key_model_identifier> (id)',
      'dbt.constraints.id_unique' = 'id unique'
    )
    as
select id, color, date_day from
( -- depends_on: <foreign_key_model_identifier>
  select 'blue' as color, 1 as id, '2019-01-01' as date_day
) as model_subq
"""


def _md5_8(text: str) -> str:
    import hashlib

    return hashlib.md5(text.encode()).hexdigest()[:8]


class TestTableConstraintsRuntimeDdlEnforcement(BaseConstraintsRuntimeDdlEnforcement):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": fixtures.my_model_wrong_order_depends_on_fk_sql,
            "foreign_key_model.sql": fixtures.foreign_key_model_sql,
            "constraints_schema.yml": spark_types(fixtures.model_fk_constraint_schema_yml),
        }

    @pytest.fixture(scope="class")
    def expected_sql(self):
        return _COLUMN_CONSTRAINTS_SQL.format(check_a=_md5_8("(id > 0)"), check_b=_md5_8("id >= 1"))


class TestIncrementalConstraintsRuntimeDdlEnforcement(
    BaseIncrementalConstraintsRuntimeDdlEnforcement
):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": fixtures.my_model_incremental_wrong_order_depends_on_fk_sql,
            "foreign_key_model.sql": fixtures.foreign_key_model_sql,
            "constraints_schema.yml": spark_types(fixtures.model_fk_constraint_schema_yml),
        }

    @pytest.fixture(scope="class")
    def expected_sql(self):
        return _COLUMN_CONSTRAINTS_SQL.format(check_a=_md5_8("(id > 0)"), check_b=_md5_8("id >= 1"))


class TestModelConstraintsRuntimeEnforcement(BaseModelConstraintsRuntimeEnforcement):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": fixtures.my_model_wrong_order_depends_on_fk_sql,
            "foreign_key_model.sql": fixtures.foreign_key_model_sql,
            "constraints_schema.yml": spark_types(fixtures.constrained_model_schema_yml),
        }

    @pytest.fixture(scope="class")
    def expected_sql(self):
        # model-level constraints: the same CHECK constraints; the informational ones as dbt
        # renders them, under their names (or their columns and type)
        return """
create or replace table <model_identifier>
    using delta
    tblproperties (
      'delta.constraints.id_not_null' = '`id` IS NOT NULL',
      'delta.constraints.check_{check_a}' = '(id > 0)',
      'delta.constraints.check_{check_b}' = 'id >= 1',
      'dbt.constraints.id_primary_key' = 'primary key (id)',
      'dbt.constraints.strange_uniqueness_requirement' =
        'constraint strange_uniqueness_requirement unique (color, date_day)',
      'dbt.constraints.id_foreign_key' =
        'foreign key (id) references <foreign_key_model_identifier> (id)'
    )
    as
select id, color, date_day from
( -- depends_on: <foreign_key_model_identifier>
  select 'blue' as color, 1 as id, '2019-01-01' as date_day
) as model_subq
""".format(check_a=_md5_8("(id > 0)"), check_b=_md5_8("id >= 1"))


class TestConstraintQuotedColumn(BaseConstraintQuotedColumn):
    @pytest.fixture(scope="class")
    def models(self):
        # Spark quotes identifiers with backticks ("from" is a string literal in Spark SQL)
        return {
            "my_model.sql": fixtures.my_model_with_quoted_column_name_sql,
            "constraints_schema.yml": spark_types(fixtures.model_quoted_column_schema_yml).replace(
                '"from"', "`from`"
            ),
        }

    @pytest.fixture(scope="class")
    def expected_sql(self):
        return """
create or replace table <model_identifier>
    using delta
    tblproperties (
      'delta.constraints.id_not_null' = '`id` IS NOT NULL',
      'delta.constraints.from_not_null' = '`from` IS NOT NULL',
      'delta.constraints.check_{check}' = '(`from` = \\'blue\\')'
    )
    as
select id, `from`, date_day from
( select 'blue' as `from`, 1 as id, '2019-01-01' as date_day ) as model_subq
""".format(check=_md5_8("(`from` = 'blue')"))


def _commits(project, name: str) -> int:
    relation = relation_from_name(project.adapter, name)
    return len(project.run_sql(f"describe history {relation}", fetch="all"))


class DeltaViolations:
    @pytest.fixture(scope="class")
    def expected_error_messages(self):
        # ALL of them (dbt-spark and dbt-databricks accept ANY): Delta's error class, and the
        # violating row. Which of id's constraints Delta names first (not_null or a check, all
        # fail on a null id) is Delta's choice.
        return ["DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", "violated by row with values", "id : null"]


class TestTableConstraintsRollback(DeltaViolations, BaseConstraintsRollback):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": fixtures.my_model_sql,
            "constraints_schema.yml": spark_types(fixtures.model_schema_yml),
        }

    # expected_color stays dbt's "blue" (dbt-spark expects "red": its constraints came after
    # the replace); and the failed rebuild made no commit at all
    def test__constraints_enforcement_rollback(
        self, project, expected_color, expected_error_messages, null_model_sql
    ):
        super().test__constraints_enforcement_rollback(
            project, expected_color, expected_error_messages, null_model_sql
        )
        assert _commits(project, "my_model") == 1


class TestIncrementalConstraintsRollback(DeltaViolations, BaseIncrementalConstraintsRollback):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": fixtures.my_incremental_model_sql,
            "constraints_schema.yml": spark_types(fixtures.model_schema_yml),
        }
