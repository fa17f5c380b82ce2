"""The cluster's command line: `python -m spark_contracts_dev.cluster start|stop|status
[--dir .cluster]`. The functions it calls are cluster.py's, handed in by `cluster.main` as the
module itself: this module does not import cluster.py, which imports it."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Optional, Sequence

from dbt.adapters.spark_contracts import jars as jar_resolution


def status_lines(cluster: Any) -> list[str]:
    """`cluster`: a `cluster.Cluster`."""
    alive = cluster.alive()
    lines = [f"cluster in {cluster.dir} (master {cluster.master_url})"]
    for record in cluster.processes:
        state = "up" if alive[record.name] else "DOWN"
        lines.append(f"  {record.name:<9} pid {record.pid:<8} {state:<5} log {record.log}")
    try:
        master = cluster.master_state()
        workers = sum(w["state"] == "ALIVE" for w in master["workers"])
        apps = [f"{a['name']} {a['state']}" for a in master.get("activeapps", [])]
        lines.append(f"  master: {workers} workers alive; applications: {', '.join(apps) or '-'}")
    except OSError as error:
        lines.append(f"  master web UI unreachable: {error}")
    return lines


def main(argv: Optional[Sequence[str]], local_cluster: ModuleType) -> int:
    """`local_cluster`: the cluster module (`start`, `load`, `ClusterError`, ...), looked up at
    call time."""
    parser = argparse.ArgumentParser(prog="python -m spark_contracts_dev.cluster")
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument("--dir", default=".cluster", type=Path)
    parser.add_argument("--jars-dir", default=None)
    args = parser.parse_args(argv)
    if args.command == "start":
        began = time.monotonic()
        try:
            cluster = local_cluster.start(args.dir, args.jars_dir)
        except (local_cluster.ClusterError, jar_resolution.JarsNotFound) as error:
            print(f"cluster start failed: {error}", file=sys.stderr)
            log = getattr(error, "log", None)
            if log is not None:  # CI keeps no files: the cause goes to the output
                print(
                    f"--- last lines of {log} ---\n{local_cluster.log_tail(log)}", file=sys.stderr
                )
            return 1
        print(f"cluster up in {time.monotonic() - began:.0f}s; state in {cluster.state_file}")
        print("\n".join(status_lines(cluster)))
        print(f"\nwarehouse: {cluster.warehouse_dir}\nprofiles.yml:\n")
        print(cluster.profiles_yml())
        return 0
    found = local_cluster.load(args.dir)
    if found is None:
        print(f"no cluster in {Path(args.dir).resolve()} ({local_cluster.STATE_FILE} absent)")
        return 0 if args.command == "stop" else 1
    if args.command == "status":
        print("\n".join(status_lines(found)))
        return 0 if all(found.alive().values()) else 1
    killed = found.stop()
    print(f"cluster in {found.dir} stopped" + (f" (SIGKILL: {killed})" if killed else ""))
    return 0
