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


# the put-back of the load's settings is the same code for every format (run/load_settings.py)
FORMATS = ("parquet", "delta", "iceberg")


def rows(project, relation: str, columns: str) -> list[tuple]:
    sql = f"select {columns} from {relation} order by day, id"
    return [tuple(r) for r in project.run_sql(sql, fetch="all")]


# the partitioned model again, with a post-hook that overwrites another partitioned table
# without a PARTITION clause: in the session's own (static) mode it replaces that table whole;
# under dbt-spark's DYNAMIC, left set after the load, only the partition it writes
MODE_AFTER = MODEL.replace(
    "partition_by=['day'],",
    "partition_by=['day'], post_hook=\"insert overwrite table {{{{ this.schema }}}}.probe_{fmt} "
    "select 'after' as v, 'a' as p\",",
)


class TestInsertOverwrite:
    @pytest.fixture(scope="class")
    def models(self):
        models = {f"overwrite_{fmt}.sql": MODEL.format(fmt=fmt) for fmt in ("parquet", "delta")}
        modes = {f"overwrite_mode_{fmt}.sql": MODE_AFTER.format(fmt=fmt) for fmt in FORMATS}
        return {**models, **modes}

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

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_the_dynamic_overwrite_is_set_for_the_load_alone(self, project, fmt):
        """dbt-spark sets the dynamic partition overwrite in the model's session and leaves it
        set (its post-hooks run under it); here it is set with the load and put back once the
        run has succeeded."""
        probe = f"{project.test_schema}.probe_{fmt}"
        project.run_sql(
            f"create table {probe} (v string, p string) using parquet partitioned by (p)"
        )
        run_dbt(["run", "--select", f"overwrite_mode_{fmt}"])
        project.run_sql(f"insert into {probe} values ('before', 'a'), ('before', 'b')")
        run_dbt(["run", "--select", f"overwrite_mode_{fmt}", "--vars", "{v: 2}"])
        schema = f"iceberg.{project.test_schema}" if fmt == "iceberg" else project.test_schema
        relation = f"{schema}.overwrite_mode_{fmt}"
        # the load overwrote the partition it wrote (d2) and kept the other (d1)
        assert [r[1] for r in rows(project, relation, "id, day")] == ["d1"] * 3 + ["d2"] * 2
        # the post-hook's overwrite, in the session's static mode, replaced the whole table
        got = project.run_sql(f"select v, p from {probe} order by p", fetch="all")
        assert [tuple(r) for r in got] == [("after", "a")], got
