"""run/record_io.drop_record: a run record beside an Iceberg model is refreshed before its
PURGE (the session's catalog caches the table as it last loaded it, and PURGE deletes only what
that version reaches: a later commit of the lease's own heartbeat connection was left in a REST
catalog's warehouse, found in `test_rest_catalog.py`); elsewhere only dropped."""

from __future__ import annotations

from typing import Dict, List

import pytest
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.run.record_io import drop_record

TABLE = "iceberg.s.m__dbt_lease_abc"


class Recorded:
    """Sends nothing: records the statements; `refresh` fails as told; `listed` the table."""

    def __init__(self, refresh_fails: bool = False, listed: bool = True) -> None:
        self.sent: List[str] = []
        self.refresh_fails, self.listed = refresh_fails, listed

    def fetch(self, sql: str) -> List[Dict[str, str]]:
        self.sent.append(sql)
        if sql.startswith("refresh") and self.refresh_fails:
            raise DbtDatabaseError("TABLE_OR_VIEW_NOT_FOUND")
        if sql.startswith("show tables"):
            return [{"tableName": "m__dbt_lease_abc"}] if self.listed else []
        return []

    def run(self, sql: str) -> None:
        self.sent.append(sql)


def test_an_iceberg_record_is_refreshed_then_purged() -> None:
    spark = Recorded()
    drop_record(spark, TABLE, "iceberg")  # type: ignore[arg-type]
    assert spark.sent == [f"refresh table {TABLE}", f"drop table if exists {TABLE} purge"]


@pytest.mark.parametrize("fmt", ["delta", "parquet"])
def test_elsewhere_only_dropped(fmt: str) -> None:
    spark = Recorded()
    drop_record(spark, "s.m__dbt_lease_abc", fmt)  # type: ignore[arg-type]
    assert spark.sent == ["drop table if exists s.m__dbt_lease_abc"]


def test_a_record_gone_already_is_left_to_the_drops_if_exists() -> None:
    spark = Recorded(refresh_fails=True, listed=False)
    drop_record(spark, TABLE, "iceberg")  # type: ignore[arg-type]
    assert spark.sent[-1] == f"drop table if exists {TABLE} purge"


def test_a_refresh_that_fails_still_drops_the_record() -> None:
    """The refresh only spares the warehouse a file: the record is dropped all the same (a run
    whose change stands must not fail on it)."""
    spark = Recorded(refresh_fails=True, listed=True)
    drop_record(spark, TABLE, "iceberg")  # type: ignore[arg-type]
    assert spark.sent == [f"refresh table {TABLE}", f"drop table if exists {TABLE} purge"]
