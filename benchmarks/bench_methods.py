"""Benchmark: what each connection method costs on the integration project, through `dbt run`.

Run from the repository root: `python benchmarks/bench_methods.py` (`make bench-methods` does; it
needs the local cluster: `make cluster`, or pass `--cluster DIR` of a running one).

The integration project (integration_tests/: seeds, Delta / Iceberg / parquet models, contract
models, a snapshot) is copied to a temporary folder, once per method, and deployed with an untimed
`dbt build`. Then the measured command, the second `dbt run` (threads 4: incremental merges and
appends into the deployed tables), runs as a subprocess, the methods interleaved
(session, thrift, connect, session, ...), `--pairs` rounds:

  session  the embedded SparkSession in the dbt process (local mode, the JVM starts with dbt)
  thrift   the cluster's Spark Thrift Server (PyHive over TCP)
  connect  the cluster's Spark Connect server (gRPC)

Per method: the median wall time of the process and the median sum of the models'
`execution_time` (target/run_results.json), and both as a ratio to session. The figures are
information (no target): what a method costs on this machine, printed and written to
benchmarks/results/methods.json (git-ignored).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

from bench_run_path import load_average, machine

# the local cluster's tooling lives at the repository's root (spark_contracts_dev, not in the wheel)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from spark_contracts_dev import cluster as local_cluster  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PROJECT = REPO / "integration_tests"
RESULTS = REPO / "benchmarks" / "results" / "methods.json"
DBT = str(Path(sys.executable).with_name("dbt"))
METHODS = ("session", "thrift", "connect")
COPIED = ("dbt_project.yml", "models", "seeds", "snapshots", "macros", "tests")


def profiles(method: str, info: local_cluster.Cluster, warehouse: Path) -> str:
    schema = f"bench_methods_{method}"
    if method == "session":
        target = f"method: session\n      warehouse_dir: {warehouse}"
    elif method == "thrift":
        target = f"method: thrift\n      host: 127.0.0.1\n      port: {info.thrift_port}\n      user: dbt"
    else:
        target = f"method: connect\n      host: sc://127.0.0.1:{info.connect_port}"
    return (
        "spark_contracts_integration_tests:\n"
        f"  target: {method}\n"
        "  outputs:\n"
        f"    {method}:\n"
        "      type: spark_contracts\n"
        f"      schema: {schema}\n"
        f"      {target}\n"
        "      threads: 4\n"
    )


def project_for(method: str, root: Path, info: local_cluster.Cluster) -> Path:
    project = root / method
    project.mkdir(parents=True)
    for name in COPIED:
        source = PROJECT / name
        if source.is_dir():
            shutil.copytree(source, project / name)
        elif source.exists():
            shutil.copy(source, project / name)
    (project / "profiles.yml").write_text(profiles(method, info, root / "session-warehouse"))
    return project


def dbt(project: Path, *args: str) -> Dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(
        [DBT, *args, "--project-dir", str(project), "--profiles-dir", str(project)],
        capture_output=True,
        text=True,
        cwd=project,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.stdout.write(done.stdout[-4000:])
        raise SystemExit(f"`dbt {' '.join(args)}` failed in {project}")
    results = json.loads((project / "target" / "run_results.json").read_text())
    model_time = sum(r["execution_time"] for r in results["results"])
    return {"wall": wall, "models": model_time, "nodes": len(results["results"])}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--cluster", default=str(REPO / ".cluster"), help="a running cluster's dir")
    args = parser.parse_args()
    info = local_cluster.load(Path(args.cluster))
    if info is None or not (info.thrift_port and info.connect_port):
        raise SystemExit(
            f"no cluster with Thrift and Connect servers in {args.cluster}: `make cluster`"
        )
    runs: Dict[str, List[Dict[str, Any]]] = {m: [] for m in METHODS}
    with tempfile.TemporaryDirectory(prefix="bench-methods-") as tmp:
        projects = {m: project_for(m, Path(tmp), info) for m in METHODS}
        for method, project in projects.items():
            print(f"deploying the integration project over {method} ...", flush=True)
            dbt(project, "build", "--full-refresh")
        for round_ in range(args.pairs):
            for method in METHODS:
                run = dbt(projects[method], "run")
                runs[method].append(run)
                print(
                    f"round {round_ + 1} {method:8s} wall {run['wall']:6.1f}s "
                    f"models {run['models']:6.1f}s ({run['nodes']} models)",
                    flush=True,
                )
    medians = {
        m: {k: statistics.median(r[k] for r in runs[m]) for k in ("wall", "models")}
        for m in METHODS
    }
    base = medians["session"]
    table = []
    for method in METHODS:
        row = {
            "method": method,
            "wall_s": round(medians[method]["wall"], 2),
            "models_s": round(medians[method]["models"], 2),
            "wall_vs_session": round(medians[method]["wall"] / base["wall"], 2),
            "models_vs_session": round(medians[method]["models"] / base["models"], 2),
        }
        table.append(row)
    header = (
        f"{'method':8s} {'wall':>8s} {'models':>8s} {'wall/session':>13s} {'models/session':>15s}"
    )
    print(f"\nsecond `dbt run` of the integration project, median of {args.pairs}")
    print(header)
    for row in table:
        print(
            f"{row['method']:8s} {row['wall_s']:7.1f}s {row['models_s']:7.1f}s "
            f"{row['wall_vs_session']:13.2f} {row['models_vs_session']:15.2f}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="minutes"),
                "machine": machine(),
                "load_average": load_average(),
                "pairs": args.pairs,
                "rows": table,
            },
            indent=2,
        )
    )
    print(f"machine: {machine()}; load average {load_average()}; written to {RESULTS}")
    return 0


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
