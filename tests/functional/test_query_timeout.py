"""`query_timeout` on the embedded session: a statement still running after it has its Spark
jobs cancelled (their tasks interrupted) and fails with QueryTimeoutError naming query_timeout,
within seconds; the thread's job tags and interrupt setting are as before, and it runs the next
statement."""

from __future__ import annotations

import re
import time

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.spark_contracts.connection import session as embedded
from dbt.adapters.spark_contracts.connection.errors import QueryTimeoutError

# Each row sleeps 3s in its task: range(5) over 2 cores runs 3 rows in one task, 9s uncancelled.
SLOW_QUERY = (
    "select * from range(5) "
    "where reflect('java.lang.Thread', 'sleep', cast(3000 as bigint)) is not null"
)
TIMED_OUT = "Query exceeded timeout of 2 seconds (query_timeout, method: session)"


@pytest.mark.profile("session")
class TestQueryTimeoutOnSession:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target):
        return {**dbt_profile_target, "query_timeout": 2}

    @pytest.fixture(scope="class")
    def models(self):
        return {"slow_model.sql": "{{ config(materialized='table') }}\n" + SLOW_QUERY + "\n"}

    def test_model_fails_with_the_timeout(self, project):
        results = run_dbt(["run"], expect_pass=False)
        slow = results[0]
        assert str(slow.status) == "error"
        assert TIMED_OUT in slow.message, slow.message
        assert slow.execution_time < 7, slow.execution_time  # cancelled, not run to its end
        tables = project.run_sql(f"show tables in {project.test_schema}", fetch="all")
        assert "slow_model" not in {str(t[1]) for t in tables}

    def test_statement_on_this_thread_then_the_next_one(self, project):
        context = embedded._active.sparkContext
        before = (context.getJobTags(), context.getLocalProperty("spark.job.interruptOnCancel"))
        start = time.monotonic()
        with pytest.raises(QueryTimeoutError, match=re.escape(TIMED_OUT)):
            project.run_sql(SLOW_QUERY, fetch="all")
        assert time.monotonic() - start < 7
        after = (context.getJobTags(), context.getLocalProperty("spark.job.interruptOnCancel"))
        assert after == before
        assert project.run_sql("select count(*) from range(3)", fetch="one")[0] == 3
