"""Fault injection for a run that quarantines in its load: `kill -9` of a real `dbt run` right
after its load commits, before the quarantine insert (the session method only: thrift and
connect stage and quarantine before the load). A module of its own so that pytest-xdist runs it
beside test_kill.py's tests, not after them (CI distributes by module)."""

from __future__ import annotations

import pytest

from tests.functional.evolution.test_kill import Project, kill_target  # noqa: F401, F811

# discard_row with quarantine, on the session method: the load collects the discarded rows and the
# quarantine insert follows it under the run's intent (commits: the intent, the load, ...).
QUARANTINE_MODEL = """
{{{{ config(materialized='incremental', file_format='{fmt}', incremental_strategy='append',
          schema_contract={{'data_type': 'discard_row', 'quarantine': true}}) }}}}
{{% if var('v', 1) == 1 %}}
select id, cast(id as bigint) as n from range(3)
{{% else %}}
select id, if(id % 2 = 0, concat('bad-', cast(id as string)), cast(id as string)) as n
from range(3, 9)
{{% endif %}}
"""
AFTER_LOAD = 2  # the intent, then the load: the quarantine insert has not run yet


# Only where Spark reports observed metrics does the load collect the discarded rows: thrift and
# connect stage them and quarantine before the load (no window between the two). One class per
# format: pytest-xdist's loadscope gives each class to a worker of its own (the Delta kill alone
# takes about 5 minutes in CI).
@pytest.mark.profile("session")
class TestKillBetweenTheLoadAndTheQuarantineDelta:
    def test_kill_between_the_load_and_the_quarantine_is_repaired(self, tmp_path, kill_target):  # noqa: F811
        kill_between_the_load_and_the_quarantine(tmp_path, kill_target, "delta")


@pytest.mark.profile("session")
class TestKillBetweenTheLoadAndTheQuarantineIceberg:
    def test_kill_between_the_load_and_the_quarantine_is_repaired(self, tmp_path, kill_target):  # noqa: F811
        kill_between_the_load_and_the_quarantine(tmp_path, kill_target, "iceberg")


def kill_between_the_load_and_the_quarantine(tmp_path, kill_target, fmt: str) -> None:  # noqa: F811
    """SIGKILL right after the load commits, before its discarded rows reach the quarantine:
    the rows lived only in the dead process, so the intent on the table makes the next run take
    the load back and run again: the table and its quarantine end like a run never killed."""
    target, warehouse = kill_target
    names = ["control", "dead"]
    body = QUARANTINE_MODEL.format(fmt=fmt)
    project = Project(tmp_path / "project", fmt, target, warehouse, body, names)
    assert project.dbt() == 0
    # the embedded Spark died with its dbt: nothing goes on to settle
    project.dbt(
        "--select", "dead", "--vars", "{v: 2}", kill_at=AFTER_LOAD, table="dead", settle=False
    )
    _, intent = project.state("dead")
    assert intent, "the kill after the load left no intent on the table"
    assert project.dbt("--vars", "{v: 2}") == 0  # the control's v2, the dead table's repair
    assert project.results()["dead"]["adapter_response"].get("repairs")
    assert project.results()["dead"]["adapter_response"]["rows_discarded"] == 3
    assert project.state("dead") == project.state("control")
    rows = project.rows(["control", "dead", "control__quarantine", "dead__quarantine"])
    assert rows["dead"] == rows["control"], rows
    assert [r["id"] for r in rows["dead"]] == [0, 1, 2, 3, 5, 7]
    quarantined = {t: rows[t] for t in ("control__quarantine", "dead__quarantine")}
    ids = {t: [r["id"] for r in quarantined[t]] for t in quarantined}
    assert ids == {"control__quarantine": [4, 6, 8], "dead__quarantine": [4, 6, 8]}, ids
