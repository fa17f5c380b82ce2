"""dbt's official simple_snapshot suites (dbt-tests-adapter), on real Spark with the session
profile: snapshots are Delta by default.

The test bodies are dbt's own. What is overridden, and why:
- `project`: the suites set up their data with Postgres SQL from module constants; its
  `run_sql` runs the Spark spelling of the same statements (tests/functional/adapter/
  postgres_sql.py). The snapshots dbt builds are not touched.
- `snapshots` / `models` where the fixture selects from `{{ target.database }}.{{ target.schema }}`:
  on Spark the database is not a level above the schema (it is None), so the SQL names the
  schema only.
"""

import datetime

import pytest
from dbt.tests.adapter.simple_snapshot import fixtures as various
from dbt.tests.adapter.simple_snapshot import new_record_dbt_valid_to_current as valid_to_current
from dbt.tests.adapter.simple_snapshot import new_record_timestamp_mode as new_record
from dbt.tests.adapter.simple_snapshot import test_ephemeral_snapshot_hard_deletes as ephemeral
from dbt.tests.adapter.simple_snapshot.new_record_check_mode import BaseSnapshotNewRecordCheckMode
from dbt.tests.adapter.simple_snapshot.new_record_dbt_valid_to_current import (
    BaseSnapshotNewRecordDbtValidToCurrent,
)
from dbt.tests.adapter.simple_snapshot.new_record_timestamp_mode import (
    BaseSnapshotNewRecordTimestampMode,
)
from dbt.tests.adapter.simple_snapshot.test_ephemeral_snapshot_hard_deletes import (
    BaseSnapshotEphemeralHardDeletes,
    BaseSnapshotNewColumnSpecificCheckCols,
    BaseSnapshotNewColumnTimestampStrategy,
    BaseSnapshotNewColumnWithDeletes,
)
from dbt.tests.adapter.simple_snapshot.test_snapshot import BaseSimpleSnapshot, BaseSnapshotCheck
from dbt.tests.adapter.simple_snapshot.test_various_configs import (
    BaseSnapshotColumnNames,
    BaseSnapshotColumnNamesFromDbtProject,
    BaseSnapshotDbtValidToCurrent,
    BaseSnapshotInvalidColumnNames,
    BaseSnapshotMultiUniqueKey,
)
from dbt.tests.util import check_relations_equal, run_dbt

from tests.functional.adapter.postgres_sql import run_postgres_sql

CURRENT = datetime.datetime(2099, 12, 31)  # the suite's dbt_valid_to_current


def schema_only(sql: str) -> str:
    """The fixture's SQL naming `schema.table` (Spark has no database above the schema)."""
    return sql.replace("{{target.database}}.{{target.schema}}", "{{target.schema}}")


class PostgresSetupSql:
    @pytest.fixture(scope="class")
    def project(self, project):
        # the suites' setup SQL is Postgres; run its Spark spelling (see postgres_sql.py)
        project.run_sql = run_postgres_sql(project.run_sql)
        return project


class SchemaOnlySnapshotSql:
    @pytest.fixture(scope="class")
    def snapshots(self):
        # fixtures.snapshot_actual_sql reads `{{target.database}}.{{target.schema}}.seed`
        return {"snapshot.sql": schema_only(various.snapshot_actual_sql)}


# ---- test_snapshot ----------------------------------------------------------------------------
class TestSimpleSnapshot(PostgresSetupSql, BaseSimpleSnapshot):
    pass


class TestSnapshotCheck(PostgresSetupSql, BaseSnapshotCheck):
    pass


# ---- test_various_configs -------------------------------------------------------------------
class TestSnapshotColumnNames(PostgresSetupSql, SchemaOnlySnapshotSql, BaseSnapshotColumnNames):
    pass


class TestSnapshotColumnNamesFromDbtProject(
    PostgresSetupSql, SchemaOnlySnapshotSql, BaseSnapshotColumnNamesFromDbtProject
):
    pass


class TestSnapshotInvalidColumnNames(
    PostgresSetupSql, SchemaOnlySnapshotSql, BaseSnapshotInvalidColumnNames
):
    pass


class TestSnapshotDbtValidToCurrent(
    PostgresSetupSql, SchemaOnlySnapshotSql, BaseSnapshotDbtValidToCurrent
):
    def test_valid_to_current(self, project):
        """dbt's steps and checks; dbt's body reads rows by position from a query without
        ORDER BY (Postgres' heap order). Spark gives such a query no order (Delta's MERGE
        rewrites the file in join order), so the rows are read by id and validity instead."""
        project.run_sql(various.create_seed_sql)
        project.run_sql(various.create_snapshot_expected_sql)
        project.run_sql(various.seed_insert_sql)
        project.run_sql(various.populate_snapshot_expected_valid_to_current_sql)
        assert len(run_dbt(["snapshot"])) == 1
        assert self.valid_to(project) == {(i, 1): CURRENT for i in range(1, 21)}

        project.run_sql(various.invalidate_sql)
        project.run_sql(various.update_with_current_sql)
        assert len(run_dbt(["snapshot"])) == 1
        valid_to = self.valid_to(project)
        assert valid_to[(1, 1)] == CURRENT
        # the original row that was updated is no longer current; its new version is
        assert valid_to[(10, 1)] == datetime.datetime(2016, 8, 20, 16, 44, 49)
        assert valid_to[(10, 2)] == CURRENT
        assert len(valid_to) == 31
        check_relations_equal(project.adapter, ["snapshot_actual", "snapshot_expected"])

    @staticmethod
    def valid_to(project):
        """{(id, version): TEST_VALID_TO}, versions numbered by test_valid_from."""
        rows = project.run_sql(
            "select id, test_valid_to from {schema}.snapshot_actual order by id, test_valid_from",
            fetch="all",
        )
        versions: dict = {}
        out = {}
        for id_, valid_to in rows:
            versions[id_] = versions.get(id_, 0) + 1
            out[(id_, versions[id_])] = valid_to
        return out


class TestSnapshotMultiUniqueKey(PostgresSetupSql, BaseSnapshotMultiUniqueKey):
    @pytest.fixture(scope="class")
    def models(self):
        # fixtures.model_seed_sql reads `{{target.database}}.{{target.schema}}.seed`
        return {
            "seed.sql": schema_only(various.model_seed_sql),
            "snapshots.yml": various.snapshots_multi_key_yml,
            "ref_snapshot.sql": various.ref_snapshot_sql,
        }


# ---- hard_deletes: new_record ---------------------------------------------------------------
class TestSnapshotNewRecordTimestampMode(PostgresSetupSql, BaseSnapshotNewRecordTimestampMode):
    @pytest.fixture(scope="class")
    def snapshots(self):
        # new_record_timestamp_mode reads `{{target.database}}.{{target.schema}}.seed`
        return {"snapshot.sql": schema_only(new_record._snapshot_actual_sql)}


class TestSnapshotNewRecordCheckMode(PostgresSetupSql, BaseSnapshotNewRecordCheckMode):
    @pytest.fixture(scope="class")
    def snapshots(self):
        # new_record_timestamp_mode reads `{{target.database}}.{{target.schema}}.seed`
        return {"snapshot.sql": schema_only(new_record._snapshot_actual_sql)}


class TestSnapshotNewRecordDbtValidToCurrent(
    PostgresSetupSql, BaseSnapshotNewRecordDbtValidToCurrent
):
    @pytest.fixture(scope="class")
    def snapshots(self):
        # new_record_dbt_valid_to_current reads `{{target.database}}.{{target.schema}}.seed`
        return {"snapshot.sql": schema_only(valid_to_current._snapshot_actual_sql)}


# ---- test_ephemeral_snapshot_hard_deletes ---------------------------------------------------
class SchemaOnlySourceSql(PostgresSetupSql):
    # these bodies fill `{database}.{schema}` themselves before run_sql (database is None here)
    @pytest.fixture(scope="class")
    def source_create_sql(self):
        return ephemeral._source_create_sql.replace("{database}.{schema}", "{schema}")

    @pytest.fixture(scope="class")
    def source_insert_sql(self):
        return ephemeral._source_insert_sql.replace("{database}.{schema}", "{schema}")

    @pytest.fixture(scope="class")
    def source_alter_sql(self):
        # Delta adds no column with a DEFAULT to an existing table (WRONG_COLUMN_DEFAULTS_FOR_
        # DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED): add it, then fill the existing rows with
        # the default, which is what Postgres' `add column ... default` does to them
        return (
            "alter table {schema}.src_customers add column dummy_column VARCHAR(50);"
            "update {schema}.src_customers set dummy_column = 'dummy_value'"
        )


class TestSnapshotEphemeralHardDeletes(SchemaOnlySourceSql, BaseSnapshotEphemeralHardDeletes):
    pass


class TestSnapshotNewColumnTimestampStrategy(
    SchemaOnlySourceSql, BaseSnapshotNewColumnTimestampStrategy
):
    pass


class TestSnapshotNewColumnSpecificCheckCols(
    SchemaOnlySourceSql, BaseSnapshotNewColumnSpecificCheckCols
):
    pass


class TestSnapshotNewColumnWithDeletes(SchemaOnlySourceSql, BaseSnapshotNewColumnWithDeletes):
    @pytest.fixture(scope="class")
    def source_delete_sql(self):
        return ephemeral._source_delete_sql.replace("{database}.{schema}", "{schema}")
