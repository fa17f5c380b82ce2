"""Bad schema_evolution configuration fails before anything runs, naming the model, the key
and what is allowed; nothing is created and the deployed table is untouched.

Structural errors (an unknown strategy or key) fail when dbt parses the project, so a `dbt run`
builds no model at all. An invalid SQL expression needs the model's compiled output: it fails the
model's run, before any change. A `columns` entry naming a column the model does not output is a
warning, not an error: users write it ahead of the column (tests/functional/evolution/
test_column_settings_timing.py)."""

import pytest
from dbt.exceptions import ParsingError
from dbt.tests.util import run_dbt

from tests.functional.evolution.test_evolution_matrix import rows_of, schema_of

BODY = "{% if var('v', 1) == 1 %}select 1 as id{% else %}select 2 as id, 'x' as note{% endif %}"


def model(evolution: str) -> str:
    setting = "(none if var('bare', false) else " + evolution + ")"
    return "{{ config(materialized='incremental', schema_evolution=" + setting + ") }}\n" + BODY


def tables_in(project) -> set[str]:
    return {r[1] for r in project.run_sql(f"show tables in {project.test_schema}", fetch="all")}


class TestEvolutionConfigErrorsAtParse:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "bad_strategy.sql": model("{'strategy': 'yolo'}"),
            "unknown_key.sql": model("{'stratgy': 'full_refresh'}"),
            "bad_policy.sql": model("{'on_destructive_change': 'sometimes'}"),
            "good.sql": model("{'strategy': 'alter_and_backfill'}"),
        }

    def test_run_fails_at_parse_and_creates_nothing(self, project):
        with pytest.raises(ParsingError) as info:
            run_dbt(["run"])
        message = str(info.value)
        assert (
            "model.test.bad_strategy (models/bad_strategy.sql): `schema_evolution.strategy` is "
            "'yolo'; allowed: alter_and_backfill, full_refresh" in message
        )
        assert (
            "model.test.unknown_key (models/unknown_key.sql): `schema_evolution` has unknown "
            "key(s) stratgy; allowed: strategy, columns" in message
        )
        assert (
            "model.test.bad_policy (models/bad_policy.sql): `schema_evolution."
            "on_destructive_change` is 'sometimes'; allowed: allow, warn, error, ignore" in message
        )
        assert "model.test.good" not in message
        assert tables_in(project) == set()  # not even the good model was built


class TestEvolutionConfigErrorsAtRun:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "no_such_column.sql": model("{'columns': {'nope': {'default': '1'}}}"),
            "bad_expression.sql": model("{'columns': {'note': {'default': \"'unterminated\"}}}"),
        }

    def test_errors_name_model_key_and_allowed_values(self, project):
        # v1 is built without the entries (a first build checks them too: TestFirstBuildChecks
        # in tests/functional/contracts/test_table_contracts.py)
        run_dbt(["run", "--vars", "{bare: true}"])
        before = {
            n: rows_of(project, f"{project.test_schema}.{n}")
            for n in ("no_such_column", "bad_expression")
        }
        second = {r.node.name: r for r in run_dbt(["run", "--vars", "{v: 2}"], expect_pass=False)}
        # an entry naming a column the model does not output is a warning (it may be written
        # ahead of its column), and the run goes on as if it were not there
        assert str(second["no_such_column"].status) == "success", second["no_such_column"].message
        before["no_such_column"] = [(1, None), (2, "x")]
        message = second["bad_expression"].message
        assert "`schema_evolution.columns.note.default` is not a valid SQL expression" in message
        relation = f"{project.test_schema}.bad_expression"
        assert schema_of(project, relation) == {"id": "int"}  # nothing executed
        assert rows_of(project, relation) == before["bad_expression"]
        relation = f"{project.test_schema}.no_such_column"
        assert schema_of(project, relation) == {"id": "int", "note": "string"}
        assert rows_of(project, relation) == before["no_such_column"]
