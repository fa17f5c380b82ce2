"""A quarantining run by the day's facts (issue 41 §1, core/materialization/run_plan.first_pass):

- a clean day is one statement, the load over the model's output, no pending table;
- the first discarding run after a clean one tries that pass, which fails its own job at the
  first discarded row and commits nothing, then reads the output into its pending table;
- a run after a discarding one goes to its pending table at once (the quarantine's memory,
  `dbt_spark_contracts.last_run_discarded`), and reads the model's output once;
- a clean run after a discarding one sets the memory back, and the next run takes its first
  pass again;
- Parquet, whose failed append can leave files behind and which keeps no log to tell, takes
  its pending table every day.

Every run's outcome is checked where it lands (the table, the quarantine, the report), on each
format. The evaluations of the model's query are counted on the session method (probes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from dbt.adapters.spark_contracts.core.contracts.quarantine import DISCARDED_PROPERTY
from dbt.adapters.spark_contracts.run.outcome_events import (
    FIRST_PASS,
    PENDING,
    PENDING_AFTER_FIRST_PASS,
)
from tests.functional.evolution.test_evolution_matrix import run_dbt_any, statuses
from tests.functional.probes import ROWS, evaluation_probes, versioned_model

BAD_EVERY = 10  # run `bad`: every tenth row's `n` is not a number
DISCARDED = ROWS // BAD_EVERY
FORMATS = ("delta", "iceberg", "parquet")


def model(fmt: str, probed: bool) -> str:
    """An incremental append under data_type discard_row with quarantine; `n` is a string the
    table keeps as bigint. Var `day`: `clean` (every `n` a number) or `bad`."""
    ident = "cast(probe_named(id, '{name}') as bigint)" if probed else "id"
    config = (
        f"materialized='incremental', incremental_strategy='append', file_format='{fmt}', "
        "schema_contract={'data_type': 'discard_row', 'quarantine': true}"
    )
    first = "select id, cast(id as bigint) as n from range(1)"
    bad = f"if(id % {BAD_EVERY} = 0, 'bad', cast(id as string))"
    later = (
        f"select {ident} as id, "
        + "{% if var('day') == 'bad' %}"
        + bad
        + "{% else %}cast(id as string){% endif %} as n from range("
        + str(ROWS)
        + ")"
    )
    return versioned_model(config, first, later)


# the days every model goes through, after its first build (v1): what each run must take
DAYS = [
    ("clean", FIRST_PASS),
    ("bad", PENDING_AFTER_FIRST_PASS),
    ("bad", PENDING),
    ("clean", PENDING),  # the memory says the last run discarded: pending, and set back
    ("clean", FIRST_PASS),
]


def relation(project: Any, fmt: str, name: str) -> str:
    return f"{'iceberg.' if fmt == 'iceberg' else ''}{project.test_schema}.{name}"


def count(project: Any, table: str) -> int:
    return int(project.run_sql(f"select count(*) from {table}", fetch="one")[0])


def report(project: Any) -> Dict[str, Any]:
    path = Path(project.project_root) / "target" / "schema_changes.json"
    return json.loads(path.read_text())["models"]


def days(project: Any, models: Dict[str, str], count_of: Any = None) -> Iterator[Dict[str, Any]]:
    """The first build, then each of `DAYS` in turn: per day, the statuses, the report's
    entries, each model's (`models`: name -> format) table and quarantine rows, and
    (`count_of`) the model's evaluations that day."""
    first = run_dbt_any(["run", "--vars", "{v: 1, day: clean}"])
    assert set(statuses(first).values()) == {"success"}, statuses(first)
    for day, _ in DAYS:
        before = {n: count_of(n) for n in models} if count_of else {}
        results = run_dbt_any(["run", "--vars", f"{{v: 2, day: {day}}}"])
        after = {n: count_of(n) for n in models} if count_of else {}
        entries = report(project)
        rows = {}
        for name, fmt in models.items():
            table = relation(project, fmt, name)
            quarantined = entries[f"model.test.{name}"].get("quarantined")
            held = count(project, f"{table}__quarantine") if quarantined or day == "bad" else 0
            rows[name] = (count(project, table), held)
        yield {
            "statuses": statuses(results),
            "report": entries,
            "rows": rows,
            "evaluations": {n: after[n] - before[n] for n in before},
        }


def check_outcomes(project: Any, fmt: str, name: str, seen: List[Dict[str, Any]]) -> None:
    """Each day's path, counts, pending table, quarantine and table rows, and the memory."""
    table = relation(project, fmt, name)
    quarantine = f"{table}__quarantine"
    loaded, quarantined = 1, 0  # the first build's row
    for (day, planned), got in zip(DAYS, seen, strict=True):
        path = PENDING if fmt == "parquet" else planned
        entry = got["report"][f"model.test.{name}"]
        assert got["statuses"][name] == "success", (day, got["statuses"])
        assert entry["quarantine_path"] == path, (day, entry)
        discarded = DISCARDED if day == "bad" else 0
        assert entry["rows_discarded"] == discarded, (day, entry)
        assert (entry["pending_table"] is None) is (path == FIRST_PASS), (day, entry)
        loaded += ROWS - discarded
        quarantined += discarded
        held = got["rows"][name]
        assert held == (loaded, quarantined if day == "bad" else 0), (day, path, held)
    if quarantined:
        reasons = project.run_sql(
            f"select count(*) from {quarantine} where _contract_reason is null", fetch="one"
        )
        assert (count(project, quarantine), reasons[0]) == (quarantined, 0)
    # no pending table is left
    left = project.run_sql(
        f"show tables in {table.rsplit('.', 1)[0]} like '{name}__quarantine__pending*'",
        fetch="all",
    )
    assert not left, left
    # the memory after the last (clean) day (Parquet's too: its runs keep it, unused)
    rows = project.run_sql(f"show tblproperties {quarantine} ('{DISCARDED_PROPERTY}')", fetch="all")
    assert [r[1] for r in rows] == ["false"], rows


class TestFirstPassEveryMethod:
    """The paths and outcomes, on whatever method the profile runs (session, thrift, connect)."""

    @pytest.fixture(scope="class")
    def models(self) -> Dict[str, str]:
        return {f"first_pass_{fmt}.sql": model(fmt, probed=False) for fmt in FORMATS}

    @pytest.fixture(scope="class")
    def seen(self, project: Any) -> List[Dict[str, Any]]:
        return list(days(project, {f"first_pass_{fmt}": fmt for fmt in FORMATS}))

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_paths_and_outcomes(self, project: Any, seen: List[Dict[str, Any]], fmt: str) -> None:
        check_outcomes(project, fmt, f"first_pass_{fmt}", seen)


@pytest.mark.profile("session")  # counts in this process's SparkContext
class TestFirstPassEvaluations:
    """The model's query, counted: once on a clean day, once on a discarding day after a
    discarding one, at most twice (the failed first pass, then the pending table) on the first
    discarding day after a clean one."""

    NAMES = [f"probed_{fmt}" for fmt in ("delta", "iceberg")]

    @pytest.fixture(scope="class")
    def models(self) -> Dict[str, str]:
        return {
            f"{name}.sql": model(name.split("_")[1], probed=True).replace("{name}", name)
            for name in self.NAMES
        }

    @pytest.fixture(scope="class")
    def seen(self, project: Any) -> List[Dict[str, Any]]:
        with evaluation_probes(self.NAMES) as count_of:
            names = {name: name.split("_")[1] for name in self.NAMES}
            return list(days(project, names, count_of))

    @pytest.mark.parametrize("name", NAMES)
    def test_evaluations(self, project: Any, seen: List[Dict[str, Any]], name: str) -> None:
        check_outcomes(project, name.split("_")[1], name, seen)
        for (day, path), got in zip(DAYS, seen, strict=True):
            evaluated = got["evaluations"][name]
            if path == PENDING_AFTER_FIRST_PASS:
                assert ROWS <= evaluated <= 2 * ROWS, (day, path, evaluated)
            else:
                assert evaluated == ROWS, (day, path, evaluated)
