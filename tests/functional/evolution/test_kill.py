"""Fault injection: `kill -9` of a real `dbt run` at each commit of an evolving run.

For each kill point k, a `dbt run` of its own model is started as a process and killed with
SIGKILL as soon as the k-th new commit of its table appears (Delta: `_delta_log/N.json`; Iceberg:
`metadata/vN.metadata.json`). Then, read from the table's own log/metadata files (no Spark):
the table is as before, as after, or carries the dead run's intent. One more `dbt run` (all
models, threads 4) must repair every table that carries an intent first (reported in
run_results), and every table must end exactly like a control model that was never killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.profile("session")  # processes of their own, each an embedded Spark

DBT = str(Path(sys.executable).with_name("dbt"))
INTENT = "dbt_spark_contracts.intent"

MODELS = {
    # Delta: a default and a backfill make the change multi-step (intent, feature, ADD COLUMNS,
    # SET DEFAULT, UPDATE, MERGE, intent cleared): every step is a commit.
    "delta": """
{{ config(materialized='incremental', file_format='delta', unique_key='id',
          schema_evolution=({'columns': {'note': {'default': "'n'"}, 'twice': {'backfill': 'id * 10'}}} if var('v', 1) != 1 else {})) }}
{% if var('v', 1) == 1 %}
select id from range(3)
{% else %}
select id, 'x' as note, id * 10 as twice from range(3, 6)
{% endif %}
""",
    # Iceberg: a new column is multi-step (intent, ADD COLUMNS, MERGE snapshot, intent cleared).
    "iceberg": """
{{ config(materialized='incremental', file_format='iceberg', unique_key='id', schema_evolution={}) }}
{% if var('v', 1) == 1 %}
select id from range(3)
{% else %}
select id, 'x' as note from range(3, 6)
{% endif %}
""",
}
KILL_POINTS = {"delta": 7, "iceberg": 4}


def kill_points(fmt: str) -> list[int]:
    """Every commit (`make faults`), or the middle and the last one (`make faults-ci`, which
    sets DBT_SPARK_CONTRACTS_KILL_SAMPLE to stay within the CI budget): mid-plan with the
    intent on the table, and after the load before the intent is cleared."""
    last = KILL_POINTS[fmt]
    if os.environ.get("DBT_SPARK_CONTRACTS_KILL_SAMPLE"):
        return sorted({(last + 1) // 2, last})
    return list(range(1, last + 1))


READ_ROWS = """
import json, sys
from pathlib import Path
from dbt.adapters.spark_contracts.session import EmbeddedSparkConfig, get_session
from dbt.adapters.spark_contracts.jars import configured_jars_dir
spark = get_session(EmbeddedSparkConfig(Path(sys.argv[1]), jars_dir=configured_jars_dir(None)))
out = {}
for table in sys.argv[2:]:
    rows = spark.sql(f"select * from {table} order by id").collect()
    out[table] = [[str(v) for v in r] for r in rows]
print("ROWS=" + json.dumps(out))
"""


class Project:
    def __init__(self, root: Path, fmt: str):
        self.root, self.fmt = root, fmt
        self.warehouse = root / "warehouse"
        (root / "models").mkdir(parents=True)
        (root / "dbt_project.yml").write_text(
            "name: kills\nversion: '1.0'\nprofile: kills\nconfig-version: 2\n"
        )
        (root / "profiles.yml").write_text(
            "kills:\n  target: dev\n  outputs:\n    dev:\n      type: spark_contracts\n"
            f"      schema: kills\n      warehouse_dir: {self.warehouse}\n      threads: 4\n"
        )
        self.names = ["control"] + [f"kill_{k}" for k in range(1, KILL_POINTS[fmt] + 1)]
        for name in self.names:
            (root / "models" / f"{name}.sql").write_text(MODELS[fmt])

    def dbt(self, *args: str, kill_at: int = 0, table: str = "") -> int:
        command = [DBT, "run", "--profiles-dir", str(self.root), *args]
        process = subprocess.Popen(
            command, cwd=self.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if kill_at:
            start = len(self.commits(table))
            deadline = time.monotonic() + 300
            while process.poll() is None and time.monotonic() < deadline:
                if len(self.commits(table)) - start >= kill_at:
                    os.kill(process.pid, signal.SIGKILL)
                    break
                time.sleep(0.02)
        return process.wait(timeout=600)

    def table_dir(self, table: str) -> Path:
        if self.fmt == "delta":
            return self.warehouse / "kills.db" / table
        return self.warehouse / "iceberg" / "kills" / table

    def commits(self, table: str) -> list[Path]:
        if self.fmt == "delta":
            folder = self.table_dir(table) / "_delta_log"
            return sorted(folder.glob("[0-9]*.json")) if folder.exists() else []
        folder = self.table_dir(table) / "metadata"
        return sorted(folder.glob("v*.metadata.json")) if folder.exists() else []

    def state(self, table: str) -> tuple[list, bool]:
        """(schema fields, intent present) from the table's own files."""
        if self.fmt == "delta":
            meta = None
            for path in self.commits(table):
                for line in path.read_text().splitlines():
                    action = json.loads(line)
                    if "metaData" in action:
                        meta = action["metaData"]
            assert meta is not None
            fields = json.loads(meta["schemaString"])["fields"]
            schema = [(f["name"], json.dumps(f["type"])) for f in fields]
            return schema, INTENT in meta.get("configuration", {})
        version = (self.table_dir(table) / "metadata" / "version-hint.text").read_text().strip()
        meta = json.loads(
            (self.table_dir(table) / "metadata" / f"v{version}.metadata.json").read_text()
        )
        current = next(s for s in meta["schemas"] if s["schema-id"] == meta["current-schema-id"])
        schema = [(f["name"], json.dumps(f["type"])) for f in current["fields"]]
        return schema, INTENT in meta.get("properties", {})

    def rows(self, tables: list[str]) -> dict:
        prefix = "iceberg.kills." if self.fmt == "iceberg" else "kills."
        out = subprocess.run(
            [sys.executable, "-c", READ_ROWS, str(self.warehouse), *(prefix + t for t in tables)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        line = next(x for x in out.stdout.splitlines() if x.startswith("ROWS="))
        data = json.loads(line[len("ROWS=") :])
        return {t: data[prefix + t] for t in tables}


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_kill_9_at_every_commit_is_repaired(tmp_path, fmt):
    project = Project(tmp_path, fmt)
    assert project.dbt() == 0  # v1 of every model
    before, _ = project.state("control")
    assert project.dbt("--select", "control", "--vars", "{v: 2}") == 0
    after, intent = project.state("control")
    assert not intent and after != before

    left_intent = {}
    for k in kill_points(fmt):
        table = f"kill_{k}"
        project.dbt("--select", table, "--vars", "{v: 2}", kill_at=k, table=table)
        schema, intent = project.state(table)
        assert intent or schema in (before, after), (k, schema)
        left_intent[table] = intent
    assert any(left_intent.values()), left_intent  # some kill landed mid-run

    assert project.dbt("--vars", "{v: 2}") == 0  # repairs first, then loads
    results = json.loads((tmp_path / "target" / "run_results.json").read_text())
    repairs = {
        r["unique_id"].split(".")[-1]: r["adapter_response"].get("repairs")
        for r in results["results"]
    }
    for table, intent in left_intent.items():
        assert bool(repairs.get(table)) == intent, (table, repairs.get(table))
        assert project.state(table) == (after, False), table
    rows = project.rows(["control", *left_intent])
    for table in left_intent:
        assert rows[table] == rows["control"], (table, rows[table])
