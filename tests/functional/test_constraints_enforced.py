"""Constraints of an enforced contract hold from the first build: created WITH the table, so a
build, rebuild or incremental load whose rows violate them fails and leaves the table as it was
(Delta: CHECK constraints in the CTAS; Iceberg: NOT NULL columns). Informational constraints
(primary_key, foreign_key, unique) get dbt's warning, per the model's own file_format."""

import pytest
from dbt.tests.util import get_connection, run_dbt, run_dbt_and_capture

DELTA_TABLE = """
{{ config(materialized='table') }}
select cast({{ var('id', 1) }} as int) as id, cast({{ var('amount', 10) }} as int) as amount, '{{ var('tag', 'first') }}' as tag
"""

DELTA_INCREMENTAL = """
{{ config(materialized='incremental', incremental_strategy='append', on_schema_change='append_new_columns') }}
select cast({{ var('id', 1) }} as int) as id, cast({{ var('amount', 10) }} as int) as amount, '{{ var('tag', 'first') }}' as tag
"""

ICEBERG_TABLE = """
{{ config(materialized='table', file_format='iceberg') }}
select cast({{ var('id', 1) }} as int) as id, '{{ var('tag', 'first') }}' as tag
"""

ICEBERG_INCREMENTAL = """
{{ config(materialized='incremental', file_format='iceberg', incremental_strategy='append', on_schema_change='append_new_columns') }}
select cast({{ var('id', 1) }} as int) as id, '{{ var('tag', 'first') }}' as tag
"""

INFORMATIONAL = """
{{ config(materialized='table', file_format=var('format', 'delta')) }}
select 1 as id, 2 as parent_id
"""

DELTA_SCHEMA = """
version: 2
models:
  - name: {name}
    config:
      contract: {{enforced: true}}
    columns:
      - name: id
        data_type: int
        constraints:
          - type: not_null
      - name: amount
        data_type: int
        constraints:
          - type: check
            name: positive_amount
            expression: amount > 0
      - name: tag
        data_type: string
"""

ICEBERG_SCHEMA = """
version: 2
models:
  - name: {name}
    config:
      contract: {{enforced: true}}
    columns:
      - name: id
        data_type: int
        constraints:
          - type: not_null
      - name: tag
        data_type: string
"""

INFORMATIONAL_SCHEMA = """
version: 2
models:
  - name: informational
    config:
      contract: {enforced: true}
    constraints:
      - type: primary_key
        columns: [id]
      - type: foreign_key
        columns: [parent_id]
        expression: parents (id)
        warn_unenforced: false
    columns:
      - name: id
        data_type: int
        constraints:
          - type: check
            expression: id > 0
      - name: parent_id
        data_type: int
        constraints:
          - type: check
            expression: parent_id > 0
            warn_unsupported: false
"""


def _rows(project, relation: str):
    return [tuple(r) for r in project.run_sql(f"select * from {relation} order by id", fetch="all")]


def _exists(project, schema: str, name: str, catalog: str = "") -> bool:
    where = f"{catalog}.{schema}" if catalog else schema
    rows = project.run_sql(f"show tables in {where}", fetch="all")
    return name in [r[1] for r in rows]


def _flat(log: str) -> str:
    return " ".join(log.split())  # dbt wraps long warnings over lines


def _commits(project, relation: str) -> int:
    return len(project.run_sql(f"describe history {relation}", fetch="all"))


class TestDeltaConstraintsHold:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "delta_table.sql": DELTA_TABLE,
            "delta_incremental.sql": DELTA_INCREMENTAL,
            "schema.yml": DELTA_SCHEMA.format(name="delta_table")
            + DELTA_SCHEMA.format(name="delta_incremental").replace("version: 2\nmodels:", ""),
        }

    def test_violating_first_build_leaves_no_table(self, project):
        run_dbt(["run", "-s", "delta_table", "--vars", "{amount: -5}"], expect_pass=False)
        assert not _exists(project, project.test_schema, "delta_table")

    def test_check_on_rebuild_keeps_the_old_table(self, project):
        relation = f"{project.test_schema}.delta_table"
        run_dbt(["run", "-s", "delta_table"])
        properties = dict(project.run_sql(f"show tblproperties {relation}", fetch="all"))
        assert properties["delta.constraints.positive_amount"] == "amount > 0"
        assert properties["delta.constraints.id_not_null"] == "`id` IS NOT NULL"
        assert _commits(project, relation) == 1  # constraints came with the CTAS: one commit

        results, out = run_dbt_and_capture(
            ["run", "-s", "delta_table", "--vars", "{amount: -5, tag: second}"], expect_pass=False
        )
        assert "positive_amount" in results[0].message
        assert _rows(project, relation) == [(1, 10, "first")]
        assert _commits(project, relation) == 1  # the failed rebuild committed nothing

        run_dbt(["run", "-s", "delta_table", "--vars", "{id: 2, tag: second}"])
        assert _rows(project, relation) == [(2, 10, "second")]
        with pytest.raises(Exception, match="positive_amount"):  # still held after a rebuild
            project.run_sql(f"insert into {relation} values (3, 0, 'x')")

    def test_incremental_violating_rows_keep_the_old_rows(self, project):
        relation = f"{project.test_schema}.delta_incremental"
        run_dbt(["run", "-s", "delta_incremental"])
        for bad in ("{id: 2, amount: 0}", "{id: 'null', tag: second}"):
            results = run_dbt(["run", "-s", "delta_incremental", "--vars", bad], expect_pass=False)
            assert "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES" in results[0].message
            assert _rows(project, relation) == [(1, 10, "first")]
        run_dbt(["run", "-s", "delta_incremental", "--vars", "{id: 2, tag: second}"])
        assert _rows(project, relation) == [(1, 10, "first"), (2, 10, "second")]


class TestIcebergNotNullHolds:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "iceberg_table.sql": ICEBERG_TABLE,
            "iceberg_incremental.sql": ICEBERG_INCREMENTAL,
            "schema.yml": ICEBERG_SCHEMA.format(name="iceberg_table")
            + ICEBERG_SCHEMA.format(name="iceberg_incremental").replace("version: 2\nmodels:", ""),
        }

    def test_not_null_first_build_and_rebuild(self, project):
        schema, relation = project.test_schema, f"iceberg.{project.test_schema}.iceberg_table"
        results = run_dbt(
            ["run", "-s", "iceberg_table", "--vars", "{id: 'null'}"], expect_pass=False
        )
        assert "NOT_NULL_ASSERT_VIOLATION" in results[0].message
        assert not _exists(project, schema, "iceberg_table", "iceberg")

        run_dbt(["run", "-s", "iceberg_table"])
        assert _rows(project, relation) == [(1, "first")]
        columns = project.run_sql(f"describe table {relation}", fetch="all")
        # NOT NULL is in the Iceberg schema: later writes are checked by the table itself
        with get_connection(project.adapter):  # run_dbt closed (Connect: stopped) the last one
            schema_json = project.adapter.schema_json(f"select * from {relation}")
        nullable = {f["name"]: f["nullable"] for f in schema_json["fields"]}
        assert nullable == {"id": False, "tag": True}, columns

        results = run_dbt(
            ["run", "-s", "iceberg_table", "--vars", "{id: 'null', tag: second}"], expect_pass=False
        )
        assert "NOT_NULL_ASSERT_VIOLATION" in results[0].message
        assert _rows(project, relation) == [(1, "first")]
        assert not _exists(project, schema, "iceberg_table__dbt_constraints", "iceberg")

        def snapshots() -> list:
            project.run_sql(f"refresh table {relation}")
            rows = project.run_sql(
                f"select operation from {relation}.snapshots order by committed_at", fetch="all"
            )
            return [r[0] for r in rows]

        before = snapshots()
        run_dbt(["run", "-s", "iceberg_table", "--vars", "{id: 2, tag: second}"])
        assert _rows(project, relation) == [(2, "second")]
        # the rebuild is one commit, a REPLACE TABLE AS SELECT from the filled stage (through
        # the catalog's twin that keeps NOT NULL): a reader never saw the table empty
        assert snapshots() == [*before, "overwrite"]
        with get_connection(project.adapter):
            schema_json = project.adapter.schema_json(f"select * from {relation}")
        assert {f["name"]: f["nullable"] for f in schema_json["fields"]} == nullable
        with pytest.raises(Exception, match="NOT_NULL_ASSERT_VIOLATION"):
            project.run_sql(f"insert into {relation} values (null, 'x')")

    def test_incremental_violating_rows_keep_the_old_rows(self, project):
        relation = f"iceberg.{project.test_schema}.iceberg_incremental"
        run_dbt(["run", "-s", "iceberg_incremental"])
        results = run_dbt(
            ["run", "-s", "iceberg_incremental", "--vars", "{id: 'null', tag: second}"],
            expect_pass=False,
        )
        assert "NOT_NULL_ASSERT_VIOLATION" in results[0].message
        assert _rows(project, relation) == [(1, "first")]
        run_dbt(["run", "-s", "iceberg_incremental", "--vars", "{id: 2, tag: second}"])
        assert _rows(project, relation) == [(1, "first"), (2, "second")]


class TestInformationalConstraintWarnings:
    @pytest.fixture(scope="class")
    def models(self):
        return {"informational.sql": INFORMATIONAL, "schema.yml": INFORMATIONAL_SCHEMA}

    def test_warnings_follow_the_models_format_and_options(self, project):
        out = _flat(run_dbt_and_capture(["run"])[1])
        # dbt's own warning, naming the format; foreign_key says warn_unenforced: false
        assert "The constraint type primary_key is not enforced by spark_contracts (delta)" in out
        assert "foreign_key is not enforced" not in out
        assert "not supported" not in out  # check is enforced on Delta
        relation = f"{project.test_schema}.informational"
        properties = dict(project.run_sql(f"show tblproperties {relation}", fetch="all"))
        assert properties["dbt.constraints.id_primary_key"] == "primary key (id)"
        assert properties["dbt.constraints.parent_id_foreign_key"] == (
            "foreign key (parent_id) references parents (id)"
        )

        out = _flat(run_dbt_and_capture(["run", "--vars", "{format: iceberg}"])[1])
        # Iceberg has no CHECK: dbt's "not supported" warning for the one that did not opt out
        assert "The constraint type check is not supported by spark_contracts (iceberg)" in out
        assert out.count("The constraint type check is not supported") == 1
        assert "The constraint type primary_key is not enforced by spark_contracts (iceberg)" in out
        iceberg = f"iceberg.{project.test_schema}.informational"
        properties = dict(project.run_sql(f"show tblproperties {iceberg}", fetch="all"))
        assert not any(k.startswith("delta.constraints.") for k in properties)
        assert properties["dbt.constraints.id_primary_key"] == "primary key (id)"
        assert _rows(project, iceberg) == [(1, 2)]
