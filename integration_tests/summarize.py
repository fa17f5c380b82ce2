"""Print what the last `dbt build` of integration_tests built: node, materialization, format,
relation, status and time, read from target/run_results.json and target/manifest.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def summarize(target: Path) -> str:
    results = json.loads((target / "run_results.json").read_text())
    nodes = json.loads((target / "manifest.json").read_text())["nodes"]
    lines = [f"{'node':<44} {'kind':<12} {'format':<8} {'status':<8} {'secs':>6}  relation"]
    for result in results["results"]:
        node = nodes.get(result["unique_id"], {})
        config = node.get("config", {})
        kind = config.get("materialized") or node.get("resource_type", "")
        is_table = kind in ("table", "incremental", "seed", "snapshot")
        file_format = (config.get("file_format") or "delta") if is_table else ""
        name = node.get("name") or result["unique_id"].split(".")[2]
        lines.append(
            f"{name[:44]:<44} {kind:<12} {file_format:<8} "
            f"{result['status']:<8} {result['execution_time']:>6.2f}  {node.get('relation_name') or ''}"
        )
    elapsed = results.get("elapsed_time", 0.0)
    lines.append(f"{len(results['results'])} nodes in {elapsed:.1f}s")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarize(Path(sys.argv[1] if len(sys.argv) > 1 else "target")))
