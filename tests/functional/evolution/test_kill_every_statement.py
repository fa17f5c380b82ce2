"""`kill -9` after every statement that changes something, in every materialization and format
(issue 40 §5): incremental runs that evolve and quarantine, the first build, a table model's
rebuild (in one statement, beside the table and swapped in, Iceberg's NOT NULL build), a full
refresh, a snapshot and a microbatch model.

The kill comes from the adapter's fault-injection point (connection/failpoint.py): a `dbt`
process with `DBT_SPARK_CONTRACTS_KILL_AFTER=k` kills itself with SIGKILL right after the k-th
statement it sent that can change something returned, as `kill -9` from outside would (no
cleanup, no `finally`). A control run of each model first counts its statements
(`DBT_SPARK_CONTRACTS_WRITES_LOG`), so every point between two statements is covered (`make
faults`), or the first, middle and last one (`make faults-ci`, DBT_SPARK_CONTRACTS_KILL_SAMPLE).

After the kills, one more `dbt` run of every model (threads 4) must succeed, repairing first what
needs it, and every killed model must end exactly like its control, which was never killed: the
same rows, and in its quarantine the same discarded rows (each at least once: a run killed after
its load committed has its rows quarantined, and the run after it discards them again).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from dbt.adapters.spark_contracts.connection.failpoint import KILL_AFTER_ENV, WRITES_LOG_ENV
from dbt.adapters.spark_contracts.core.recovery.pending import BEAT_PROPERTY
from dbt.adapters.spark_contracts.core.recovery.record import REPLACING_PROPERTY
from dbt.adapters.spark_contracts.run.lease import LEASE_ENV
from tests.functional.conftest import JVM_PARAMETERS
from tests.functional.evolution.test_kill import DBT, lease_seconds_for


@dataclass(frozen=True)
class Case:
    """One model (or snapshot) and how it is run twice: `first` (None: the killed run is the
    one that creates it) and `second`, the run that is killed. `compare`: the columns whose
    rows must match the control's; `quarantine`: its quarantine's too."""

    name: str
    body: str
    second: tuple[str, ...] = ("run",)
    first: tuple[str, ...] | None = ("run",)
    compare: str = "to_json(struct(*))"
    quarantine: bool = False
    snapshot: bool = False
    schema_yml: str = ""
    uses: tuple[str, ...] = field(default_factory=tuple)  # models it reads (built first)


V2 = ("--vars", "{v: 2}")
RUN2 = ("run", *V2)
CONTRACT = "schema_contract={'columns': 'evolve', 'data_type': 'discard_row', 'quarantine': true}"
CHANGED = """
{% if var('v', 1) == 1 %}
select id, cast(id as bigint) as n from range(0, 6)
{% else %}
select id, if(id % 3 = 0, 'bad', cast(id as string)) as n, 'x' as note from range(3, 12)
{% endif %}
"""


def incremental(fmt: str, extra: str = "") -> str:
    return (
        f"{{{{ config(materialized='incremental', file_format='{fmt}', unique_key='id', "
        f"{CONTRACT}{extra}) }}}}{CHANGED}"
    )


EVENTS = """
{{ config(materialized='table', file_format='delta', event_time='event_time') }}
select id, timestamp_seconds(1577836800 + id * 21600) as event_time from range(0, 16)
"""
MICROBATCH = """
{{ config(materialized='incremental', incremental_strategy='microbatch', file_format='delta',
    event_time='event_time', batch_size='day', begin=modules.datetime.datetime(2020, 1, 1),
    schema_contract={'data_type': 'discard_row', 'quarantine': true}) }}
{% if var('v', 1) == 2 %}
select id, event_time, if(id % 4 = 0, 'bad', cast(id as string)) as n
{% else %}
select id, event_time, cast(id as bigint) as n
{% endif %}
from {{ ref('events') }}
"""
SNAPSHOT = """
{{% snapshot {name} %}}
{{{{ config(target_schema=target.schema, unique_key='id', strategy='check', check_cols=['n'],
    file_format='delta') }}}}
select id, {{% if var('v', 1) == 1 %}}id{{% else %}}id * 10{{% endif %}} as n
{{% if var('v', 1) == 2 %}}, 'x' as note{{% endif %}} from range(0, 4)
{{% endsnapshot %}}
"""
NOT_NULL_YML = """
version: 2
models:
  - name: {name}
    config:
      contract: {{enforced: true}}
    columns:
      - name: id
        data_type: bigint
        constraints: [{{type: not_null}}]
      - name: n
        data_type: bigint
"""
NOT_NULL = """
{{ config(materialized='table', file_format='iceberg') }}
select id, id * {{ var('v', 1) }} as n from range(0, 5)
"""
WINDOW = ("--event-time-start", "2020-01-01", "--event-time-end", "2020-01-04")

# A column removal with a column added (Iceberg: its DROP COLUMNS is the run's last step, after
# the load; killed after it landed, the next run puts nothing back: the change stands)
REMOVAL = """
{{ config(materialized='incremental', file_format='iceberg', unique_key='id',
          schema_evolution={}) }}
{% if var('v', 1) == 1 %}
select id, id * 10 as gone from range(0, 6)
{% else %}
select id, 'x' as note from range(3, 9)
{% endif %}
"""

CASES = {
    "delta": [
        Case("inc_q", incremental("delta"), RUN2, quarantine=True),
        Case("first", incremental("delta"), RUN2, first=None),
        Case(
            "table_q",
            incremental("delta").replace("'incremental'", "'table'"),
            RUN2,
            quarantine=True,
        ),
        Case(
            "refresh",
            "{{ config(materialized='incremental', file_format='delta') }}"
            "select id from range({{ var('v', 1) * 3 }})",
            ("run", "--full-refresh", *V2),
        ),
        Case(
            "snap",
            SNAPSHOT,
            ("snapshot", *V2),
            first=("snapshot",),
            compare="to_json(struct(id, n, note, dbt_valid_to is null))",
            snapshot=True,
        ),
        Case(
            "mb",
            MICROBATCH,
            ("run", *WINDOW, *V2),
            first=("run", "--event-time-start", "2020-01-01", "--event-time-end", "2020-01-02"),
            quarantine=True,
            uses=("events",),
        ),
    ],
    "iceberg": [
        Case("inc_q", incremental("iceberg"), RUN2, quarantine=True),
        Case("not_null", NOT_NULL, RUN2, schema_yml=NOT_NULL_YML),
        Case("removal", REMOVAL, ("run", "--vars", "{v: 2, allow_column_removal: true}")),
        Case(  # dbt's merge over the staging view, a column added before it
            "snap",
            SNAPSHOT.replace("file_format='delta'", "file_format='iceberg'"),
            ("snapshot", *V2),
            first=("snapshot",),
            compare="to_json(struct(id, n, note, dbt_valid_to is null))",
            snapshot=True,
        ),
    ],
    "parquet": [
        Case(
            "inc_q",
            incremental("parquet").replace(
                "unique_key='id'", "incremental_strategy='insert_overwrite'"
            ),
            RUN2,
            quarantine=True,
        ),
        Case(
            "swap",
            "{{ config(materialized='table', file_format='parquet') }}"
            "select id{% if var('v', 1) == 2 %}, 'x' as note{% endif %} from range(4)",
            RUN2,
        ),
        Case(
            "refresh",
            "{{ config(materialized='incremental', file_format='parquet') }}"
            "select id from range({{ var('v', 1) * 3 }})",
            ("run", "--full-refresh", *V2),
        ),
    ],
}


def kill_points(count: int) -> list[int]:
    """After every counted statement (`make faults`), or the first, middle and last."""
    if os.environ.get("DBT_SPARK_CONTRACTS_KILL_SAMPLE"):
        return sorted({1, (count + 1) // 2, count})
    return list(range(1, count + 1))


# The repairs by hand an UnguardedTakeover names, and the check that nothing of the kills is left
# beside the models (no backup, no run record; names starting with `kept` aside).
BY_HAND = (
    '{% macro release_record(name) %}{% do run_query("alter table " ~ name ~ '
    "\" set tblproperties ('" + BEAT_PROPERTY + "' = '0', '" + REPLACING_PROPERTY + "' = '')\") %}"
    "{% endmacro %}\n"
    "{% macro drop_record(name) %}{% do run_query('drop table ' ~ name) %}{% endmacro %}\n"
    "{% macro by_hand(sql) %}{% do run_query(sql) %}{% endmacro %}\n"
    "{% macro no_leftovers(schema, kept='') %}{% set names = run_query('show tables in ' ~ "
    "schema).columns['tableName'].values() %}"
    "{% set left = [] %}{% for n in names %}"
    "{% if ('__dbt_backup' in n or '__dbt_lease_' in n) and not (kept and n.startswith(kept)) %}"
    "{% do left.append(n) %}{% endif %}{% endfor %}"
    "{% if left %}{% do exceptions.raise_compiler_error('left: ' ~ left) %}{% endif %}"
    "{% endmacro %}\n"
)


class Project:
    def __init__(self, root: Path, fmt: str, target: dict) -> None:
        self.root, self.fmt, self.runs = root, fmt, 0
        self.schema = f"every_{fmt}_{uuid.uuid4().hex[:8]}"
        for folder in ("models", "snapshots", "macros"):
            (root / folder).mkdir(parents=True, exist_ok=True)
        (root / "macros" / "by_hand.sql").write_text(BY_HAND)
        (root / "dbt_project.yml").write_text(
            "name: every\nversion: '1.0'\nprofile: every\nconfig-version: 2\n"
        )
        output = dict(target, schema=self.schema, threads=4)
        (root / "profiles.yml").write_text(
            yaml.safe_dump({"every": {"target": "dev", "outputs": {"dev": output}}})
        )

    def add(self, case: Case, name: str) -> None:
        if case.snapshot:
            (self.root / "snapshots" / f"{name}.sql").write_text(case.body.format(name=name))
        else:
            (self.root / "models" / f"{name}.sql").write_text(case.body)
        if case.schema_yml:
            (self.root / "models" / f"{name}.yml").write_text(case.schema_yml.format(name=name))
        for used in case.uses:
            (self.root / "models" / f"{used}.sql").write_text(EVENTS)

    def dbt(self, *args: str, env: dict | None = None) -> int:
        self.runs += 1
        argv = [DBT, *args[:1], "--profiles-dir", str(self.root), *args[1:]]
        with open(self.root / f"dbt-{self.runs}.log", "wb") as out:
            done = subprocess.run(
                argv,
                cwd=self.root,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                timeout=900,
            )
        return done.returncode

    def kept_by_hand(self, since: int) -> list[str]:
        """The statements that move a kept pending table by hand, as the warnings of the runs
        after run `since` name them (a Parquet model's pending table whose load no property
        records: core/recovery/manual.manual_move), in the order first named."""
        import re

        pattern = r"so it is kept\. By hand: (INSERT INTO .+?); (drop table if exists \S+(?: purge)?) \(if"
        found: list[str] = []
        for run in range(since + 1, self.runs + 1):
            text = (self.root / f"dbt-{run}.log").read_text(errors="replace")
            for match in re.finditer(pattern, text):
                found += [m for m in match.groups() if m not in found]
        return found

    def refused_records(self) -> list[tuple[str, str]]:
        """(the macro that does it, the record) for the repair by hand each of the last run's
        UnguardedTakeover or ReplaceMayRun errors names (every failed node's error must be one)."""
        import json
        import re

        results = json.loads((self.root / "target" / "run_results.json").read_text())["results"]
        failed = [r["message"] or "" for r in results if r["status"] == "error"]
        pattern = r"then (release its lease, ALTER TABLE|DROP TABLE) (\S+)"
        named = [re.search(pattern, m) for m in failed]
        assert all(named), failed
        how = {"DROP TABLE": "drop_record"}
        return sorted(
            {(how.get(f.group(1), "release_record"), f.group(2)) for f in named if f is not None}
        )

    def namespace(self) -> str:
        """Where the models and their records are (Iceberg's in its own catalog)."""
        return f"iceberg.{self.schema}" if self.fmt == "iceberg" else self.schema

    def relation(self, name: str) -> str:
        return f"{self.namespace()}.{name}"

    def show(self, queries: dict[str, str]) -> dict[str, list[str]]:
        """Each query's rows (one string column `r`), sorted, read by one `dbt show`."""
        import json

        union = " union all ".join(f"select '{k}' as q, r from ({v})" for k, v in queries.items())
        shown = subprocess.run(
            [
                DBT,
                "show",
                "--profiles-dir",
                str(self.root),
                "--quiet",
                "--output",
                "json",
                "--limit",
                "100000",
                "--inline",
                f"select * from ({union}) order by q, r",
            ],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert shown.returncode == 0, shown.stdout + shown.stderr
        out: dict[str, list[str]] = {k: [] for k in queries}
        for row in json.loads(shown.stdout)["show"]:
            out[row["q"]].append(row["r"])
        return out


@pytest.fixture
def every_target(request, tmp_path) -> dict:
    """The profile output of the `--profile` under test; the session method gets a warehouse
    (and metastore) of its own, which each `dbt` process opens in turn."""
    if request.config.getoption("--profile") == "session":
        return {
            "type": "spark_contracts",
            "warehouse_dir": str(tmp_path / "warehouse"),
            "server_side_parameters": dict(JVM_PARAMETERS),
        }
    return request.getfixturevalue("dbt_profile_target")


@pytest.mark.parametrize("fmt", ["delta", "iceberg", "parquet"])
def test_kill_9_after_every_statement_of_every_materialization(
    tmp_path, every_target, fmt, monkeypatch, request
):
    monkeypatch.setenv(LEASE_ENV, str(lease_seconds_for(request.config)))
    target = every_target
    project = Project(tmp_path / "project", fmt, target)
    cases = CASES[fmt]

    # each control run counts the statements of its second run, which the kills then visit
    counts: dict[str, int] = {}
    for case in cases:
        control = f"{case.name}_control"
        project.add(case, control)
        if case.first is not None:
            assert project.dbt(*case.first, "--select", control, *case.uses) == 0, case.name
        log = tmp_path / f"{control}.writes"
        assert project.dbt(*case.second, "--select", control, env={WRITES_LOG_ENV: str(log)}) == 0
        counts[case.name] = len(log.read_text().splitlines())
        assert counts[case.name] > 0, case.name

    # every copy's first run in one `dbt` process per case (threads 4), then each killed run
    # in a process of its own
    killed: dict[str, list[str]] = {
        case.name: [f"{case.name}_kill_{k}" for k in kill_points(counts[case.name])]
        for case in cases
    }
    for case in cases:
        for name in killed[case.name]:
            project.add(case, name)
        if case.first is not None:
            assert project.dbt(*case.first, "--select", *killed[case.name]) == 0, case.name
    for case in cases:
        for k, name in zip(kill_points(counts[case.name]), killed[case.name], strict=True):
            code = project.dbt(*case.second, "--select", name, env={KILL_AFTER_ENV: str(k)})
            assert code == -9, f"{name}: not killed after statement {k} (exit {code})"

    # the killed models run again, as a user retries: each repairs first, then loads. Over a
    # server a killed Parquet run's lease is not taken over (its statement may still run there,
    # and Parquet cannot guard against its late write: UnguardedTakeover), nor an Iceberg
    # rebuild's killed between its record's `replacing` mark and its replace in the table's log
    # (ReplaceMayRun, run/replace_alone.py); the user makes sure it is over and releases the
    # lease the error names (the record stays, for the repair to read), then runs again. These cases load the same rows whatever ran before, so running
    # again copies that had loaded changes nothing.
    over_server = request.config.getoption("--profile") != "session"
    retried = project.runs
    for case in cases:
        code = project.dbt(*case.second, "--select", *killed[case.name])
        if code != 0 and fmt in ("parquet", "iceberg") and over_server:
            refused = project.refused_records()
            assert refused, f"{case.name}: the retry failed, refused by no lease it names"
            for how, record in refused:
                project.dbt("run-operation", how, "--args", f"{{name: {record}}}")
            code = project.dbt(*case.second, "--select", *killed[case.name])
        assert code == 0, case.name
    # Parquet keeps no log: a quarantining run killed between its load and the table property
    # that records it leaves its pending table, kept with a warning naming the move by hand
    # (never dropped on an absence: run-guarantees.md); over a server, one killed after that
    # property too (its lease ran out, and the server may still run its own move, which the
    # statements by hand do not repeat). The user moves it as the warning says
    # (these retries load the same rows, so the load is in the table), and the next run drops
    # the record whose pending table is gone.
    by_hand = project.kept_by_hand(since=retried)
    if fmt == "parquet" and by_hand:
        for sql in by_hand:
            assert project.dbt("run-operation", "by_hand", "--args", f'{{"sql": "{sql}"}}') == 0
        for case in (c for c in cases if c.quarantine):
            assert project.dbt(*case.second, "--select", *killed[case.name]) == 0, case.name
    else:  # Delta and Iceberg decide from the model table's own log
        assert not by_hand, by_hand
    # nothing of the kills left beside the models: no backup, no run record
    # (over a server a Delta or Iceberg quarantining run's record stays while its load may
    # still commit there: run-guarantees.md)
    kept = "inc_q_" if over_server and fmt != "parquet" else ""
    # the records sit beside their model (Iceberg's in its catalog: spark_catalog may not even
    # hold the schema)
    args = f"{{schema: '{project.namespace()}', kept: '{kept}'}}"
    assert project.dbt("run-operation", "no_leftovers", "--args", args) == 0

    queries: dict[str, str] = {}
    for case in cases:
        for who in (*killed[case.name], f"{case.name}_control"):
            queries[who] = f"select {case.compare} as r from {project.relation(who)}"
            if case.quarantine:
                queries[f"{who}__q"] = (
                    "select distinct to_json(struct(id, _contract_reason)) as r "
                    f"from {project.relation(who)}__quarantine"
                )
    rows = project.show(queries)
    for case in cases:
        control = f"{case.name}_control"
        assert rows[control], f"{control}: no rows"
        if case.quarantine:
            assert rows[f"{control}__q"], f"{control}: the case discards nothing"
        for name in killed[case.name]:
            assert rows[name] == rows[control], (name, rows[name], rows[control])
            if case.quarantine:
                assert rows[f"{name}__q"] == rows[f"{control}__q"], (name, rows[f"{name}__q"])
