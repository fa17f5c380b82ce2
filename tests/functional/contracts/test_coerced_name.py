"""A model column named like the load's coerced column (`__dbt_coerced_0`) under data_type
discard_row: the load's coerced alias skips the model's own names, so the run keeps that
column's values and discards the row whose `n` does not cast. The SQL the load renders is the
same for every connection method; this runs on each (test_one_evaluation.py counts the
model's evaluations for the same case, on the embedded session only)."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contracts.test_contract_matrix import rel
from tests.functional.contracts.test_quarantine_evolves import FORMATS, model

BODIES = (
    "select 1 as id, cast(1 as bigint) as n, 2 as __dbt_coerced_0",
    "select 2 as id, 'bad' as n, 4 as __dbt_coerced_0"
    " union all select 3 as id, '3' as n, 6 as __dbt_coerced_0",
)


class TestCoercedAliasSkipsTheModelsNames:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            f"cn_{fmt}.sql": model(fmt, BODIES).replace(", 'quarantine': true", "")
            for fmt in FORMATS
        }

    @pytest.fixture(scope="class")
    def runs(self, project):
        return [
            {r.node.name: r for r in run_dbt(["run", "--vars", f"{{v: {v}}}"], expect_pass=None)}
            for v in (1, 2)
        ]

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_the_row_is_discarded_and_the_models_column_kept(self, project, runs, fmt):
        for results in runs:
            result = results[f"cn_{fmt}"]
            assert str(result.status) == "success", result.message
        table = rel(project, f"cn_{fmt}")
        rows = project.run_sql(
            f"select id, n, __dbt_coerced_0 from {table} order by id", fetch="all"
        )
        assert [tuple(r) for r in rows] == [(1, 1, 2), (3, 3, 6)]
