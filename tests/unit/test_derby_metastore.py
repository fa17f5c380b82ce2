"""Which sessions get their Derby metastore's view text widened, and the SQL that does it (run
against real Spark and Derby in tests/functional/test_long_view_text.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbt.adapters.spark_contracts.connection import derby_metastore
from dbt.adapters.spark_contracts.connection.session import EmbeddedSparkConfig


def _conf(tmp_path: Path, **overrides: str) -> dict:
    conf = EmbeddedSparkConfig(warehouse_dir=tmp_path).spark_conf()
    conf.update(overrides)
    return conf


def test_the_embedded_default_is_widened(tmp_path: Path) -> None:
    config = EmbeddedSparkConfig(warehouse_dir=tmp_path)
    assert config.spark_conf()[derby_metastore.URL_KEY] == config.metastore_url
    assert derby_metastore.applies(_conf(tmp_path), config.metastore_url)
    builtin = _conf(tmp_path, **{"spark.sql.hive.metastore.jars": "builtin"})
    assert derby_metastore.applies(builtin, config.metastore_url)


@pytest.mark.parametrize(
    "overrides",
    [
        {derby_metastore.URL_KEY: "jdbc:derby://localhost:1527/metastore;create=true"},
        {derby_metastore.URL_KEY: "jdbc:postgresql://db/metastore"},
        {"spark.hadoop.hive.metastore.uris": "thrift://metastore:9083"},
        {"spark.sql.hive.metastore.jars": "maven"},
        {"spark.sql.catalogImplementation": "in-memory"},
    ],
)
def test_other_metastores_are_left_alone(tmp_path: Path, overrides: dict) -> None:
    url = EmbeddedSparkConfig(warehouse_dir=tmp_path).metastore_url
    assert not derby_metastore.applies(_conf(tmp_path, **overrides), url)


def test_a_column_is_copied_into_a_clob_then_renamed() -> None:
    assert derby_metastore.widen_statements("APP", "VIEW_EXPANDED_TEXT") == [
        'ALTER TABLE "APP"."TBLS" ADD COLUMN "VIEW_EXPANDED_TEXT_CLOB" CLOB',
        'UPDATE "APP"."TBLS" SET "VIEW_EXPANDED_TEXT_CLOB" = CAST("VIEW_EXPANDED_TEXT" AS CLOB)',
        'ALTER TABLE "APP"."TBLS" DROP COLUMN "VIEW_EXPANDED_TEXT"',
        'RENAME COLUMN "APP"."TBLS"."VIEW_EXPANDED_TEXT_CLOB" TO "VIEW_EXPANDED_TEXT"',
    ]
