"""Planning only reads (run/repair.ReadOnly): the statements a plan sends pass a guard that lets
reads through and refuses anything else before it reaches Spark (`PlanWrote`); a repair is its
own step before it. Functional runs plan through the guard (every evolving build), so a plan that
wrote would fail them; this checks the guard itself."""

from __future__ import annotations

import pytest

from dbt.adapters.spark_contracts.run.repair import PlanWrote, ReadOnly


class Recording:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def run(self, sql: str) -> str:
        self.sent.append(sql)
        return "ok"

    def fetch(self, sql: str) -> list:
        self.sent.append(sql)
        return []

    def set_conf(self, key: str, value: str) -> None:  # pragma: no cover - refused first
        raise AssertionError("reached Spark")

    def can_observe(self) -> bool:
        return True


READS = [
    "create or replace temporary view m__dbt_tmp as select 1",
    "  SHOW TBLPROPERTIES db.t",
    "describe history db.t",
    "select count(distinct _metadata.file_path) as files from db.t",
    "refresh table iceberg.db.t",
]
WRITES = [
    "alter table db.t set tblproperties ('x' = '1')",
    "restore table db.t to version as of 3",
    "insert into db.t__quarantine select 1",
    "drop table if exists db.t__quarantine__pending_abc purge",
    "create table db.t__dbt_lease_abc (lease int)",
    "merge into db.t using s on false when not matched then insert *",
    "call iceberg.system.rollback_to_snapshot('db.t', 1)",
]


def test_reads_pass_and_are_counted():
    spark = Recording()
    guard = ReadOnly(spark)
    for sql in READS:
        guard.run(sql) if sql.strip().lower().startswith("create") else guard.fetch(sql)
    assert guard.sent == READS and spark.sent == READS
    assert guard.can_observe()  # anything else is the connection's own


@pytest.mark.parametrize("sql", WRITES)
def test_a_write_is_refused_before_it_reaches_spark(sql):
    spark = Recording()
    with pytest.raises(PlanWrote, match="planning only reads"):
        ReadOnly(spark).run(sql)
    assert spark.sent == []


@pytest.mark.parametrize("name", ["set_conf", "own_connection", "observe"])
def test_session_changes_are_refused(name):
    with pytest.raises(PlanWrote):
        getattr(ReadOnly(Recording()), name)
