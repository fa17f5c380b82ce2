"""Bad schema_evolution configuration fails before anything runs, naming the model, the key
and what is allowed; the deployed table is untouched."""

import pytest
from dbt.tests.util import run_dbt

from tests.functional.evolution.test_evolution_matrix import rows_of, schema_of

BODY = "{% if var('v', 1) == 1 %}select 1 as id{% else %}select 2 as id, 'x' as note{% endif %}"


def model(evolution: str) -> str:
    return "{{ config(materialized='incremental', schema_evolution=" + evolution + ") }}\n" + BODY


class TestEvolutionConfigErrors:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "bad_strategy.sql": model("{'strategy': 'yolo'}"),
            "unknown_key.sql": model("{'stratgy': 'full_refresh'}"),
            "no_such_column.sql": model("{'columns': {'nope': {'default': '1'}}}"),
            "bad_expression.sql": model("{'columns': {'note': {'default': \"'unterminated\"}}}"),
        }

    def test_errors_name_model_key_and_allowed_values(self, project):
        first = {r.node.name: r for r in run_dbt(["run"], expect_pass=False)}
        # the structure is checked on the first build too, before the table is created
        assert str(first["bad_strategy"].status) == "error"
        assert "model.test.bad_strategy" in first["bad_strategy"].message
        assert (
            "`schema_evolution.strategy` is 'yolo'; allowed: alter_and_backfill, full_refresh"
            in (first["bad_strategy"].message)
        )
        assert "unknown key(s) stratgy; allowed: strategy, columns" in first["unknown_key"].message

        before = {
            n: rows_of(project, f"{project.test_schema}.{n}")
            for n in ("no_such_column", "bad_expression")
        }
        second = {r.node.name: r for r in run_dbt(["run", "--vars", "{v: 2}"], expect_pass=False)}
        message = second["no_such_column"].message
        assert (
            "`schema_evolution.columns` names nope" in message
            and "its columns are id, note" in message
        )
        message = second["bad_expression"].message
        assert "`schema_evolution.columns.note.default` is not a valid SQL expression" in message
        for name, rows in before.items():
            relation = f"{project.test_schema}.{name}"
            assert schema_of(project, relation) == {"id": "int"}  # nothing executed
            assert rows_of(project, relation) == rows
