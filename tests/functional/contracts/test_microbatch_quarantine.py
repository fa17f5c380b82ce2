"""A microbatch model whose contract quarantines what it discards (issue 40), on Delta and
Iceberg: each batch is a run on the pending protocol (core/recovery/pending.py), its own pending table,
its load tagged with its own commit tag, its discarded rows moved into the quarantine after it.
Over several batches of one invocation: each batch's discarded rows are quarantined once, with
the invocation id in `_dbt_run_id` and the batch's commit tag in `_dbt_batch_tag`; nothing
pending is left; the model's query is evaluated once per batch.

`events` (tests/functional/test_microbatch.py): four rows a day, 2020-01-01 .. 2020-01-04."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from tests.functional.test_microbatch import EVENTS, relation, window

# the first run loads `n` as bigint; from var `bad` on, `n` is a string, and every fourth row's
# ('bad') does not fit the table's bigint: that row is discarded and quarantined
MODEL = """
{{{{ config(materialized='incremental', incremental_strategy='microbatch', file_format='{fmt}',
    event_time='event_time', batch_size='day', begin=modules.datetime.datetime(2020, 1, 1),
    schema_contract={{'data_type': 'discard_row', 'quarantine': true}}) }}}}
{{% if var('bad', false) %}}
select probe_eval(id) as id, event_time,
       if(id % 4 = 0, 'bad', cast(id as string)) as n
{{% else %}}
select id, event_time, cast(id as bigint) as n
{{% endif %}}
from {{{{ ref('events') }}}}
"""


def invocation_id(project) -> str:
    results = json.loads((Path(project.project_root) / "target" / "run_results.json").read_text())
    return results["metadata"]["invocation_id"]


@pytest.mark.profile("session")  # counts evaluations in this process's SparkContext
class BaseMicrobatchQuarantine:
    fmt = "delta"

    @pytest.fixture(scope="class")
    def models(self):
        return {"events.sql": EVENTS, "mbq.sql": MODEL.format(fmt=self.fmt)}

    def test_each_batch_quarantines_its_rows_once(self, project, evaluations):
        run_dbt(["run", "--select", "events"])
        run_dbt(window("2020-01-01", "2020-01-02", "--select", "mbq"))  # creates it: day 1
        rel = relation(project, self.fmt, "mbq")
        before = evaluations()
        results = run_dbt(
            window("2020-01-01", "2020-01-04", "--select", "mbq", "--vars", "bad: true")
        )
        assert [len(r.batch_results.successful) for r in results] == [3]
        assert evaluations() - before == 12  # three batches of four rows, each read once
        invocation = invocation_id(project)

        kept = project.run_sql(f"select id, n from {rel}", fetch="all")
        assert sorted(r[0] for r in kept) == [i for i in range(12) if i % 4]  # 0, 4, 8 discarded
        quarantined = project.run_sql(
            f"select id, n, _dbt_run_id, _dbt_batch_tag, _contract_reason from {rel}__quarantine",
            fetch="all",
        )
        assert sorted(r[0] for r in quarantined) == [0, 4, 8], quarantined  # each once
        assert all(r[1] == "bad" and r[4] for r in quarantined), quarantined
        # what users see: the invocation; each batch's rows also carry its own commit tag
        assert {r[2] for r in quarantined} == {invocation}, quarantined
        tags = {r[3] for r in quarantined}
        assert len(tags) == 3 and all(f":{invocation}:" in t for t in tags), tags
        schema = f"iceberg.{project.test_schema}" if self.fmt == "iceberg" else project.test_schema
        tables = [r[1] for r in project.run_sql(f"show tables in {schema}", fetch="all")]
        assert not [t for t in tables if "__pending_" in t or "__dbt_stage_" in t], tables

        # one batch again, in a new invocation: its discarded row once more, under that run
        run_dbt(window("2020-01-02", "2020-01-03", "--select", "mbq", "--vars", "bad: true"))
        again = project.run_sql(f"select id, _dbt_run_id from {rel}__quarantine", fetch="all")
        assert sorted(r[0] for r in again) == [0, 4, 4, 8], again
        assert {r[1] for r in again if r[0] == 4} == {invocation, invocation_id(project)}


class TestMicrobatchQuarantineDelta(BaseMicrobatchQuarantine):
    fmt = "delta"


class TestMicrobatchQuarantineIceberg(BaseMicrobatchQuarantine):
    fmt = "iceberg"
