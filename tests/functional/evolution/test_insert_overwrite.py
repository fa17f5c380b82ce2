"""`insert_overwrite` (dbt-spark's strategy) through the run path: the load is rendered from the
run's known columns before any statement runs, in the table's column order once the plan's
ALTERs have run (dbt-spark DESCRIBEs the target instead, which has not changed yet then)."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.functional.evolution.test_evolution_matrix import schema_of

MODEL = """
{{{{ config(materialized='incremental', incremental_strategy='insert_overwrite',
            file_format='{fmt}', partition_by=['day'], schema_evolution={{}}) }}}}
{{% if var('v', 1) == 1 %}}
select id, 'd1' as day from range(3) union all select id + 10, 'd2' as day from range(2)
{{% else %}}
select id + 100 as id, 'note' as note, 'd2' as day from range(2)
{{% endif %}}
"""


def rows(project, relation: str, columns: str) -> list[tuple]:
    sql = f"select {columns} from {relation} order by day, id"
    return [tuple(r) for r in project.run_sql(sql, fetch="all")]


class TestInsertOverwrite:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"overwrite_{fmt}.sql": MODEL.format(fmt=fmt) for fmt in ("parquet", "delta")}

    @pytest.mark.parametrize("fmt", ("parquet", "delta"))
    def test_overwrites_the_partitions_it_writes_with_a_new_column(self, project, fmt):
        run_dbt(["run", "--select", f"overwrite_{fmt}"])
        run_dbt(["run", "--select", f"overwrite_{fmt}", "--vars", "{v: 2}"])
        relation = f"{project.test_schema}.overwrite_{fmt}"
        # parquet keeps its partition column last; Delta appends the new column
        columns = ["id", "note", "day"] if fmt == "parquet" else ["id", "day", "note"]
        assert list(schema_of(project, relation)) == columns
        got = rows(project, relation, "id, note, day")
        assert got == [
            (0, None, "d1"),
            (1, None, "d1"),
            (2, None, "d1"),
            (100, "note", "d2"),
            (101, "note", "d2"),
        ], got
