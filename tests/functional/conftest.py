"""Functional tests run dbt for real against a real Spark: `--profile session` (default, the
embedded SparkSession), `thrift` or `connect` (local servers started from the pyspark wheel, or
the servers of a running cluster when $DBT_SPARK_CONTRACTS_CLUSTER names its cluster.json).
`--iceberg-catalog rest` (or $DBT_SPARK_CONTRACTS_ICEBERG_CATALOG=rest) points the Iceberg
catalog at a REST catalog server of each test process's own (spark_contracts_dev.rest_catalog)
instead of the Hadoop catalog under the warehouse."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import pytest

from dbt.adapters.spark_contracts.connection import session as embedded
from dbt.adapters.spark_contracts.connection.credentials import SparkContractsCredentials
from spark_contracts_dev import rest_catalog as rest
from spark_contracts_dev.cluster import Cluster
from tests.functional.probes import Count, evaluation_probes
from tests.functional.servers import start_local_server

pytest_plugins = ["dbt.tests.fixtures.project"]

CLUSTER_ENV_VAR = "DBT_SPARK_CONTRACTS_CLUSTER"  # set by `make cluster-test` / `make cluster-ci`
ICEBERG_CATALOG_ENV_VAR = "DBT_SPARK_CONTRACTS_ICEBERG_CATALOG"  # `make rest-catalog-test`: rest
# The embedded session's JVM in the tests (each xdist worker's, and each `dbt` process a test
# starts): C1-only JIT and the serial collector. Measured on 2 cores, the C2 compiler and G1's
# threads took about 40% of a test JVM's CPU: every query's generated code is new code to
# compile, and a test runs a few queries of each. C1-only alone shrinks the code cache to 48 MB,
# which a 20-minute test JVM fills: its sweeper then took a third of the JVM's CPU, hence the
# tiered default of 240 MB. Spark's semantics do not change; the benchmarks keep the JVM
# defaults. $DBT_SPARK_CONTRACTS_TEST_JAVA_OPTIONS replaces them ("" for none).
TEST_JAVA_OPTIONS = os.environ.get(
    "DBT_SPARK_CONTRACTS_TEST_JAVA_OPTIONS",
    "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC",
)
# A session profile's server_side_parameters carrying them (the driver JVM's options before
# Spark's own extraJavaOptions: the adapter's Derby home and log4j configuration still apply).
JVM_PARAMETERS = {"spark.driver.defaultJavaOptions": TEST_JAVA_OPTIONS}


def running_cluster() -> Optional[Cluster]:
    """The cluster $DBT_SPARK_CONTRACTS_CLUSTER names (its cluster.json), if set."""
    path = os.environ.get(CLUSTER_ENV_VAR)
    if not path:
        return None
    if not Path(path).is_file():
        raise pytest.UsageError(f"${CLUSTER_ENV_VAR}={path}: no such cluster.json (make cluster)")
    return Cluster.from_json(Path(path).read_text())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--profile",
        action="store",
        default=os.environ.get("DBT_SPARK_CONTRACTS_PROFILE", "session"),
        choices=("session", "thrift", "connect"),
        help="which connection method the functional tests use",
    )
    parser.addoption(
        "--iceberg-catalog",
        action="store",
        default=os.environ.get(ICEBERG_CATALOG_ENV_VAR, "hadoop"),
        choices=("hadoop", "rest"),
        help="the Iceberg catalog: the Hadoop catalog under the warehouse (default), or a local "
        "REST catalog server per test process (session, and the local thrift / connect servers)",
    )


def iceberg_rest(config: pytest.Config) -> bool:
    """Whether the Iceberg catalog under test is the REST catalog (`--iceberg-catalog rest`)."""
    return bool(config.getoption("--iceberg-catalog") == "rest")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "profile(name): run only under this --profile")


# The scopes (a class, or a module of test functions) that took longest in CI, in seconds of
# test time (2026-11-30, session profile, functional-ci on b0afeba plus the evolution matrix's
# split, whose Parquet share and unused reads left; PendingSettled since lost a 41 s test),
# scheduled first: xdist hands a worker the next scope as it finishes one, so a long scope
# started last becomes the run's tail. The Makefile passes `--no-loadscope-reorder` to keep this
# order (xdist's own puts the scopes with most tests first).
LONGEST_FIRST = (
    # seconds in CI on 81190eb, each test a class of its own (loadscope: its own scope)
    "tests/functional/evolution/test_kill.py::TestLateDropColumns",  # 237
    "tests/functional/evolution/test_kill.py::TestLateRepairerRestore",  # 236
    "tests/functional/evolution/test_kill.py::TestRetryAtOnce",  # 137
    "tests/functional/evolution/test_kill.py::TestLateIcebergDropColumns",  # 120 (alone)
    "tests/functional/evolution/test_kill.py::TestDryRunOverADeadRun",  # 108
    "tests/functional/contracts/test_data_tests_gates.py::TestDataTestsGateTheLoad",  # 398
    "tests/functional/contracts/test_contract_matrix.py::TestContractMatrix",  # 302
    "tests/functional/evolution/test_evolution_matrix.py::TestEvolutionMatrix",  # 298
    "tests/functional/evolution/test_atomicity.py::TestAtomicity",  # 132
    "tests/functional/contracts/test_pydantic_create_run.py::TestCreatingRunCountsAndQuarantines",
    "tests/functional/evolution/test_pending_settled.py::TestPendingSettled",  # 149
    "tests/functional/contracts/test_quarantine_first_pass.py::TestFirstPassEveryMethod",  # 90
    "tests/functional/evolution/test_change_policy.py::TestChangePolicy",  # 85
    "tests/functional/contracts/test_quarantine_first_pass.py::TestFirstPassEvaluations",  # 81
    "tests/functional/evolution/test_one_evaluation.py::TestOneEvaluationEveryShape",  # 79
    "tests/functional/evolution/test_kill.py::TestKillMidRunDelta",  # functional-extra
    "tests/functional/test_connection_resilience.py",
    "tests/functional/test_embedded_spark.py",
)


def _longest_first(item: pytest.Item) -> int:
    for rank, scope in enumerate(LONGEST_FIRST):
        if item.nodeid == scope or item.nodeid.startswith(scope + "::"):
            return rank
    return len(LONGEST_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    profile = config.getoption("--profile")
    if profile == "session":  # functional-ci's order; the cluster passes keep collection order
        items.sort(key=_longest_first)  # stable: each scope's tests stay in order, together
    skip = pytest.mark.skip(
        reason=f"runs under another --profile than {profile} (make cluster-ci / cluster-test run thrift and connect)"
    )
    for item in items:
        marker = item.get_closest_marker("profile")
        if marker is not None and profile not in marker.args:
            item.add_marker(skip)


def _cluster_for(config: pytest.Config) -> Optional[Cluster]:
    """The running cluster, for the profiles that go through a server."""
    return running_cluster() if config.getoption("--profile") != "session" else None


@pytest.fixture(scope="session")
def warehouse_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    cluster = _cluster_for(request.config)
    if cluster is not None:  # the servers write there; tests read table files from it
        return cluster.warehouse_dir
    return str(tmp_path_factory.mktemp("warehouse"))


@pytest.fixture(scope="session")
def rest_catalog(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Optional[rest.RestCatalog]:
    """This test process's REST catalog server under `--iceberg-catalog rest` (one per xdist
    worker, stopped when it ends), else None."""
    if not iceberg_rest(request.config):
        return None
    server = rest.start(tmp_path_factory.mktemp("rest_catalog"))
    request.addfinalizer(server.stop)
    return server


@pytest.fixture(scope="session")
def iceberg_parameters(rest_catalog: Optional[rest.RestCatalog]) -> dict:
    """The Spark settings of the Iceberg catalog under test ({} for the Hadoop default)."""
    return rest_catalog.spark_conf() if rest_catalog is not None else {}


@pytest.fixture(scope="session")
def dbt_profile_target(
    request: pytest.FixtureRequest, warehouse_dir: str, iceberg_parameters: dict
) -> dict:
    profile = request.config.getoption("--profile")
    if profile == "session":
        return {
            "type": "spark_contracts",
            "method": "session",
            "warehouse_dir": warehouse_dir,
            "threads": 4,
            "server_side_parameters": {**JVM_PARAMETERS, **iceberg_parameters},
        }
    cluster = _cluster_for(request.config)
    if cluster is not None and iceberg_parameters:
        raise pytest.UsageError(
            "--iceberg-catalog rest configures the local thrift / connect servers; a running "
            f"cluster (${CLUSTER_ENV_VAR}) keeps the catalog it was started with"
        )
    if cluster is not None:
        port = cluster.thrift_port if profile == "thrift" else cluster.connect_port
        if port is None:
            raise pytest.UsageError(f"the cluster in {cluster.dir} runs no {profile} server")
        host = "127.0.0.1"
    else:
        server = start_local_server(profile, warehouse_dir, conf=iceberg_parameters)
        request.addfinalizer(server.stop)
        port, host = server.port, "localhost"
    if profile == "thrift":
        return {
            "type": "spark_contracts",
            "method": "thrift",
            "host": host,
            "port": port,
            "user": "dbt",
            "threads": 4,
        }
    return {
        "type": "spark_contracts",
        "method": "connect",
        "host": f"sc://{host}:{port}",
        "threads": 4,
    }


@pytest.fixture
def evaluations() -> Any:
    """`probe_eval(x)` in every dbt thread's session while the test runs; calls `evaluations()`
    to read how many times Spark evaluated it (session profile: this process's SparkContext)."""
    count: Count
    with evaluation_probes() as count:
        yield count


@pytest.fixture(scope="session")
def worker_spark(request: pytest.FixtureRequest, dbt_profile_target: dict) -> Any:
    """This test process's embedded Spark, the one the session profile's adapter uses (started
    here if no test has yet): reads by path what a `dbt` subprocess wrote, where another `dbt`
    process would start a JVM of its own."""
    if request.config.getoption("--profile") != "session":
        raise pytest.UsageError("worker_spark: the session profile's Spark only")
    fields = {k: v for k, v in dbt_profile_target.items() if k not in ("type", "threads")}
    fields.setdefault("schema", "worker_spark")  # required by the credentials, unused here
    credentials = SparkContractsCredentials.from_dict(
        SparkContractsCredentials.translate_aliases(fields)
    )
    return embedded.get_session(credentials.embedded_config())
