"""A load that a journaled run left without its quarantine commit is taken back first by the next
run, on every connection method (core/intent.py). Journaled runs happen on the embedded session
(its load collects the discarded rows); the table they leave may be run next over Thrift or
Spark Connect, which read the table's history with DESCRIBE HISTORY instead of Delta's log.

The dead run is written by hand through the method under test: the table's journal marked, then
an INSERT carrying a journaled run's tag (as a run killed right after its load leaves it); the
real SIGKILL of a journaled run is in test_kill.py (embedded session)."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.spark_contracts import run as runs
from dbt.adapters.spark_contracts.core.intent import JOURNAL_ON, JOURNAL_PROPERTY, journal_tag
from tests.functional.probes import versioned_model

MODEL = versioned_model(
    "materialized='incremental', incremental_strategy='append', file_format='delta', "
    "schema_contract={'data_type': 'discard_row', 'quarantine': true}",
    "select 1 as id, cast(1 as bigint) as n",
    "select 2 as id, 'bad' as n union all select 3 as id, '3' as n",
)
DEAD_TAG = journal_tag("inv-dead", "model.test.jm", "deadbeef")
DEAD_LOAD = f"""
{{% macro dead_journaled_load(table) %}}
  {{% do run_query("alter table " ~ table ~ " set tblproperties ('{JOURNAL_PROPERTY}' = '{JOURNAL_ON}')") %}}
  {{% do run_query("set `{runs.DELTA_USER_METADATA}`=`{DEAD_TAG}`") %}}
  {{% do run_query("insert into " ~ table ~ " values (99, 99)") %}}
  {{% do run_query("reset `{runs.DELTA_USER_METADATA}`") %}}
{{% endmacro %}}
"""


class TestDeadJournaledLoadTakenBack:
    @pytest.fixture(scope="class")
    def models(self):
        return {"jm.sql": MODEL}

    @pytest.fixture(scope="class")
    def macros(self):
        return {"dead_journaled_load.sql": DEAD_LOAD}

    def test_the_next_run_takes_the_load_back_then_runs(self, project):
        table = f"{project.test_schema}.jm"
        run_dbt(["run"])
        run_dbt(["run", "--vars", "{v: 2}"])  # quarantines id 2 (on the session: under an intent)
        args = ["run-operation", "dead_journaled_load", "--args", f"{{table: {table}}}"]
        run_dbt(args)

        def read(t: str) -> list:
            return [r[0] for r in project.run_sql(f"select id from {t} order by id", fetch="all")]

        assert read(table) == [1, 3, 99]

        results = run_dbt(["run", "--vars", "{v: 2}"])
        repairs = results[0].adapter_response.get("repairs")
        assert repairs and "inv-dead" in repairs[0], results[0].adapter_response
        assert read(table) == [1, 3, 3]  # the dead load taken back, then this run's
        assert read(f"{table}__quarantine") == [2, 2]
        history = project.run_sql(f"describe history {table}", fetch="all")
        operations = [str(r[4]) for r in history]  # DESCRIBE HISTORY's fifth column
        assert "RESTORE" in operations, operations
