"""dbt-tests-adapter's microbatch suite, run through this adapter's microbatch (each batch
replaces its event_time window: Delta `REPLACE WHERE`, the default file_format).

dbt's own on_schema_change suite (BaseIncrementalOnSchemaChange) runs through this adapter's
evolution path in tests/functional/adapter/test_on_schema_change.py. Both suites name their relations `schema.table` (spark_catalog), so they run
on Delta; Iceberg microbatch is covered by tests/functional/test_microbatch.py."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.incremental.test_incremental_microbatch import BaseMicrobatch

# Spark timestamps: the suite's `TIMESTAMP '2020-01-01 00:00:00-0'` is not a zone offset Spark
# parses; the same instants in UTC (the session time zone of the tests).
INPUT_MODEL_SQL = """
{{ config(materialized='table', event_time='event_time') }}
select 1 as id, TIMESTAMP '2020-01-01 00:00:00+00:00' as event_time
union all
select 2 as id, TIMESTAMP '2020-01-02 00:00:00+00:00' as event_time
union all
select 3 as id, TIMESTAMP '2020-01-03 00:00:00+00:00' as event_time
"""


class TestMicrobatch(BaseMicrobatch):
    @pytest.fixture(scope="class")
    def input_model_sql(self) -> str:
        return INPUT_MODEL_SQL

    @pytest.fixture(scope="class")
    def insert_two_rows_sql(self, project) -> str:
        return (
            f"insert into {project.test_schema}.input_model (id, event_time) values "
            "(4, TIMESTAMP '2020-01-04 00:00:00+00:00'), (5, TIMESTAMP '2020-01-05 00:00:00+00:00')"
        )
