"""The REST Iceberg catalog without a JVM: the embedded session's conf when the profile points
the Iceberg catalog elsewhere, the REST server's jar list and class path, and jars with a
classifier (iceberg-open-api's `test-fixtures`, iceberg-core's `tests`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbt.adapters.spark_contracts import jars
from dbt.adapters.spark_contracts.connection.session import EmbeddedSparkConfig
from dbt.adapters.spark_contracts.jars import MavenJar
from spark_contracts_dev import rest_catalog as rest

REST = {"spark.sql.catalog.iceberg.type": "rest", "spark.sql.catalog.iceberg.uri": "http://h:1"}


def test_a_rest_catalog_replaces_the_hadoop_one(tmp_path: Path) -> None:
    config = EmbeddedSparkConfig(warehouse_dir=tmp_path, server_side_parameters=REST)
    conf = config.spark_conf()
    assert not config.iceberg_catalog_is_hadoop
    assert conf["spark.sql.catalog.iceberg"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.iceberg.type"] == "rest"
    assert conf["spark.sql.catalog.iceberg.uri"] == "http://h:1"
    # no local warehouse sent to the server (a REST server reads `warehouse` as its own)
    assert "spark.sql.catalog.iceberg.warehouse" not in conf


def test_a_rest_catalogs_warehouse_is_the_profiles(tmp_path: Path) -> None:
    params = {**REST, "spark.sql.catalog.iceberg.warehouse": "prod"}
    conf = EmbeddedSparkConfig(warehouse_dir=tmp_path, server_side_parameters=params).spark_conf()
    assert conf["spark.sql.catalog.iceberg.warehouse"] == "prod"


@pytest.mark.parametrize(
    "params,hadoop",
    [
        ({}, True),
        ({"spark.sql.catalog.iceberg.type": "HADOOP"}, True),
        ({"spark.sql.catalog.iceberg.warehouse": "/elsewhere"}, True),
        ({"spark.sql.catalog.iceberg.catalog-impl": "org.example.Catalog"}, False),
        ({"spark.sql.catalog.other.type": "rest"}, True),
    ],
)
def test_which_catalog_is_the_hadoop_one(tmp_path: Path, params: dict, hadoop: bool) -> None:
    config = EmbeddedSparkConfig(warehouse_dir=tmp_path, server_side_parameters=params)
    assert config.iceberg_catalog_is_hadoop is hadoop
    conf = config.spark_conf()
    assert ("spark.sql.catalog.iceberg.warehouse" in conf) is (
        hadoop or "spark.sql.catalog.iceberg.warehouse" in params
    )


def test_a_named_catalog_goes_rest_by_its_own_keys(tmp_path: Path) -> None:
    config = EmbeddedSparkConfig(
        warehouse_dir=tmp_path,
        iceberg_catalog="lake",
        server_side_parameters=rest.catalog_conf("http://h:2", "lake"),
    )
    conf = config.spark_conf()
    assert conf["spark.sql.catalog.lake.type"] == "rest"
    assert conf["spark.sql.catalog.lake.uri"] == "http://h:2"
    assert "spark.sql.catalog.lake.warehouse" not in conf


def test_a_classified_jar_names_its_file_url_and_coordinate() -> None:
    jar = MavenJar("org.apache.iceberg", "iceberg-open-api", "1.11.0", "test-fixtures")
    assert jar.file_name == "iceberg-open-api-1.11.0-test-fixtures.jar"
    assert jar.url == (
        "https://repo1.maven.org/maven2/org/apache/iceberg/iceberg-open-api/1.11.0/"
        "iceberg-open-api-1.11.0-test-fixtures.jar"
    )
    assert jar.coordinate == "org.apache.iceberg:iceberg-open-api:1.11.0:test-fixtures"
    plain = MavenJar("org.apache.iceberg", "iceberg-core", "1.11.0")
    assert plain.file_name == "iceberg-core-1.11.0.jar"
    assert plain.coordinate == "org.apache.iceberg:iceberg-core:1.11.0"


def test_maven_is_asked_for_the_classifier(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    poms = []

    def fake_run(command, check):  # noqa: ANN001 - subprocess.run's shape
        poms.append(Path(command[command.index("-f") + 1]).read_text())

    monkeypatch.setattr(jars.subprocess, "run", fake_run)
    jars._fetch_with_maven(tmp_path, "mvn", rest.REST_SERVER_JARS[:1])
    assert "<artifactId>iceberg-open-api</artifactId>" in poms[0]
    assert "<classifier>test-fixtures</classifier>" in poms[0]


def test_the_rest_server_jars_are_not_the_runtimes() -> None:
    names = {jar.file_name for jar in rest.REST_SERVER_JARS}
    assert "iceberg-open-api-1.11.0-test-fixtures.jar" in names
    assert "iceberg-core-1.11.0-tests.jar" in names and "iceberg-core-1.11.0.jar" in names
    assert len(names) == len(rest.REST_SERVER_JARS)
    assert not names & {jar.file_name for jar in jars.ALL_JARS}
    assert {j.version for j in rest.REST_SERVER_JARS if j.group == "org.apache.iceberg"} == {
        rest.SERVER_ICEBERG_VERSION
    }


def test_an_incomplete_rest_jar_folder_names_the_fetch_command(tmp_path: Path) -> None:
    with pytest.raises(jars.JarsNotFound, match="spark_contracts_dev.rest_catalog fetch"):
        rest.class_path(tmp_path)


def test_the_class_path_adds_pysparks_hadoop_client(tmp_path: Path) -> None:
    for jar in rest.REST_SERVER_JARS:
        (tmp_path / jar.file_name).write_bytes(b"")
    path = rest.class_path(tmp_path)
    assert path[: len(rest.REST_SERVER_JARS)] == [
        tmp_path / jar.file_name for jar in rest.REST_SERVER_JARS
    ]
    assert any(p.name.startswith("hadoop-client-api") for p in path)


def test_the_rest_jars_folder_is_under_the_jar_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(jars.JARS_ENV_VAR, str(tmp_path))
    assert rest.rest_jars_dir() == tmp_path.resolve() / "rest"
    monkeypatch.delenv(jars.JARS_ENV_VAR)
    with pytest.raises(RuntimeError, match="make jars"):
        rest.rest_jars_dir()
