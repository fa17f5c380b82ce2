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


class DeadRunLeftovers(Recording):
    """A schema where a dead run left its record (an intent: a change half done) and a pending
    table of discarded rows."""

    def __init__(self, intent_property: str) -> None:
        super().__init__()
        self.intent_property = intent_property

    def fetch(self, sql: str) -> list:
        from dbt.adapters.spark_contracts.core.recovery.intent import INTENT_PROPERTY
        from dbt.adapters.spark_contracts.core.recovery.pending import (
            BEAT_PROPERTY,
            RUN_PROPERTY,
        )

        self.sent.append(sql)
        if sql.startswith("show tables in db like"):
            return [{"tableName": "m__dbt_lease_dead"}, {"tableName": "m__quarantine__pending_x"}]
        if sql == "show tblproperties db.m__dbt_lease_dead":
            properties = {
                RUN_PROPERTY: "inv-dead",
                BEAT_PROPERTY: "1.0",
                INTENT_PROPERTY: self.intent_property,
            }
            return [{"key": k, "value": v} for k, v in properties.items()]
        return []


def test_a_dry_run_names_what_a_run_would_repair_and_changes_nothing(caplog):
    """A dry run over a dead run's leftovers (its record with an intent, a pending table):
    every statement is a read (the guard would refuse anything else), the repair is not asked
    for, the leftovers are named, and the plan gets the deployed table as it was read."""
    from dbt.adapters.spark_contracts.core.recovery.intent import Intent, commit_tag
    from dbt.adapters.spark_contracts.run.lease import ModelKey
    from dbt.adapters.spark_contracts.run.repair import repair

    tag = commit_tag("inv-dead", "model.p.m")
    intent = Intent("inv-dead", "model.p.m", "db.m", "delta", 3, tag)
    spark = DeadRunLeftovers(intent.to_property())

    class NoRepairs:
        def hold_if_left(self, relation: str, unique_id: str) -> None:
            """No earlier batch of this invocation left the model."""

        def __getattr__(self, name: str):
            raise AssertionError(f"a dry run asked the runner for {name}")

    key = ModelKey("db.m", "inv-now", "delta", "model.p.m")
    deployed = (None, {"x": "1"})
    again = lambda: (_ for _ in ()).throw(AssertionError("read again"))  # noqa: E731
    with caplog.at_level("WARNING"):
        done, read = repair(ReadOnly(spark), NoRepairs(), key, deployed, again, dry_run=True)
    assert done == () and read == deployed
    assert all(s.startswith(("show tables", "show tblproperties")) for s in spark.sent)
    assert "db.m__dbt_lease_dead" in caplog.text and "db.m__quarantine__pending_x" in caplog.text
    assert "dry run: not repaired" in caplog.text
    # without the dry run the same leftovers go to the runner's repair
    with pytest.raises(AssertionError, match="asked the runner for repair"):
        repair(ReadOnly(DeadRunLeftovers(intent.to_property())), NoRepairs(), key, deployed, again)


def test_a_dry_run_over_a_swap_stopped_between_its_renames_is_refused():
    """The relation missing and its backup there: a dry run does not put it back (a run that
    is not a dry run does, first), and planned as a new table it would build one over the
    missing relation; refused, naming both. Where the relation is there, or no backup is,
    the dry run goes on with what dbt found."""
    from types import SimpleNamespace

    from dbt.adapters.spark_contracts.adapter_swap import DryRunOverStoppedSwap, SwapMethods

    relation = SimpleNamespace(database=None, schema="db", identifier="m")

    class Adapter(SwapMethods):
        def __init__(self, cached: set) -> None:
            self.cached = cached

        def get_relation(self, database, schema, identifier):
            return f"{schema}.{identifier}" if identifier in self.cached else None

    with pytest.raises(DryRunOverStoppedSwap, match="m__dbt_backup"):
        Adapter({"m__dbt_backup"}).dry_run_relation(relation, None)
    assert Adapter(set()).dry_run_relation(relation, None) is None
    assert Adapter({"m__dbt_backup"}).dry_run_relation(relation, "db.m") == "db.m"
