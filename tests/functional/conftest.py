"""Functional tests run dbt for real against a real Spark: `--profile session` (default, the
embedded SparkSession), `thrift` or `connect` (local servers started from the pyspark wheel)."""

from __future__ import annotations

import os

import pytest

from tests.functional.servers import start_local_server

pytest_plugins = ["dbt.tests.fixtures.project"]


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
        reason=f"runs under another --profile than {profile} (make servers runs thrift and connect)"
    )
    for item in items:
        marker = item.get_closest_marker("profile")
        if marker is not None and profile not in marker.args:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def warehouse_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
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
    server = start_local_server(profile, warehouse_dir)
    request.addfinalizer(server.stop)
    if profile == "thrift":
        return {
            "type": "spark_contracts",
            "method": "thrift",
            "host": "localhost",
            "port": server.port,
            "user": "dbt",
            "threads": 4,
        }
    return {
        "type": "spark_contracts",
        "method": "connect",
        "host": f"sc://localhost:{server.port}",
        "threads": 4,
    }
