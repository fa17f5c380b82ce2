"""dbt's `contract: {enforced: true}` on every run (dbt-spark checks only first builds), with
nested types compared field by field and sizes/precision ignored."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

MODEL = """
{{ config(materialized='incremental', contract={'enforced': true}, on_schema_change='append_new_columns') }}
{% if var('v', 1) == 1 %}
select 1 as id, cast(1.5 as decimal(12,4)) as amount, named_struct('a', 1, 'b', 'x') as s
{% else %}
select 2 as id, cast(2.5 as decimal(12,4)) as amount, named_struct('a', 2, 'b', 3) as s
{% endif %}
"""

SCHEMA = """
version: 2
models:
  - name: contracted
    config:
      contract: {enforced: true}
    columns:
      - name: id
        data_type: int
      - name: amount
        data_type: decimal(10,2)
      - name: s
        data_type: struct<a:int,b:string>
"""


class TestModelContractEveryRun:
    @pytest.fixture(scope="class")
    def models(self):
        return {"contracted.sql": MODEL, "schema.yml": SCHEMA}

    def test_incremental_run_is_checked_field_by_field(self, project):
        # first build: decimal(12,4) vs decimal(10,2) is not a mismatch (dbt ignores precision)
        run_dbt(["run"])
        # incremental run: s.b became an int; dbt-spark would not check this run
        _, out = run_dbt_and_capture(["run", "--vars", "{v: 2}"], expect_pass=False)
        assert "This model has an enforced contract that failed." in out
        assert "| column_name | definition_type | contract_type | mismatch_reason    |" in out
        assert "| s.b         | INT             | STRING        | data type mismatch |" in out
        rows = project.run_sql(f"select id from {project.test_schema}.contracted", fetch="all")
        assert [r[0] for r in rows] == [1]  # nothing loaded
