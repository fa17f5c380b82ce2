"""A finished load is never taken back, whatever happens to the quarantine table afterwards.

Per case, a model (`incremental_strategy='append'`, `schema_contract` data_type: discard_row
with quarantine) is built (`--vars '{v: 0}'`), then runs three times (v 1, 2, 3), each loading
seven rows and discarding three (their `n` does not cast into the deployed bigint). Then its
`<model>__quarantine` is
- `recreate`: dropped and created again with the same columns, empty (delta, iceberg, parquet);
- `replace`: `CREATE OR REPLACE TABLE`d with its own rows (delta, iceberg: parquet tables
  cannot be replaced);
- `empty`: emptied, by `DELETE FROM` (delta, iceberg), by `TRUNCATE TABLE` (parquet, which has
  no DELETE);
- `log_cleanup` (delta): its log cleaned. `delta.logRetentionDuration` (and
  `delta.deletedFileRetentionDuration`, which may not exceed it) 'interval 1 seconds' and
  `delta.checkpointInterval` 1, a few commits, the log files aged by a week (Delta only deletes
  log files older than the retention cut-off truncated to the day), one more commit whose
  checkpoint cleans the expired log: `DESCRIBE HISTORY` no longer starts at version 0.
Then a fourth run (v 4). Every row runs 0-3 loaded must still be in the model's table, plus the
fourth run's rows, exactly; the fourth run's discarded rows are in the quarantine once, and
where the quarantine kept its rows (replace, log_cleanup), every run's discarded rows too.

All models share one project; the SQL runs through the project fixture (`project.run_sql`)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contracts.test_contract_matrix import rel

CASES = (
    ("recreate", "delta"),
    ("recreate", "iceberg"),
    ("recreate", "parquet"),
    ("replace", "delta"),
    ("replace", "iceberg"),
    ("empty", "delta"),
    ("empty", "iceberg"),
    ("empty", "parquet"),
    ("log_cleanup", "delta"),
)
KEEPS_ROWS = ("replace", "log_cleanup")  # the quarantine's rows outlive these
CONTRACT = "{'columns': 'evolve', 'data_type': 'discard_row', 'quarantine': true}"
FIRST = range(5)  # v 0: builds the table, `n` bigint


def span(v: int) -> range:
    """The ids run `v` (1-4) outputs; those divisible by 3 are discarded."""
    return range(v * 100, v * 100 + 10)


MODEL = f"""
{{{{ config(materialized='incremental', incremental_strategy='append',
          file_format='FMT', schema_contract={CONTRACT}) }}}}
{{% set v = var('v', 0) %}}
{{% if v == 0 %}}
select id, cast(id as bigint) as n from range({FIRST.start}, {FIRST.stop})
{{% else %}}
select id, if(id % 3 = 0, concat('bad_', cast(id as string)), cast(id as string)) as n
from range({{{{ v * 100 }}}}, {{{{ v * 100 + 10 }}}})
{{% endif %}}
"""


def good(v: int) -> list[int]:
    return [i for i in span(v) if i % 3 != 0]


def bad(v: int) -> list[int]:
    return [i for i in span(v) if i % 3 == 0]


def name_of(op: str, fmt: str) -> str:
    return f"j_{op}_{fmt}"


def sql(project, statement: str, fetch: str = "all") -> list[tuple]:
    rows = project.run_sql(statement, fetch=fetch)
    return [tuple(r) for r in rows] if fetch == "all" else rows


# ---- what happens to the quarantine ------------------------------------------------------------


def recreate(project, quarantine: str, fmt: str) -> None:
    shape = f"{quarantine}_shape"
    sql(project, f"create table {shape} using {fmt} as select * from {quarantine} where false")
    sql(project, f"drop table {quarantine}")
    sql(project, f"create table {quarantine} using {fmt} as select * from {shape}")
    sql(project, f"drop table {shape}")


def replace(project, quarantine: str, fmt: str) -> None:
    copy = f"{quarantine}_copy"
    sql(project, f"create table {copy} using {fmt} as select * from {quarantine}")
    sql(project, f"create or replace table {quarantine} using {fmt} as select * from {copy}")
    sql(project, f"drop table {copy}")


def empty(project, quarantine: str, fmt: str) -> None:
    if fmt == "parquet":
        sql(project, f"truncate table {quarantine}")
    else:
        sql(project, f"delete from {quarantine}")


def history_versions(project, table: str) -> list[int]:
    return sorted(int(r[0]) for r in sql(project, f"describe history {table}"))


def log_cleanup(project, quarantine: str, fmt: str) -> None:
    assert fmt == "delta"
    sql(
        project,
        f"alter table {quarantine} set tblproperties ("
        "'delta.logRetentionDuration' = 'interval 1 seconds',"
        # Delta requires the log's retention to be at least the deleted files'
        " 'delta.deletedFileRetentionDuration' = 'interval 1 seconds',"
        " 'delta.checkpointInterval' = '1')",
    )
    for i in range(3):  # commits, each with its checkpoint
        sql(project, f"alter table {quarantine} set tblproperties ('test.bump' = '{i}')")
    assert history_versions(project, quarantine)[0] == 0
    location = str(sql(project, f"describe detail {quarantine}")[0][4])
    log = Path(urlparse(location).path) / "_delta_log"
    assert log.is_dir(), log
    week_ago = time.time() - 7 * 24 * 3600
    for path in log.iterdir():  # expired, even for a cut-off truncated to the day
        os.utime(path, (week_ago, week_ago))
    time.sleep(1.5)  # past the retention
    sql(project, f"alter table {quarantine} set tblproperties ('test.bump' = 'clean')")
    versions = history_versions(project, quarantine)
    assert versions[0] > 0, f"the log of {quarantine} was not cleaned: versions {versions}"


OPERATIONS = {
    "recreate": recreate,
    "replace": replace,
    "empty": empty,
    "log_cleanup": log_cleanup,
}


class TestAFinishedLoadIsNeverTakenBack:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"{name_of(op, fmt)}.sql": MODEL.replace("FMT", fmt) for op, fmt in CASES}

    @pytest.fixture(scope="class")
    def story(self, project):
        """Runs 0-3, the model's rows then, the operations, run 4: per run the results by
        model name and the invocation id."""
        runs = {}

        def run(v: int) -> None:
            results = run_dbt(["run", "--vars", f"{{v: {v}}}"], expect_pass=None)
            report = json.loads(
                (Path(project.project_root) / "target/run_results.json").read_text()
            )
            runs[v] = {r.node.name: r for r in results}, report["metadata"]["invocation_id"]

        for v in range(4):
            run(v)
        before = {}
        for op, fmt in CASES:
            table = rel(project, name_of(op, fmt))
            before[op, fmt] = [r[0] for r in sql(project, f"select id from {table} order by id")]
            OPERATIONS[op](project, f"{table}__quarantine", fmt)
        run(4)
        return runs, before

    @pytest.mark.parametrize("op, fmt", CASES)
    def test_every_finished_load_stays(self, project, story, op, fmt):
        runs, before = story
        name = name_of(op, fmt)
        table = rel(project, name)
        for v, (results, _) in runs.items():
            result = results[name]
            assert str(result.status) == "success", (v, result.message)
            expected_discards = len(bad(v)) if v else 0
            assert result.adapter_response.get("rows_discarded", 0) == expected_discards, (
                v,
                result.adapter_response,
            )
        loaded = sorted([*FIRST, *good(1), *good(2), *good(3)])
        assert before[op, fmt] == loaded, "runs 0-3 did not load their rows"

        ids = [r[0] for r in sql(project, f"select id from {table} order by id")]
        expected = sorted(loaded + good(4))
        missing = sorted(set(expected) - set(ids))
        assert ids == expected, f"missing {missing}, extra {sorted(set(ids) - set(expected))}"

        quarantined = sql(
            project,
            f"select _dbt_run_id, id from {table}__quarantine order by _dbt_run_id, id",
        )
        by_run: dict[str, list[int]] = {}
        for run_id, id_ in quarantined:
            by_run.setdefault(run_id, []).append(id_)
        invocation = {v: runs[v][1] for v in runs}
        discarded = {invocation[4]: bad(4)}
        if op in KEEPS_ROWS:
            discarded.update({invocation[v]: bad(v) for v in (1, 2, 3)})
        assert by_run == discarded, (by_run, invocation)
