"""SPEC §4 row "add column with default (NOT NULL too)" on Delta: ADD COLUMNS, column default,
existing rows updated, and NOT NULL enforced as a CHECK constraint."""

import pytest
from dbt.tests.util import run_dbt

from tests.functional.evolution.test_evolution_matrix import rows_of

MODEL = """
{{ config(materialized='incremental', incremental_strategy='append',
          schema_evolution=({'columns': {'status': {'default': "'pending'"}}} if var('v', 1) != 1 else {})) }}
{% if var('v', 1) == 1 %}select 1 as id{% else %}select 2 as id, 'done' as status{% endif %}
"""

SCHEMA = """
version: 2
models:
  - name: required_status
    columns:
      - name: status
        constraints: [{type: not_null}]
"""


class TestNotNullColumnWithDefault:
    @pytest.fixture(scope="class")
    def models(self):
        return {"required_status.sql": MODEL, "schema.yml": SCHEMA}

    def test_default_backfills_and_not_null_is_enforced(self, project):
        run_dbt(["run"])
        run_dbt(["run", "--vars", "{v: 2}"])
        relation = f"{project.test_schema}.required_status"
        assert rows_of(project, relation) == [(1, "pending"), (2, "done")]
        properties = dict(project.run_sql(f"show tblproperties {relation}", fetch="all"))
        checks = {k: v for k, v in properties.items() if k.startswith("delta.constraints.")}
        assert any("status" in v.lower() and "not null" in v.lower() for v in checks.values()), (
            checks
        )
        with pytest.raises(Exception, match="(?i)check constraint|violat"):
            project.run_sql(f"insert into {relation} values (3, null)")
