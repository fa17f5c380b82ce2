"""Iceberg through a REST catalog (CI's share; `make rest-catalog-test` runs the Iceberg contract
and evolution suites so on session, thrift and connect).

Iceberg's own REST catalog server (1.11.0, spark_contracts_dev.rest_catalog: a SQLite
catalogue, a local warehouse) serves the embedded session's Iceberg 1.12 runtime, the catalog
set by the profile's `server_side_parameters` alone (`type: rest`, `uri`). One dbt process (one
JVM: dbt's `dbtRunner`, twice) runs two Iceberg models, then reads them back through its Spark:

- `ev_rest` (merge on `id`) gains a column on its second run (`columns: evolve`);
- `q_rest` (append, `data_type: discard_row` with quarantine) turns away a row whose `n` does
  not cast into the deployed bigint: it lands in `q_rest__quarantine`.

The tables are in the REST catalog: its SQLite catalogue lists them, its warehouse holds their
files, and the Hadoop catalogue's folder (`<warehouse_dir>/iceberg`) was never made."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import yaml

from dbt.adapters.spark_contracts.core.recovery.pending import BEAT_PROPERTY
from dbt.adapters.spark_contracts.run.heartbeat import LEASE_ENV
from spark_contracts_dev import rest_catalog as rest
from tests.functional.conftest import JVM_PARAMETERS

SCHEMA = "rest_ci"
EVOLVES = """{{ config(materialized='incremental', file_format='iceberg', unique_key='id',
    schema_contract={'columns': 'evolve'}) }}
{% if var('v', 1) == 1 %}
select 1 as id, 'a' as name union all select 2 as id, 'b' as name
{% else %}
select 3 as id, 'c' as name, cast(30 as bigint) as score
{% endif %}
"""
QUARANTINES = """{{ config(materialized='incremental', incremental_strategy='append',
    file_format='iceberg', schema_contract={'data_type': 'discard_row', 'quarantine': true}) }}
{% if var('v', 1) == 1 %}
select 1 as id, cast(10 as bigint) as n
{% else %}
select 2 as id, 'bad' as n union all select 3 as id, '30' as n
{% endif %}
"""
# Runs in the dbt process: both runs, then what its Spark sees (printed as one JSON line).
SCRIPT = """
import json, sys
from dbt.cli.main import dbtRunner
from dbt.adapters.spark_contracts.connection import session as embedded

def run(*args):
    res = dbtRunner().invoke([*args, "--profiles-dir", ".", "--project-dir", "."])
    if res.result is None:
        return {"exception": str(res.exception)}
    return {r.node.name: [str(r.status), r.message] for r in res.result}

out = {"v1": run("run"), "v2": run("run", "--vars", "{v: 2}")}
spark, schema = embedded._active, sys.argv[1]
rows = lambda sql: [list(r) for r in spark.sql(sql).collect()]
for name in ("ev_rest", "q_rest"):
    table = spark.table(f"iceberg.{schema}.{name}")
    out[name] = {
        "columns": [[f.name, f.dataType.simpleString()] for f in table.schema],
        "rows": rows(f"select * from iceberg.{schema}.{name} order by id"),
        "snapshots": rows(f"select count(*) from iceberg.{schema}.{name}.snapshots")[0][0],
        "history": rows(f"select count(*) from iceberg.{schema}.{name}.history")[0][0],
    }
out["quarantined"] = rows(f"select id, n from iceberg.{schema}.q_rest__quarantine order by id")
out["tables"] = sorted(r[1] for r in rows(f"show tables in iceberg.{schema}"))
out["catalog_type"] = spark.conf.get("spark.sql.catalog.iceberg.type")
try:
    out["client_iceberg"] = spark._jvm.org.apache.iceberg.IcebergBuild.version()
except Exception as exc:
    out["client_iceberg"] = f"unknown ({exc!r}); spark.jars: {spark.conf.get('spark.jars', '')}"
print("RESULT " + json.dumps(out))
"""


def why_left(server_log: Path, dbt_logs: Path) -> List[str]:
    """What the REST server and the runs logged that can leave a file behind (a commit that
    failed on the server after writing its metadata file; a lease beat that failed), for a
    failure's message."""
    marks = ("Exception", "ERROR", "WARN", "could not renew", "could not let go", "could not drop")
    found = []
    for path in [server_log, *sorted(dbt_logs.glob("*.log"))]:
        if path.exists():
            lines = path.read_text(errors="replace").splitlines()
            found += [f"{path.name}: {x[:300]}" for x in lines if any(m in x for m in marks)]
    return found[-40:]


def test_iceberg_models_evolve_and_quarantine_in_a_rest_catalog(tmp_path: Path) -> None:
    server = rest.start(tmp_path / "rest")
    try:
        project = tmp_path / "project"
        (project / "models").mkdir(parents=True)
        (project / "models" / "ev_rest.sql").write_text(EVOLVES)
        (project / "models" / "q_rest.sql").write_text(QUARANTINES)
        (project / "dbt_project.yml").write_text(
            "name: proj\nversion: '1.0'\nprofile: proj\nconfig-version: 2\n"
        )
        warehouse = tmp_path / "warehouse"
        output = {
            "type": "spark_contracts",
            "method": "session",
            "schema": SCHEMA,
            "warehouse_dir": str(warehouse),
            "threads": 2,
            "server_side_parameters": {**JVM_PARAMETERS, **server.spark_conf()},
        }
        profiles = {"proj": {"target": "dev", "outputs": {"dev": output}}}
        (project / "profiles.yml").write_text(yaml.safe_dump(profiles))
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, SCHEMA],
            cwd=project,
            # a short lease: the heartbeat's own connection commits to each lease table while
            # the run holds it, as a long run's does (its PURGE must still leave no file)
            env=dict(os.environ, DBT_LOG_PATH=str(project / "logs"), **{LEASE_ENV: "1.5"}),
            capture_output=True,
            text=True,
            timeout=600,
        )
        lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
        assert done.returncode == 0 and lines, done.stdout[-4000:] + done.stderr[-4000:]
        out = json.loads(lines[-1][len("RESULT ") :])

        for run in ("v1", "v2"):
            assert {n: s for n, (s, _) in out[run].items()} == {
                "ev_rest": "success",
                "q_rest": "success",
            }, out[run]
        # the evolve change: a new column, the old rows kept (null in it), the new row loaded
        assert out["ev_rest"]["columns"] == [["id", "int"], ["name", "string"], ["score", "bigint"]]
        assert out["ev_rest"]["rows"] == [[1, "a", None], [2, "b", None], [3, "c", 30]]
        assert out["ev_rest"]["snapshots"] >= 2 and out["ev_rest"]["history"] >= 2
        # the contract: `bad` does not cast into bigint, so its row is quarantined
        assert out["q_rest"]["columns"] == [["id", "int"], ["n", "bigint"]]
        assert out["q_rest"]["rows"] == [[1, 10], [3, 30]]
        assert out["quarantined"] == [[2, "bad"]]
        # (the schema history of Iceberg models is an Iceberg table beside them)
        names = ["dbt_schema_history", "ev_rest", "q_rest", "q_rest__quarantine"]
        assert out["tables"] == names

        # a 1.12 client on a 1.11 server, the catalog the REST one
        assert out["catalog_type"] == "rest"
        assert out["client_iceberg"].startswith("1.12"), out["client_iceberg"]
        assert rest.SERVER_ICEBERG_VERSION == "1.11.0"
        # the tables live in the REST catalog: its SQLite catalogue and its warehouse
        assert server.tables() == [(SCHEMA, name) for name in names]
        for name in names:
            metadata = server.warehouse / SCHEMA / name / "metadata"
            assert list(metadata.glob("*.metadata.json")), metadata
        # the stage, pending and lease tables the runs dropped left no files there (PURGE;
        # Iceberg deletes their files, the local file system keeps the empty folders)
        own = [
            p
            for p in (server.warehouse / SCHEMA).iterdir()
            if any(mark in p.name for mark in ("__dbt_stage_", "__dbt_lease_", "__pending_"))
        ]
        assert own, "the runs made no stage, pending or lease table"
        # a lease's heartbeat connection (another Spark session) committed to a lease table
        # while its run held it: what left a file behind before drop_record's refresh
        beats = re.compile(
            r"\[lease [^\]]*\]: On lease [^\n]*\nalter table \S+__dbt_lease_\S+ set "
            rf"tblproperties \('{re.escape(BEAT_PROPERTY)}' = '[1-9]"
        )
        logs = "".join(p.read_text(errors="replace") for p in (project / "logs").glob("*.log"))
        assert beats.search(logs), "no heartbeat was committed while a lease was held"
        leftovers = sorted(str(f) for p in own for f in p.rglob("*") if f.is_file())
        assert leftovers == [], (leftovers, why_left(server.log_path, project / "logs"))
        # ... and the Hadoop catalogue's folder under the warehouse was never made
        assert not (warehouse / "iceberg").exists()
        assert server.running(), server.log_path.read_text()[-4000:]
    finally:
        server.stop()
