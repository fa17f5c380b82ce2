"""The quarantine holds a bad day: an incremental model whose run outputs 1.5 M rows, 1.2 M of
which do not cast `n` into the deployed bigint (`'bad_' || id`) and carry a 200-character
padding column, so the discarded rows weigh about 300 MB, far over the driver's
`spark.driver.maxResultSize` of 64 MB. The run must succeed, load exactly the good rows, put
exactly the discarded ones (each once, with a reason and the run's id) into
`<model>__quarantine`, and report their number in `rows_discarded` (delta, iceberg, parquet).

Each `dbt run` is a real process (tests/functional/evolution/test_concurrent_runs.py's
`DbtProject`): on the session profile its embedded Spark is its own JVM, started with
`spark.driver.maxResultSize=64m` (the profile's `server_side_parameters`, with the suite's JVM
options), in a warehouse of this module's own, read back by path by the test process's Spark. A
run that brings its JVM down fails alone, not the test process's Spark nor the other formats'
runs. Over thrift / connect this module starts a local server of its own with the same setting;
the servers of a running cluster ($DBT_SPARK_CONTRACTS_CLUSTER) are started by `make cluster`
with Spark's default (1g), which this module cannot change: there the limit is not under test,
only the outcome."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_contracts_dev.servers import start
from tests.functional.conftest import JVM_PARAMETERS, running_cluster
from tests.functional.evolution.test_concurrent_runs import DbtProject, Invocation, Target

FORMATS = ("delta", "iceberg", "parquet")
MAX_RESULT_SIZE = "64m"
LIMIT = {"spark.driver.maxResultSize": MAX_RESULT_SIZE}
CONTRACT = "{'columns': 'evolve', 'data_type': 'discard_row', 'quarantine': true}"
PAD = 200  # characters of padding per row: 1.2 M discarded rows are ~250 MB of strings
FIRST = range(3)  # v1: builds the table, `n` bigint
DAY = range(1000, 1000 + 1_500_000)  # v2: every fifth id casts, the others are 'bad_<id>'

MODEL = f"""
{{{{ config(materialized='incremental', incremental_strategy='append',
          file_format='FMT', schema_contract={CONTRACT}) }}}}
{{% if var('v', 1) == 1 %}}
select id, cast(id as bigint) as n, repeat('x', {PAD}) as pad
from range({FIRST.start}, {FIRST.stop})
{{% else %}}
select id,
       if(id % 5 = 0, cast(id as string), concat('bad_', cast(id as string))) as n,
       repeat('x', {PAD}) as pad
from range({DAY.start}, {DAY.stop})
{{% endif %}}
"""


def count_and_sum(ids) -> tuple[int, int]:
    ids = list(ids)
    return len(ids), sum(ids)


GOOD = count_and_sum(list(FIRST) + [i for i in DAY if i % 5 == 0])  # v1's rows, v2's castable
BAD = count_and_sum(i for i in DAY if i % 5 != 0)


@pytest.fixture(scope="module")
def bad_day_target(request, tmp_path_factory) -> Target:
    """The profile's output with the driver's result size limited to 64 MB (see the module)."""
    profile = request.config.getoption("--profile")
    warehouse = tmp_path_factory.mktemp("bad_day_warehouse")
    if profile == "session":
        output = {
            "type": "spark_contracts",
            "method": "session",
            "warehouse_dir": str(warehouse),
            "server_side_parameters": {**JVM_PARAMETERS, **LIMIT},
        }
        return Target(output, warehouse, request.getfixturevalue("worker_spark"))
    if running_cluster() is not None:  # the cluster's servers: started without the limit
        output = request.getfixturevalue("dbt_profile_target")
        return Target(output, Path(request.getfixturevalue("warehouse_dir")))
    server = start(profile, str(warehouse), conf=LIMIT)  # its own warehouse and metastore
    request.addfinalizer(server.stop)
    if profile == "thrift":
        output = {"method": "thrift", "host": "localhost", "port": server.port, "user": "dbt"}
    else:
        output = {"method": "connect", "host": f"sc://localhost:{server.port}"}
    return Target({"type": "spark_contracts", **output}, warehouse)


@pytest.fixture(scope="module")
def bad_day(bad_day_target, tmp_path_factory) -> tuple[DbtProject, dict[str, Invocation]]:
    """The project after v1 (every model) and, per format, its model's v2 run (one process
    each, one after the other: each run alone holds its 300 MB bad day)."""
    models = {f"bad_day_{fmt}": MODEL.replace("FMT", fmt) for fmt in FORMATS}
    root = tmp_path_factory.mktemp("bad_day") / "project"
    project = DbtProject(root, bad_day_target, models, "bad_day")
    first = project.run("run", "--vars", "{v: 1}")
    assert first.returncode == 0, first.output()
    if bad_day_target.reader is None and running_cluster() is None:  # the module's own server
        [(limit,)] = project.query(
            "select '${{spark.driver.maxResultSize}}'"
        )  # {{}}: format's braces
        assert limit == MAX_RESULT_SIZE, limit
    return project, {
        fmt: project.run("run", "-s", f"bad_day_{fmt}", "--vars", "{v: 2}") for fmt in FORMATS
    }


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_bad_day_is_loaded_and_quarantined_exactly(bad_day, fmt):
    project, runs = bad_day
    run, name = runs[fmt], f"bad_day_{fmt}"
    entry = run.result(name)
    assert run.returncode == 0 and entry.get("status") == "success", run.message(name)

    [kept] = project.query(
        "select count(*), sum(id), count_if(n = id), count(distinct id) from {t}", t=name
    )
    assert kept == (GOOD[0], GOOD[1], GOOD[0], GOOD[0]), kept

    [quarantined] = project.query(
        "select count(*), count(distinct id), sum(id),"
        " count_if(n = concat('bad_', cast(id as string))),"
        f" count_if(length(pad) = {PAD}),"
        " count_if(_contract_reason is not null),"
        f" count_if(_dbt_run_id = '{run.invocation_id}')"
        " from {q}",
        q=f"{name}__quarantine",
    )
    count, total = BAD
    assert quarantined == (count, count, total, count, count, count, count), quarantined

    assert entry["adapter_response"].get("rows_discarded") == count, entry["adapter_response"]
