"""What a connection method gives less of is said in the run's output, once per model.

Thrift and Connect clients do not receive metrics Spark observes while a statement runs, so a
run with `discard_row` / `discard_value` stages the model's output and counts the discards with a
query of their own: the counts are the same as under `method: session`, at the cost of one more
write and read of the output, and the run's log says so once per model. Runs under every
`--profile`; under `session` the note is absent (the counts are observed in the load)."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.evolution.test_evolution_matrix import rows_of

NOTE = "does not receive metrics observed in a statement"

DISCARDS = """
{{ config(materialized='incremental', file_format='delta', unique_key='id',
          schema_contract={'data_type': 'discard_row'}) }}
{% if var('v', 1) == 1 %}
select 1 as id, cast(10 as int) as score
{% else %}
select 2 as id, '20' as score union all select 3 as id, 'abc' as score
{% endif %}
"""

VALUES = DISCARDS.replace("discard_row", "discard_value")


class TestMethodNotes:
    @pytest.fixture(scope="class")
    def models(self):
        return {"note_discard_row.sql": DISCARDS, "note_discard_value.sql": VALUES}

    def test_counts_and_the_note_per_method(self, project, request):
        run_dbt(["run"])
        results, log = run_dbt_and_capture(["run", "--vars", "{v: 2}"])
        responses = {r.node.name: r.adapter_response for r in results}
        # the same counts under every method
        assert responses["note_discard_row"]["rows_discarded"] == 1, responses
        assert responses["note_discard_value"]["values_discarded"] == 1, responses
        schema = project.test_schema
        assert rows_of(project, f"{schema}.note_discard_row") == [(1, 10), (2, 20)]
        assert rows_of(project, f"{schema}.note_discard_value") == [(1, 10), (2, 20), (3, None)]
        method = request.config.getoption("--profile")
        notes = [line for line in log.splitlines() if NOTE in line]
        if method == "session":
            assert notes == [], notes
        else:
            for name in ("note_discard_row", "note_discard_value"):
                mine = [line for line in notes if f"model.test.{name}:" in line]
                assert len(mine) == 1, (name, notes)
                assert f"method {method} " in mine[0], mine[0]
