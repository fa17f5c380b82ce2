"""Profile parsing, jar folder resolution and the embedded session's Spark configuration.

No Spark is started here: these test what dbt reads from profiles.yml and what the adapter would
hand to SparkSession.builder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts import jars
from dbt.adapters.spark_contracts.connection import credentials as creds_module
from dbt.adapters.spark_contracts.connection import session as embedded
from dbt.adapters.spark_contracts.connection.credentials import (
    ContractsConnectionMethod,
    SparkContractsCredentials,
)
from dbt.adapters.spark_contracts.connection.session import EmbeddedSparkConfig

JAR_FILES = (
    "delta-spark_2.13-4.3.1.jar",
    "delta-storage-4.3.1.jar",
    "iceberg-spark-runtime-4.1_2.13-1.12.0.jar",
)
CLUSTER_JAR_FILES = ("derbynet-10.16.1.1.jar", "derbyclient-10.16.1.1.jar")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(jars.JARS_ENV_VAR, raising=False)
    creds_module.set_project_root(None)
    yield
    creds_module.set_project_root(None)


def _parse(**profile) -> SparkContractsCredentials:
    """As dbt does with a target of profiles.yml: translate aliases, validate, deserialize."""
    data = SparkContractsCredentials.translate_aliases({"schema": "analytics", **profile})
    SparkContractsCredentials.validate(data)
    return SparkContractsCredentials.from_dict(data)


def _jar_folder(path: Path, names=JAR_FILES) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in names:
        (path / name).write_bytes(b"PK")
    return path


# ---- credentials -------------------------------------------------------------------------


def test_session_is_the_default_and_needs_no_host() -> None:
    creds = _parse()
    assert creds.method == ContractsConnectionMethod.SESSION
    assert creds.type == "spark_contracts"
    assert creds.schema == "analytics"
    assert creds.database is None
    assert creds.host == "localhost"  # filled in for dbt-spark; the session never uses it


def test_explicit_session_method() -> None:
    assert _parse(method="session").method == ContractsConnectionMethod.SESSION


def test_unknown_key_suggests_the_right_one() -> None:
    with pytest.raises(DbtRuntimeError) as info:
        _parse(warehouse_directory="x")
    message = str(info.value)
    assert "Unknown profile key(s) for type spark_contracts" in message
    assert "`warehouse_directory` (did you mean `warehouse_dir`?)" in message
    assert "warehouse_dir" in message.split("Allowed keys:")[1]


def test_unknown_key_without_close_match_lists_allowed_keys() -> None:
    with pytest.raises(DbtRuntimeError) as info:
        _parse(zzzz="1")
    message = str(info.value)
    assert "`zzzz`." in message and "did you mean" not in message
    allowed = message.split("Allowed keys: ")[1].rstrip(".").split(", ")
    for key in ("method", "warehouse_dir", "jars_dir", "iceberg_catalog", "master", "host"):
        assert key in allowed
    assert "type" not in allowed and "threads" not in allowed


def test_dbt_target_keys_are_not_unknown() -> None:
    data = {"schema": "analytics", "threads": 4, "target_name": "dev", "profile_name": "p"}
    SparkContractsCredentials.validate(dict(data))  # no error
    assert SparkContractsCredentials.from_dict(dict(data)).method == "session"


def test_unknown_method_lists_the_allowed_ones() -> None:
    # `validate` runs before deserializing (as in dbt): our message, not the JSON schema's.
    with pytest.raises(DbtRuntimeError) as info:
        _parse(method="foo")
    assert info.value.msg == (
        "Unknown `method: foo`; allowed: thrift, http, session, connect "
        "(omit it for the embedded session)."
    )


@pytest.mark.parametrize("extra", [{}, {"host": "h", "driver": "/opt/simba.so", "port": 443}])
def test_odbc_is_refused_with_what_to_use_instead(extra: Dict[str, Any]) -> None:
    with pytest.raises(DbtRuntimeError) as info:
        _parse(method="odbc", **extra)
    message = info.value.msg
    assert message.startswith("`method: odbc` is not supported by spark_contracts"), message
    assert "nested types and nullability" in message, message
    for instead in ("`method: thrift`", "`http`", "`method: connect`"):
        assert instead in message, message
    with pytest.raises(DbtRuntimeError, match="method: odbc"):  # deserializing alone refuses it
        SparkContractsCredentials.from_dict({"schema": "s", "method": "odbc", **extra})


@pytest.mark.parametrize(
    "host, port, url",
    [
        ("sc://spark.example.com", 15002, "sc://spark.example.com:15002"),
        ("spark.example.com", 15002, "sc://spark.example.com:15002"),
        ("sc://spark.example.com:15003", 15002, "sc://spark.example.com:15003"),
        ("sc://spark.example.com", 443, "sc://spark.example.com"),
    ],
)
def test_connect_url(host: str, port: int, url: str) -> None:
    creds = _parse(method="connect", host=host, port=port)
    assert creds.method == ContractsConnectionMethod.CONNECT
    assert creds.connect_url == url
    assert creds.unique_field == host


def test_connect_needs_a_host() -> None:
    with pytest.raises(DbtRuntimeError, match=r"`method: connect` needs `host`"):
        _parse(method="connect")


def test_server_side_parameters_are_honoured_and_ansi_forced_off_by_default() -> None:
    creds = _parse(server_side_parameters={"spark.sql.shuffle.partitions": "8"})
    assert creds.server_side_parameters["spark.sql.shuffle.partitions"] == "8"
    assert creds.server_side_parameters["spark.sql.ansi.enabled"] == "false"  # dbt-spark's
    conf = creds.embedded_config().spark_conf()
    assert conf["spark.sql.shuffle.partitions"] == "8"  # the profile beats the adapter default


@pytest.mark.parametrize("method", ["session", "thrift", "connect"])
def test_user_set_ansi_wins_over_dbt_spark(method: str) -> None:
    extra = {"host": "localhost", "port": 10000} if method != "session" else {}
    creds = _parse(
        method=method,
        server_side_parameters={"spark.sql.ansi.enabled": "true", "spark.x": "y"},
        **extra,
    )
    assert creds.server_side_parameters["spark.sql.ansi.enabled"] == "true"
    assert creds.server_side_parameters["spark.x"] == "y"


def test_thrift_sends_the_adapters_own_settings_in_open_session_and_sets_the_rest() -> None:
    """The Spark Thrift Server applies `set:hiveconf:<key>` entries of the OpenSession request
    to the new session (no statement); a profile's other keys are SET once it is open."""
    from dbt.adapters.spark_contracts.connection.session_sql import open_session_settings

    creds = _parse(
        method="thrift",
        host="localhost",
        port=10000,
        server_side_parameters={"spark.sql.shuffle.partitions": "8"},
    )
    opening, after = open_session_settings(creds.server_side_parameters)
    assert opening == {
        "use:database": "default",  # the session's database, applied as it opens (no USE)
        "set:hiveconf:spark.sql.ansi.enabled": "false",
        "set:hiveconf:spark.databricks.delta.optimizeMetadataQuery.enabled": "false",
        "spark.sql.shuffle.partitions": "8",
    }
    assert after == {"spark.sql.shuffle.partitions": "8"}
    assert open_session_settings({}) == ({"use:database": "default"}, {})
    assert open_session_settings({"use:database": "sales"}) == ({"use:database": "sales"}, {})


def test_relative_warehouse_dir_resolves_against_the_project_root(tmp_path: Path) -> None:
    creds_module.set_project_root(str(tmp_path))
    creds = _parse(warehouse_dir="data/wh")
    config = creds.embedded_config()
    assert config.warehouse_dir == (tmp_path / "data" / "wh").resolve()
    assert creds.unique_field == str((tmp_path / "data" / "wh").resolve())


def test_default_warehouse_dir_is_spark_warehouse_in_the_project(tmp_path: Path) -> None:
    creds_module.set_project_root(str(tmp_path))
    config = _parse().embedded_config()
    assert config.warehouse_dir == (tmp_path / "spark-warehouse").resolve()
    assert config.warehouse_dir.name != "target"


def test_absolute_warehouse_dir_ignores_the_project_root(tmp_path: Path) -> None:
    creds_module.set_project_root(str(tmp_path / "project"))
    absolute = tmp_path / "elsewhere"
    assert _parse(warehouse_dir=str(absolute)).embedded_config().warehouse_dir == absolute


def test_embedded_config_carries_profile_keys(tmp_path: Path) -> None:
    folder = _jar_folder(tmp_path / "jars")
    config = _parse(
        warehouse_dir=str(tmp_path / "wh"),
        jars_dir=str(folder),
        iceberg_catalog="ice",
        master="local[2]",
    ).embedded_config()
    assert config == EmbeddedSparkConfig(
        warehouse_dir=tmp_path / "wh",
        iceberg_catalog="ice",
        jars_dir=folder,
        master="local[2]",
        server_side_parameters={"spark.sql.ansi.enabled": "false"},
    )


# ---- jar folder --------------------------------------------------------------------------


def test_jars_dir_profile_key_wins_over_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(jars.JARS_ENV_VAR, str(tmp_path / "from_env"))
    assert jars.configured_jars_dir(str(tmp_path / "from_profile")) == tmp_path / "from_profile"
    assert jars.configured_jars_dir(None) == tmp_path / "from_env"
    monkeypatch.delenv(jars.JARS_ENV_VAR)
    assert jars.configured_jars_dir(None) is None


def test_empty_jar_folder_names_every_jar_and_the_fetch_command(tmp_path: Path) -> None:
    with pytest.raises(jars.JarsNotFound) as info:
        jars.jar_paths(tmp_path)
    message = str(info.value)
    assert f"lacks {', '.join(JAR_FILES)}." in message
    assert f"`python -m dbt.adapters.spark_contracts.jars fetch {tmp_path}`" in message
    assert "$DBT_SPARK_CONTRACTS_JARS" in message and "`jars_dir`" in message


def test_partial_jar_folder_names_only_the_missing_jar(tmp_path: Path) -> None:
    _jar_folder(tmp_path, JAR_FILES[:2])
    with pytest.raises(jars.JarsNotFound) as info:
        jars.jar_paths(tmp_path)
    message = str(info.value)
    assert f"lacks {JAR_FILES[2]}." in message
    assert JAR_FILES[0] not in message


def test_full_jar_folder(tmp_path: Path) -> None:
    _jar_folder(tmp_path)
    assert jars.jar_paths(tmp_path) == [tmp_path / name for name in JAR_FILES]


def test_jar_coordinates() -> None:
    assert [j.coordinate for j in jars.REQUIRED_JARS] == [
        "io.delta:delta-spark_2.13:4.3.1",
        "io.delta:delta-storage:4.3.1",
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
    ]
    assert jars.REQUIRED_JARS[0].url == (
        "https://repo1.maven.org/maven2/io/delta/delta-spark_2.13/4.3.1/delta-spark_2.13-4.3.1.jar"
    )
    assert jars.PACKAGE_COORDINATES == (
        "io.delta:delta-spark_2.13:4.3.1",
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
    )


def test_fetch_cli_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert jars.main(["list"]) == 0
    assert capsys.readouterr().out.split() == [
        "io.delta:delta-spark_2.13:4.3.1",
        "io.delta:delta-storage:4.3.1",
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
        "org.apache.derby:derbynet:10.16.1.1",
        "org.apache.derby:derbyclient:10.16.1.1",
    ]


def test_fetch_into_full_folder_downloads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _jar_folder(tmp_path, JAR_FILES + CLUSTER_JAR_FILES)

    def no_network(*args, **kwargs):
        raise AssertionError("fetch should not download into a complete folder")

    monkeypatch.setattr(jars, "_fetch_with_maven", no_network)
    monkeypatch.setattr(jars, "_fetch_with_https", no_network)
    assert jars.fetch(tmp_path) == [tmp_path / n for n in JAR_FILES + CLUSTER_JAR_FILES]


def test_fetch_downloads_only_the_missing_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder filled before the cluster's Derby jars existed gets just those two."""
    _jar_folder(tmp_path)
    asked: list[list[str]] = []

    def fake_https(target: Path, wanted) -> None:
        asked.append([j.file_name for j in wanted])
        for jar in wanted:
            (target / jar.file_name).write_bytes(b"PK")

    monkeypatch.setattr(jars.shutil, "which", lambda name: None)
    monkeypatch.setattr(jars, "_fetch_with_https", fake_https)
    jars.fetch(tmp_path)
    assert asked == [list(CLUSTER_JAR_FILES)]
    assert jars.cluster_jar_paths(tmp_path) == {
        "derbynet": tmp_path / CLUSTER_JAR_FILES[0],
        "derbyclient": tmp_path / CLUSTER_JAR_FILES[1],
    }


def test_cluster_jars_missing_names_them_and_the_fetch_command(tmp_path: Path) -> None:
    _jar_folder(tmp_path)
    with pytest.raises(jars.JarsNotFound) as info:
        jars.cluster_jar_paths(tmp_path)
    assert f"lacks {', '.join(CLUSTER_JAR_FILES)}." in str(info.value)
    assert "jars fetch" in str(info.value)


# ---- the embedded session's Spark configuration ------------------------------------------


def test_spark_conf_delta_iceberg_and_metastore(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    conf = EmbeddedSparkConfig(warehouse_dir=warehouse).spark_conf()
    assert conf["spark.sql.extensions"].split(",") == [
        "io.delta.sql.DeltaSparkSessionExtension",
        "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
    ]
    assert conf["spark.sql.catalog.spark_catalog"] == (
        "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    )
    assert conf["spark.sql.catalog.iceberg"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.iceberg.type"] == "hadoop"
    assert conf["spark.sql.catalog.iceberg.warehouse"] == str(warehouse / "iceberg")
    assert conf["spark.sql.warehouse.dir"] == str(warehouse)
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == (
        f"jdbc:derby:;databaseName={warehouse / 'metastore_db'};create=true"
    )
    assert f"-Dderby.system.home={warehouse}" in conf["spark.driver.extraJavaOptions"]
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.ui.enabled"] == "false"


def test_spark_conf_named_iceberg_catalog(tmp_path: Path) -> None:
    conf = EmbeddedSparkConfig(warehouse_dir=tmp_path, iceberg_catalog="lake").spark_conf()
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.lake.warehouse"] == str(tmp_path / "iceberg")
    assert "spark.sql.catalog.iceberg" not in conf


def test_spark_conf_jars_from_a_folder(tmp_path: Path) -> None:
    folder = _jar_folder(tmp_path / "jars")
    conf = EmbeddedSparkConfig(warehouse_dir=tmp_path / "wh", jars_dir=folder).spark_conf()
    assert conf["spark.jars"].split(",") == [str(folder / name) for name in JAR_FILES]
    assert "spark.jars.packages" not in conf


def test_spark_conf_packages_without_a_folder(tmp_path: Path) -> None:
    conf = EmbeddedSparkConfig(warehouse_dir=tmp_path).spark_conf()
    assert conf["spark.jars.packages"] == (
        "io.delta:delta-spark_2.13:4.3.1,org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"
    )
    assert "spark.jars" not in conf


def test_spark_conf_with_incomplete_folder_raises(tmp_path: Path) -> None:
    with pytest.raises(jars.JarsNotFound, match="lacks"):
        EmbeddedSparkConfig(warehouse_dir=tmp_path, jars_dir=tmp_path).spark_conf()


def test_spark_conf_server_side_parameters_win(tmp_path: Path) -> None:
    conf = EmbeddedSparkConfig(
        warehouse_dir=tmp_path,
        server_side_parameters={"spark.sql.shuffle.partitions": "16", "spark.foo": "bar"},
    ).spark_conf()
    assert conf["spark.sql.shuffle.partitions"] == "16"
    assert conf["spark.foo"] == "bar"


# ---- Java check --------------------------------------------------------------------------


def test_java_home_without_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    with pytest.raises(embedded.EmbeddedSparkError) as info:
        embedded.check_java()
    message = str(info.value)
    assert f"needs Java 17, but JAVA_HOME={tmp_path / 'jdk'} has no bin/java" in message
    assert "Install a JDK 17" in message and "set JAVA_HOME" in message


def test_no_java_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(embedded.EmbeddedSparkError, match="no `java` on PATH"):
        embedded.check_java()


def test_java_home_with_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    embedded.check_java()  # no error


def test_spark_conf_plain_create_table_is_delta(tmp_path: Path) -> None:
    """`CREATE TABLE t (...)` / `CREATE TABLE t AS ...` without USING (hooks, run-operations)
    make Delta tables, like models; Spark's own default is parquet."""
    conf = EmbeddedSparkConfig(warehouse_dir=tmp_path).spark_conf()
    assert conf["spark.sql.sources.default"] == "delta"
