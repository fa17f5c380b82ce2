"""Benchmark: the adapter's run path end to end, through `dbt run` processes as users run them.

Run from the repository root: `python benchmarks/bench_run_path.py` (`make bench` does).

Every measurement is one `dbt run --profiles-dir .` subprocess in a generated project under
benchmarks/run_path/ (written by this script; the profiles read the warehouse folder from the
environment). Model times come from target/run_results.json (`execution_time`); the whole
process is timed too (wall). Each scenario first deploys its tables with untimed first runs (the
scenarios' setups run side by side), copies the warehouse folder (Delta files + Derby
metastore), and puts that copy back before every measured run: every measured run starts from
the same deployed tables, and nothing is cached beforehand (each process starts its own JVM and
SparkSession; only dbt's own partial parsing carries over, as it does for users). The measured
processes run one at a time, A and B interleaved (A, B, A, B, ...); ratio = median(A) / median(B).

  P1  the second `dbt run` (threads 4) of 20 incremental Delta models, 10 `merge` with
      unique_key (5k updates + 5k inserts each) and 10 `append` (10k rows each), configured with
      schema_contract {columns: evolve, data_type: evolve} and schema_evolution {}, on this
      adapter (A) / the same models on plain dbt-spark 1.11, method session, file_format delta,
      no contract (B). dbt-spark runs from its own venv (benchmarks/.venv-dbt-spark, created
      when missing) with the same jars and Spark settings in its profile's
      server_side_parameters (dbt-spark passes them to SparkSession.builder on every
      statement). Model time = the sum of the 20 execution_times. Target <= 1.05.
  P3  an incremental append of an expensive, uncached model (5M rows from range(), sha2 over a
      string, an aggregate joined back) whose `n` is a string with 5 non-numeric values while the
      deployed `n` is bigint, under schema_contract {data_type: discard_row} (A; the load reads
      the model once, filtering the discarded rows and counting them as it goes), and with
      quarantine: true as well (A'; the same load also collects the discarded rows, which go
      to the quarantine table after it, under the table's journal), / the same query without a
      contract, casting `n` to bigint in the model (B: what a user writes without the
      adapter). Order A, B, A' per round; both ratios use the same B runs. Target <= 1.15.
  P5  schema_evolution {} on Delta, append of a 10k-row batch into a 10k-row table: the run
      that adds a column (A1) and the run that widens `n` int -> bigint (A2) / the run with no
      schema change (B). Target <= 1.2. For information, the add-column run into a 10M-row
      table / the same run into the 10k-row table, in the first round only.

The table (name, A, B, ratio, target, date, machine) is printed and written as JSON to
benchmarks/results/run_path.json (git-ignored: the figures are per machine and per run). The
script exits 0 whether targets are met or not (it is a benchmark, not a test), and 1 when a dbt
run fails (its error and log are printed). `--pairs`, `--p3-rows`, `--p5-large-rows` and
`--only p1,p3,p5` shrink it for a quick look. Set DBT_SPARK_CONTRACTS_JARS to the folder holding
the Delta/Iceberg jars (default .jars/ in the repository).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = REPO / "benchmarks"
PROJECTS_DIR = BENCH_DIR / "run_path"
RESULTS_FILE = BENCH_DIR / "results" / "run_path.json"
DBT_SPARK_VENV = BENCH_DIR / ".venv-dbt-spark"
DBT_SPARK_REQUIREMENTS = ("dbt-spark[session]==1.11.*", "pyspark==4.1.1", "dbt-core>=1.10,<1.12")
DEFAULT_JARS = REPO / ".jars"
JAR_NAMES = ("delta-spark_", "delta-storage-", "iceberg-spark-runtime-")

# measured A/B pairs per comparison: with 3, P3's per-round ratios spread 1.11-1.20 around a
# median near its target; 5 make one slow process move the median less
PAIRS = 5
PROCESS_TIMEOUT_S = 600
QUIET_WAIT_S = 120  # at most this long, wait for other Spark JVMs to end before measuring
SETTLE_S = 20  # at most this long, wait for the previous run's JVM to exit before the next run

# P1
P1_MODELS_PER_STRATEGY = 10
P1_FIRST_ROWS = 50_000  # rows the first run writes per model
P1_BATCH = 10_000  # rows the second run reads per model (merge: half updates, half inserts)
P1_TARGET = 1.05
# P3
P3_ROWS = 5_000_000
P3_DEPLOYED_ROWS = 10_000  # the first run only fixes the deployed schema (n bigint)
P3_BAD_EVERY = 1_000_000  # one non-numeric `n` per million rows: 5 rows discarded
P3_TARGET = 1.15
# P5
P5_SMALL_ROWS = 10_000
P5_LARGE_ROWS = 10_000_000
P5_BATCH = 10_000
P5_TARGET = 1.2
P5_LARGE_RUNS = 1  # the size ratio is for information: measured in the first round only
P5_SIZE_TARGET = 1.5  # information only (the same figure bench_delta_evolution.py aims for)


# --- machine and environment -----------------------------------------------------------------


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text(encoding="utf-8").split()[:3])
    except OSError:
        return "n/a"


def memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "n/a"


def machine() -> str:
    return f"nproc {os.cpu_count()}, {memory_gib()} RAM, {platform.machine()}"


def other_jvms() -> int:
    """Spark JVMs running on the machine besides ours (they skew the timings)."""
    count = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"java" in cmdline and b"SparkSubmit" in cmdline:
            count += 1
    return count


def jar_paths() -> List[Path]:
    jars_dir = Path(os.environ.get("DBT_SPARK_CONTRACTS_JARS", DEFAULT_JARS))
    jars = []
    for prefix in JAR_NAMES:
        found = sorted(jars_dir.glob(f"{prefix}*.jar"))
        if not found:
            raise SystemExit(f"no {prefix}*.jar in {jars_dir}: run `make jars` first")
        jars.append(found[-1].resolve())
    return jars


def ensure_dbt_spark_venv() -> Path:
    """Plain dbt-spark 1.11 in a venv of its own; created once, reused after."""
    dbt = DBT_SPARK_VENV / "bin" / "dbt"
    if dbt.exists():
        return dbt
    print(f"creating {DBT_SPARK_VENV.relative_to(REPO)} (plain dbt-spark 1.11) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(DBT_SPARK_VENV)], check=True)
    pip = [str(DBT_SPARK_VENV / "bin" / "pip"), "install", "--quiet"]
    subprocess.run(pip + ["--upgrade", "pip"], check=True)
    subprocess.run(pip + list(DBT_SPARK_REQUIREMENTS), check=True)
    return dbt


def package_versions(dbt: Path) -> str:
    python = dbt.parent / "python"
    code = (
        "from importlib.metadata import version as v;"
        "print(', '.join(f'{p} {v(p)}' for p in ('dbt-core', 'dbt-spark', 'pyspark')))"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return out.stdout.strip() or out.stderr.strip()


# --- the generated projects ------------------------------------------------------------------


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = textwrap.dedent(text).lstrip()
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def write_project(name: str, profile: str, models: Dict[str, str]) -> Path:
    project = PROJECTS_DIR / name
    if (project / "models").exists():
        for old in (project / "models").glob("*.sql"):
            if old.stem not in models:
                old.unlink()
    write(
        project / "dbt_project.yml",
        f"""
        # Generated by benchmarks/bench_run_path.py; rewritten on every run.
        name: {name}
        version: "1.0"
        config-version: 2
        profile: {name}
        model-paths: ["models"]
        flags:
          send_anonymous_usage_stats: false
        """,
    )
    write(project / "profiles.yml", profile)
    for model, sql in models.items():
        write(project / "models" / f"{model}.sql", sql)
    return project


def contracts_profile(name: str, threads: int) -> str:
    return f"""
    # Generated by benchmarks/bench_run_path.py. BENCH_WAREHOUSE is set by the script.
    {name}:
      target: bench
      outputs:
        bench:
          type: spark_contracts
          method: session
          schema: bench
          warehouse_dir: "{{{{ env_var('BENCH_WAREHOUSE') }}}}"
          threads: {threads}
    """


def dbt_spark_profile(name: str, threads: int) -> str:
    """Plain dbt-spark, session method, with the Spark settings the adapter's session uses
    (Delta owning spark_catalog, its own warehouse and Derby metastore)."""
    return f"""
    # Generated by benchmarks/bench_run_path.py. BENCH_* are set by the script.
    {name}:
      target: bench
      outputs:
        bench:
          type: spark
          method: session
          host: localhost
          schema: bench
          threads: {threads}
          server_side_parameters:
            spark.jars: "{{{{ env_var('BENCH_SPARK_JARS') }}}}"
            spark.sql.extensions: io.delta.sql.DeltaSparkSessionExtension
            spark.sql.catalog.spark_catalog: org.apache.spark.sql.delta.catalog.DeltaCatalog
            spark.sql.warehouse.dir: "{{{{ env_var('BENCH_WAREHOUSE') }}}}"
            spark.hadoop.javax.jdo.option.ConnectionURL: "jdbc:derby:;databaseName={{{{ env_var('BENCH_WAREHOUSE') }}}}/metastore_db;create=true"
            spark.driver.extraJavaOptions: "-Dderby.system.home={{{{ env_var('BENCH_WAREHOUSE') }}}}"
            spark.sql.shuffle.partitions: "4"
            spark.sql.session.timeZone: UTC
            spark.ui.enabled: "false"
            spark.ui.showConsoleProgress: "false"
            spark.databricks.delta.snapshotPartitions: "2"
    """


# P1: the same query for both adapters; only the config differs.
P1_SQL = """
{{{{ config({config}) }}}}
with src as (
    select
        id,
        concat('name-', cast(id as string)) as name,
        cast(id % 1000 as int) as n,
        cast(id * 1.5 as double) as amount,
        cast({k} as int) as model_no,
        cast({{{{ var('run_no') }}}} as int) as run_no
    from range(0, {{{{ var('hi') }}}})
)
select * from src
{{% if is_incremental() %}}
where id >= {{{{ var('lo') }}}}
{{% endif %}}
"""

P1_CONTRACT = "schema_contract={'columns': 'evolve', 'data_type': 'evolve'}, schema_evolution={}"


def p1_models(contracts: bool) -> Dict[str, str]:
    models = {}
    for strategy in ("merge", "append"):
        for i in range(1, P1_MODELS_PER_STRATEGY + 1):
            parts = ["materialized='incremental'", f"incremental_strategy='{strategy}'"]
            if strategy == "merge":
                parts.append("unique_key='id'")
            parts.append("file_format='delta'")
            if contracts:
                parts.append(P1_CONTRACT)
            k = i if strategy == "merge" else 100 + i
            models[f"{strategy}_{i:02d}"] = P1_SQL.format(config=", ".join(parts), k=k)
    return models


# P3: phase v1 deploys `n bigint`; v2 outputs `n` as a string (A) or casts it (B).
P3_SQL = """
{{{{ config(materialized='incremental', incremental_strategy='append', file_format='delta'{contract}) }}}}
with base as (
    select
        id,
        sha2(concat('key-', cast(id as string), '-', cast(id * 7 as string)), 256) as h,
        id % 1000 as grp,
        case when id % {bad_every} = 7 then concat('n/a-', cast(id as string))
             else cast(id % 100000 as string) end as n_str
    from range(0, {{{{ var('rows') }}}})
),
agg as (
    select grp, count(*) as cnt, max(h) as max_h
    from base
    group by grp
)
select
    b.id,
    b.h,
    a.cnt,
    a.max_h,
    {{% if var('phase') == 'v1' %}}cast(b.id % 100000 as bigint){{% else %}}{n_v2}{{% endif %}} as n
from base b
join agg a on b.grp = a.grp
"""

P3_VARIANTS = {
    # model: (schema_contract config or '', how v2 outputs n)
    "p3_plain": ("", "cast(b.n_str as bigint)"),
    "p3_discard_row": (", schema_contract={'data_type': 'discard_row'}", "b.n_str"),
    "p3_quarantine": (
        ", schema_contract={'data_type': 'discard_row', 'quarantine': true}",
        "b.n_str",
    ),
}


def p3_models() -> Dict[str, str]:
    return {
        name: P3_SQL.format(contract=contract, n_v2=n_v2, bad_every=P3_BAD_EVERY)
        for name, (contract, n_v2) in P3_VARIANTS.items()
    }


# P5: var `change` in none / add / widen; `lo`/`hi` select the batch.
P5_SQL = """
{{ config(materialized='incremental', incremental_strategy='append', file_format='delta', schema_evolution={}) }}
select
    id,
    concat('note-', cast(id as string)) as note,
    {% if var('change') == 'widen' %}cast(id % 100000 as bigint){% else %}cast(id % 100000 as int){% endif %} as n
    {%- if var('change') == 'add' %},
    concat('extra-', cast(id as string)) as extra
    {%- endif %}
from range({{ var('lo') }}, {{ var('hi') }})
"""


def p5_models() -> Dict[str, str]:
    return {"p5_small": P5_SQL, "p5_large": P5_SQL}


# --- running dbt -----------------------------------------------------------------------------


@dataclass
class RunResult:
    wall: float
    elapsed: float  # run_results.json elapsed_time
    models: Dict[str, float]  # model name -> execution_time
    responses: Dict[str, Dict[str, Any]]

    @property
    def model_sum(self) -> float:
        return sum(self.models.values())


class DbtRunFailed(RuntimeError):
    pass


@dataclass
class Target:
    """One project run by one dbt executable against one warehouse folder."""

    label: str
    dbt: Path
    project: Path
    warehouse: Path
    jars: List[Path]
    logs: Path
    snapshot: Optional[Path] = None
    runs: int = 0

    def env(self) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        if self.dbt.parent == Path(sys.executable).parent and "PYTHONPATH" in os.environ:
            # this adapter from another checkout (a worktree measured while the tree changes)
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        env["PATH"] = f"{self.dbt.parent}{os.pathsep}{env.get('PATH', '')}"
        env["BENCH_WAREHOUSE"] = str(self.warehouse)
        env["BENCH_SPARK_JARS"] = ",".join(str(j) for j in self.jars)
        env["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
        env["DO_NOT_TRACK"] = "1"
        return env

    def run(self, select: List[str], variables: Dict[str, Any]) -> RunResult:
        self.runs += 1
        log = self.logs / f"{self.label}_{self.runs:02d}.log"
        results = self.project / "target" / "run_results.json"
        results.unlink(missing_ok=True)
        command = [str(self.dbt), "run", "--profiles-dir", ".", "--vars", json.dumps(variables)]
        if select:
            command += ["--select", *select]
        start = time.perf_counter()
        with log.open("w", encoding="utf-8") as out:
            proc = subprocess.run(
                command,
                cwd=self.project,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=PROCESS_TIMEOUT_S,
            )
        wall = time.perf_counter() - start
        if not results.exists():
            raise DbtRunFailed(
                f"{self.label}: no run_results.json (exit {proc.returncode})\n" + tail(log)
            )
        data = json.loads(results.read_text(encoding="utf-8"))
        failed = [r for r in data["results"] if r["status"] != "success"]
        if proc.returncode != 0 or failed:
            messages = "\n".join(
                f"  {r['unique_id']}: {r['status']}: {r['message']}" for r in failed
            )
            raise DbtRunFailed(
                f"{self.label}: `{' '.join(command[1:])}` exited {proc.returncode}\n{messages}\n"
                f"log: {log}\n{tail(log)}"
            )
        return RunResult(
            wall=wall,
            elapsed=float(data.get("elapsed_time") or 0.0),
            models={
                r["unique_id"].rsplit(".", 1)[-1]: float(r["execution_time"])
                for r in data["results"]
            },
            responses={
                r["unique_id"].rsplit(".", 1)[-1]: r.get("adapter_response") or {}
                for r in data["results"]
            },
        )

    def take_snapshot(self) -> None:
        self.snapshot = self.warehouse.with_name(self.warehouse.name + "_deployed")
        shutil.rmtree(self.snapshot, ignore_errors=True)
        shutil.copytree(self.warehouse, self.snapshot, symlinks=True)

    def put_back(self) -> None:
        """The deployed tables as the setup run left them (files and metastore), untimed."""
        assert self.snapshot is not None
        shutil.rmtree(self.warehouse)
        shutil.copytree(self.snapshot, self.warehouse, symlinks=True)


def tail(log: Path, lines: int = 40) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


OTHER_JVMS_SEEN: List[int] = []  # Spark JVMs found running as each measured process started


def measured(target: Target, select: List[str], variables: Dict[str, Any]) -> RunResult:
    """Put the deployed tables back, then one timed `dbt run` process."""
    target.put_back()
    OTHER_JVMS_SEEN.append(settle())
    return target.run(select, variables)


def settle(limit_s: float = SETTLE_S) -> int:
    """Wait (bounded) for the JVM of the previous `dbt run` to exit; the Spark JVMs still up."""
    start = time.perf_counter()
    while (count := other_jvms()) and time.perf_counter() - start < limit_s:
        time.sleep(0.5)
    return count


def wait_for_quiet(limit_s: float = QUIET_WAIT_S) -> None:
    """Give other Spark JVMs on the machine (not ours: none runs now) a bounded time to end."""
    start = time.perf_counter()
    while other_jvms() and time.perf_counter() - start < limit_s:
        time.sleep(5)
    others = other_jvms()
    waited = time.perf_counter() - start
    print(
        f"measuring now: {others} other Spark JVM(s) running, load average {load_average()}"
        + (f" (waited {waited:.0f} s)" if waited >= 5 else ""),
        flush=True,
    )


# --- results ---------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    a: List[float]
    b: List[float]
    target: Optional[float]
    note: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def a_median(self) -> float:
        return statistics.median(self.a)

    @property
    def b_median(self) -> float:
        return statistics.median(self.b)

    @property
    def ratio(self) -> float:
        return self.a_median / self.b_median

    def verdict(self) -> str:
        if self.target is None:
            return "info"
        return "PASS" if self.ratio <= self.target else "MISSED"

    def to_dict(self, date: str, host: str) -> Dict[str, Any]:
        return {
            "name": self.name,
            "a_s": round(self.a_median, 3),
            "b_s": round(self.b_median, 3),
            "ratio": round(self.ratio, 3),
            "target": self.target,
            "verdict": self.verdict(),
            "a_runs_s": [round(x, 3) for x in self.a],
            "b_runs_s": [round(x, 3) for x in self.b],
            "note": self.note,
            "date": date,
            "machine": host,
            **self.extra,
        }


# --- the scenarios ---------------------------------------------------------------------------
#
# Each scenario has a setup (the first runs that deploy its tables, then the warehouse copy) and
# a measurement. The setups are untimed and run side by side; the measurements run one process
# at a time, after every setup has finished.


def contracts_dbt() -> Path:
    return Path(sys.executable).with_name("dbt")


class P1:
    """The second run of 20 incremental models: this adapter (A) / plain dbt-spark (B)."""

    first = {"lo": 0, "hi": P1_FIRST_ROWS, "run_no": 1}
    second = {
        "lo": P1_FIRST_ROWS - P1_BATCH // 2,
        "hi": P1_FIRST_ROWS + P1_BATCH // 2,
        "run_no": 2,
    }

    def __init__(self, work: Path, jars: List[Path]) -> None:
        dbt_spark = ensure_dbt_spark_venv()
        self.versions = (package_versions(contracts_dbt()), package_versions(dbt_spark))
        project_a = write_project(
            "p1_spark_contracts", contracts_profile("p1_spark_contracts", 4), p1_models(True)
        )
        project_b = write_project(
            "p1_dbt_spark", dbt_spark_profile("p1_dbt_spark", 4), p1_models(False)
        )
        self.a = Target(
            "p1_A_contracts", contracts_dbt(), project_a, work / "p1_a" / "wh", jars, work / "logs"
        )
        self.b = Target(
            "p1_B_dbt_spark", dbt_spark, project_b, work / "p1_b" / "wh", jars, work / "logs"
        )

    def setups(self) -> List[Callable[[], str]]:
        def setup(target: Target) -> str:
            target.warehouse.mkdir(parents=True)
            result = target.run([], self.first)
            target.take_snapshot()
            return (
                f"{target.label}: first run, {len(result.models)} models of "
                f"{P1_FIRST_ROWS:,} rows, wall {result.wall:.1f} s"
            )

        return [lambda: setup(self.a), lambda: setup(self.b)]

    def measure(self, pairs: int) -> List[Row]:
        print(
            f"P1: second `dbt run` of {2 * P1_MODELS_PER_STRATEGY} incremental Delta models, "
            "threads 4: this adapter (A) / plain dbt-spark (B)",
            flush=True,
        )
        print(f"  A: {self.versions[0]} + dbt-spark-contracts (type spark_contracts)")
        print(f"  B: {self.versions[1]} (type spark, its own venv)")
        runs_a: List[RunResult] = []
        runs_b: List[RunResult] = []
        for i in range(pairs):
            runs_a.append(measured(self.a, [], self.second))
            runs_b.append(measured(self.b, [], self.second))
            print(
                f"  P1 pair {i + 1}/{pairs}: models A {runs_a[-1].model_sum:.1f} s, "
                f"B {runs_b[-1].model_sum:.1f} s; wall A {runs_a[-1].wall:.1f} s, "
                f"B {runs_b[-1].wall:.1f} s (load {load_average()})",
                flush=True,
            )
        changed = sorted(
            {m for r in runs_a for m, resp in r.responses.items() if resp.get("schema_changes")}
        )
        check(not changed, f"P1 A: no schema change on the second run (changed: {changed})")
        note = (
            f"{P1_MODELS_PER_STRATEGY} merge (unique_key; {P1_BATCH // 2:,} updates + "
            f"{P1_BATCH // 2:,} inserts each) + {P1_MODELS_PER_STRATEGY} append "
            f"({P1_BATCH:,} rows each) into tables of {P1_FIRST_ROWS:,} rows"
        )
        extra = {"adapter_response_merge_01": runs_a[-1].responses.get("merge_01", {})}
        return [
            Row(
                "P1 models (sum exec)",
                [r.model_sum for r in runs_a],
                [r.model_sum for r in runs_b],
                P1_TARGET,
                note,
                extra,
            ),
            Row(
                "P1 run elapsed",
                [r.elapsed for r in runs_a],
                [r.elapsed for r in runs_b],
                None,
                "run_results.json elapsed_time (4 threads)",
            ),
            Row(
                "P1 process wall",
                [r.wall for r in runs_a],
                [r.wall for r in runs_b],
                None,
                "whole `dbt run` process",
            ),
        ]


class P3:
    """An uncached 5M-row model under data_type discard_row (A), with quarantine (A') / the
    same query without a contract (B)."""

    order = ("p3_discard_row", "p3_plain", "p3_quarantine")  # A, B, A', A, B, A', ...

    def __init__(self, work: Path, jars: List[Path], rows: int) -> None:
        self.rows = rows
        project = write_project(
            "p3_uncached_load", contracts_profile("p3_uncached_load", 1), p3_models()
        )
        self.target = Target(
            "p3", contracts_dbt(), project, work / "p3" / "wh", jars, work / "logs"
        )

    def setups(self) -> List[Callable[[], str]]:
        def setup() -> str:
            self.target.warehouse.mkdir(parents=True)
            result = self.target.run([], {"phase": "v1", "rows": P3_DEPLOYED_ROWS})
            # the quarantining model has quarantined before (its quarantine table exists): the
            # measured runs are a model's later runs, not the one that creates that table
            first = self.target.run(["p3_quarantine"], {"phase": "v2", "rows": P3_DEPLOYED_ROWS})
            self.target.take_snapshot()
            return (
                f"p3: first run, {len(result.models)} tables with n bigint, "
                f"{P3_DEPLOYED_ROWS:,} rows, wall {result.wall:.1f} s; p3_quarantine's first "
                f"quarantining run ({P3_DEPLOYED_ROWS:,} rows), which creates its quarantine "
                f"table: model {first.models['p3_quarantine']:.1f} s"
            )

        return [setup]

    def measure(self, pairs: int) -> List[Row]:
        print(
            f"P3: incremental append of an uncached {self.rows:,}-row model (n string into a "
            "bigint column): data_type discard_row (A), + quarantine (A') / no contract (B)",
            flush=True,
        )
        v2 = {"phase": "v2", "rows": self.rows}
        runs: Dict[str, List[RunResult]] = {name: [] for name in self.order}
        for i in range(pairs):
            for name in self.order:
                runs[name].append(measured(self.target, [name], v2))
            models = ", ".join(f"{n[3:]} {runs[n][-1].models[n]:.1f} s" for n in self.order)
            walls = ", ".join(f"{runs[n][-1].wall:.1f}" for n in self.order)
            print(
                f"  P3 round {i + 1}/{pairs}: models {models}; walls {walls} s "
                f"(load {load_average()})",
                flush=True,
            )
        plain, discard, quarantine = (
            runs["p3_plain"],
            runs["p3_discard_row"],
            runs["p3_quarantine"],
        )
        expected = len(range(7, self.rows, P3_BAD_EVERY))
        for name in ("p3_discard_row", "p3_quarantine"):
            got = [r.responses.get(name, {}).get("rows_discarded") for r in runs[name]]
            check(
                all(g == expected for g in got),
                f"{name}: rows_discarded {got} (expected {expected} each run)",
            )

        def model(rs: List[RunResult], name: str) -> List[float]:
            return [r.models[name] for r in rs]

        def response(name: str) -> Dict[str, Any]:
            got = runs[name][-1].responses.get(name, {})
            keys = ("rows_discarded", "values_discarded", "write_path", "contract")
            return {k: got.get(k) for k in keys}

        note = (
            f"{self.rows:,} rows: sha2 over a string, an aggregate joined back; deployed n "
            f"bigint, model n string with {expected} non-numeric values; B casts n in the model"
        )
        return [
            Row(
                "P3 discard_row model",
                model(discard, "p3_discard_row"),
                model(plain, "p3_plain"),
                P3_TARGET,
                note,
                {"response": response("p3_discard_row")},
            ),
            Row(
                "P3 discard_row wall",
                [r.wall for r in discard],
                [r.wall for r in plain],
                None,
                "whole `dbt run` process",
            ),
            Row(
                "P3 +quarantine model",
                model(quarantine, "p3_quarantine"),
                model(plain, "p3_plain"),
                P3_TARGET,
                note + "; quarantine: true",
                {"response": response("p3_quarantine")},
            ),
            Row(
                "P3 +quarantine wall",
                [r.wall for r in quarantine],
                [r.wall for r in plain],
                None,
                "whole `dbt run` process",
            ),
        ]


class P5:
    """Delta schema_evolution: add column / widen int->bigint / no change, same batch."""

    wanted = {"none": None, "add": "AddColumns", "widen": "AlterColumnType"}

    def __init__(self, work: Path, jars: List[Path], large_rows: int) -> None:
        self.sizes = {"p5_small": P5_SMALL_ROWS, "p5_large": large_rows}
        project = write_project("p5_evolution", contracts_profile("p5_evolution", 1), p5_models())
        self.target = Target(
            "p5", contracts_dbt(), project, work / "p5" / "wh", jars, work / "logs"
        )
        self.order = (
            ("p5_small", "add"),
            ("p5_small", "none"),
            ("p5_small", "widen"),
            ("p5_large", "add"),
        )

    def setups(self) -> List[Callable[[], str]]:
        def setup() -> str:
            self.target.warehouse.mkdir(parents=True)
            walls = []
            for model, size in self.sizes.items():
                result = self.target.run([model], {"change": "none", "lo": 0, "hi": size})
                walls.append(f"{model} {size:,} rows {result.wall:.1f} s")
            self.target.take_snapshot()
            return "p5: first runs, " + ", ".join(walls)

        return [setup]

    def batch(self, model: str, change: str) -> RunResult:
        size = self.sizes[model]
        return measured(self.target, [model], {"change": change, "lo": size, "hi": size + P5_BATCH})

    def measure(self, pairs: int) -> List[Row]:
        large = self.sizes["p5_large"]
        print(
            f"P5: Delta, schema_evolution {{}}, append of {P5_BATCH:,} rows into a "
            f"{P5_SMALL_ROWS:,}-row table: add column (A1), widen int->bigint (A2) / no change "
            f"(B); add column also into a {large:,}-row table",
            flush=True,
        )
        runs: Dict[Tuple[str, str], List[RunResult]] = {key: [] for key in self.order}
        for i in range(pairs):
            for key in self.order:
                if key[0] == "p5_large" and i >= P5_LARGE_RUNS:
                    continue  # information only: fewer runs, to keep the script short
                runs[key].append(self.batch(*key))
            models = ", ".join(
                f"{m[3:]} {c} {runs[(m, c)][-1].models[m]:.2f} s"
                for m, c in self.order
                if len(runs[(m, c)]) == i + 1
            )
            print(
                f"  P5 round {i + 1}/{pairs}: models {models} (load {load_average()})", flush=True
            )
        for (name, change), rs in runs.items():
            ops = [
                [c.get("op") for c in r.responses.get(name, {}).get("schema_changes") or []]
                for r in rs
            ]
            want = [[self.wanted[change]] if self.wanted[change] else [] for _ in rs]
            check(ops == want, f"{name} change={change}: schema_changes {ops}")

        def model(key: Tuple[str, str]) -> List[float]:
            return [r.models[key[0]] for r in runs[key]]

        def wall(key: Tuple[str, str]) -> List[float]:
            return [r.wall for r in runs[key]]

        def response(key: Tuple[str, str]) -> Dict[str, Any]:
            got = runs[key][-1].responses.get(key[0], {})
            return {k: got.get(k) for k in ("schema_changes", "write_path")}

        small_add, small_none = ("p5_small", "add"), ("p5_small", "none")
        small_widen, large_add = ("p5_small", "widen"), ("p5_large", "add")
        note = f"{P5_SMALL_ROWS:,}-row table, {P5_BATCH:,}-row batch"
        return [
            Row(
                "P5 add column model",
                model(small_add),
                model(small_none),
                P5_TARGET,
                note,
                {"response": response(small_add)},
            ),
            Row(
                "P5 widen int model",
                model(small_widen),
                model(small_none),
                P5_TARGET,
                note,
                {"response": response(small_widen)},
            ),
            Row("P5 add column wall", wall(small_add), wall(small_none), None, "whole process"),
            Row("P5 widen int wall", wall(small_widen), wall(small_none), None, "whole process"),
            Row(
                f"P5 add col {short(large)}/{short(P5_SMALL_ROWS)}",
                model(large_add),
                model(small_add)[: len(runs[large_add])],
                None,
                f"add-column run, {large:,}-row table / {P5_SMALL_ROWS:,}-row table, "
                f"{P5_BATCH:,}-row batch, {len(runs[large_add])} run(s) each, same rounds "
                f"(aim <= {P5_SIZE_TARGET})",
                {"response": response(large_add)},
            ),
        ]


CHECKS: List[str] = []


def check(ok: bool, message: str) -> None:
    """A sanity check on what the runs did (printed with the table; never fails the script)."""
    line = f"{'ok' if ok else 'UNEXPECTED'}: {message}"
    CHECKS.append(line)
    if not ok:
        print(f"  {line}", flush=True)


def short(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"


# --- main ------------------------------------------------------------------------------------


def print_table(rows: List[Row], date: str, host: str) -> None:
    print()
    header = f"{'name':24} {'A s':>8} {'B s':>8} {'ratio':>6} {'target':>7} {'':6}"
    print(header + f"  date {date}, machine: {host}")
    for row in rows:
        target = f"<={row.target}" if row.target is not None else "-"
        print(
            f"{row.name:24} {row.a_median:8.2f} {row.b_median:8.2f} {row.ratio:6.2f} "
            f"{target:>7} {row.verdict():6}"
        )
    print(f"(medians of {len(rows[0].a) if rows else 0} interleaved runs each; A / B)")
    for line in CHECKS:
        print(f"check {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="p1,p3,p5", help="comma list of p1, p3, p5")
    parser.add_argument("--pairs", type=int, default=PAIRS)
    parser.add_argument("--p3-rows", type=int, default=P3_ROWS)
    parser.add_argument("--p5-large-rows", type=int, default=P5_LARGE_ROWS)
    parser.add_argument("--keep", action="store_true", help="keep the warehouses and logs")
    args = parser.parse_args()
    only = {part.strip().lower() for part in args.only.split(",")}

    started = time.perf_counter()
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    host = machine()
    jars = jar_paths()
    print(
        f"bench_run_path: {date}; {host}; load average {load_average()}; "
        f"{other_jvms()} other Spark JVM(s) running",
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix="bench_run_path_"))
    (work / "logs").mkdir()
    rows: List[Row] = []
    try:
        scenarios: List[Any] = []
        if "p1" in only:
            scenarios.append(P1(work, jars))
        if "p3" in only:
            scenarios.append(P3(work, jars, args.p3_rows))
        if "p5" in only:
            scenarios.append(P5(work, jars, args.p5_large_rows))
        setups = [setup for scenario in scenarios for setup in scenario.setups()]
        print(f"setup: {len(setups)} first-run job(s) side by side (untimed) ...", flush=True)
        setup_start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(setups)) as pool:
            for message in pool.map(lambda setup: setup(), setups):
                print(f"  {message}", flush=True)
        print(f"setup done in {time.perf_counter() - setup_start:.0f} s", flush=True)
        wait_for_quiet()
        for scenario in scenarios:
            rows += scenario.measure(args.pairs)
    except DbtRunFailed as exc:
        print(f"\nFAILED: {exc}", flush=True)
        print(f"(logs and warehouses kept in {work})")
        sys.exit(1)
    runtime = time.perf_counter() - started
    print_table(rows, date, host)
    print(
        f"script runtime {runtime / 60:.1f} min; other Spark JVMs running as each measured "
        f"process started: max {max(OTHER_JVMS_SEEN, default=0)} "
        f"({sum(1 for n in OTHER_JVMS_SEEN if n)} of {len(OTHER_JVMS_SEEN)} processes); "
        f"load average now {load_average()}"
    )

    RESULTS_FILE.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "date": date,
        "machine": host,
        "runtime_s": round(runtime, 1),
        "pairs": args.pairs,
        "sizes": {
            "p1_first_rows": P1_FIRST_ROWS,
            "p1_batch": P1_BATCH,
            "p3_rows": args.p3_rows,
            "p5_small_rows": P5_SMALL_ROWS,
            "p5_large_rows": args.p5_large_rows,
            "p5_batch": P5_BATCH,
        },
        "rows": [row.to_dict(date, host) for row in rows],
        "checks": CHECKS,
        "other_spark_jvms_at_each_measured_start": OTHER_JVMS_SEEN,
    }
    RESULTS_FILE.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"written {RESULTS_FILE.relative_to(REPO)}")
    if args.keep:
        print(f"warehouses and logs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
