"""Functional tests run dbt for real against a real Spark: `--profile session` (default, the
embedded SparkSession), `thrift` or `connect` (local servers started from the pyspark wheel, or
the servers of a running cluster when $DBT_SPARK_CONTRACTS_CLUSTER names its cluster.json)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import pytest

from dbt.adapters.spark_contracts.cluster import Cluster
from tests.functional.servers import start_local_server

pytest_plugins = ["dbt.tests.fixtures.project"]

CLUSTER_ENV_VAR = "DBT_SPARK_CONTRACTS_CLUSTER"  # set by `make cluster-test` / `make cluster-ci`


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "profile(name): run only under this --profile")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    profile = config.getoption("--profile")
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
def dbt_profile_target(request: pytest.FixtureRequest, warehouse_dir: str) -> dict:
    profile = request.config.getoption("--profile")
    if profile == "session":
        return {
            "type": "spark_contracts",
            "method": "session",
            "warehouse_dir": warehouse_dir,
            "threads": 4,
        }
    cluster = _cluster_for(request.config)
    if cluster is not None:
        port = cluster.thrift_port if profile == "thrift" else cluster.connect_port
        if port is None:
            raise pytest.UsageError(f"the cluster in {cluster.dir} runs no {profile} server")
        host = "127.0.0.1"
    else:
        server = start_local_server(profile, warehouse_dir)
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
