"""What a run tells the user: a console line per model and a summary line, the dry run's
reviewable plan (`target/schema_plan.md` / `.json`, non-zero exit when a change is blocked), and
the schema history table (`dbt run-operation schema_history`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

pytestmark = pytest.mark.profile("session")

EVOLVING = """
{{ config(materialized='incremental', file_format='delta', incremental_strategy='append',
          schema_evolution={}) }}
{% if var('v', 1) == 1 %}
select id, cast(id as int) as n, 'gone' as old from range(3)
{% elif var('v', 1) == 2 %}
select id, cast(id as bigint) as n, 'gone' as old, 'x' as note from range(3, 5)
{% else %}
select id, cast(id as bigint) as n, 'x' as note, 'y' as extra from range(5, 6)
{% endif %}
"""

DISCARDING = """
{{ config(materialized='incremental', file_format='delta',
          schema_contract={'data_type': 'discard_row', 'quarantine': true}) }}
{% if var('v', 1) == 1 %}
select id, cast(id as bigint) as n from range(1)
{% else %}
select id, if(id % 5 = 0, 'bad', cast(id as string)) as n from range(1, 11)
{% endif %}
"""


class TestRunStory:
    @pytest.fixture(scope="class")
    def models(self):
        return {"story_evolving.sql": EVOLVING, "story_discarding.sql": DISCARDING}

    def test_console_plan_file_and_history(self, project):
        schema = project.test_schema
        run_dbt(["run"])
        _, log = run_dbt_and_capture(["run", "--vars", "{v: 2}"])
        assert "story_evolving: +1 column, 1 widened" in log, log
        assert (
            f"story_discarding: 2 rows discarded (2 quarantined in {schema}.story_discarding" in log
        ), log
        assert (
            "dbt-spark-contracts: 1 model changed schema, 2 rows discarded (2 quarantined)" in log
        )

        history = f"{schema}.dbt_schema_history"
        rows = project.run_sql(
            f"select model, event, column_path, before_type, after_type, rows_discarded "
            f"from {history} order by event, column_path",
            fetch="all",
        )
        assert [tuple(r) for r in rows] == [
            ("model.test.story_evolving", "change", "n", "INT", "BIGINT", None),
            ("model.test.story_evolving", "change", "note", None, "STRING", None),
            ("model.test.story_discarding", "discard", None, None, None, 2),
        ]

        # v3 drops `old` (blocked without allow_column_removal) and adds `extra`: a dry run
        # plans it, writes the plan for review, changes nothing and fails.
        results = run_dbt(
            [
                "run",
                "--select",
                "story_evolving",
                "--vars",
                "{v: 3, schema_evolution_dry_run: true}",
            ],
            expect_pass=False,
        )
        assert str(results[0].status) == "error"
        target = Path(project.project_root) / "target"
        plan = json.loads((target / "schema_plan.json").read_text())
        entry = plan["models"]["model.test.story_evolving"]
        assert [b["path"] for b in entry["plan"]["blocked"]] == ["old"]
        text = (target / "schema_plan.md").read_text()
        assert "`extra`" in text, text
        assert "**blocked**" in text and "--vars '{allow_column_removal: true}'" in text, text
        assert len(project.run_sql(f"select * from {history}", fetch="all")) == 3  # unchanged

        _, printed = run_dbt_and_capture(
            ["run-operation", "schema_history", "--args", "{model: story_evolving}"]
        )
        assert "model.test.story_evolving" in printed and "2 history rows" in printed, printed
        assert "BIGINT" in printed and "note" in printed, printed

        # dbt docs: each model's resolved contract and evolution settings in the catalog
        run_dbt(["docs", "generate"])
        catalog = json.loads((target / "catalog.json").read_text())["nodes"]
        stats = catalog["model.test.story_discarding"]["stats"]
        contract = json.loads(stats["schema_contract"]["value"])
        assert contract == {
            "tables": "evolve",
            "columns": "evolve",
            "data_type": "discard_row",
            "data_tests": "evolve",
            "quarantine": True,
        }, contract
        evolution = catalog["model.test.story_evolving"]["stats"]
        assert evolution["schema_evolution"]["value"] == "{}" and "schema_contract" not in evolution
