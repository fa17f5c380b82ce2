"""The Delta restore's own race: a commit landing between the foreign-commit check and the
RESTORE is never undone (the Runner against a scripted history; no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dbt.adapters.spark_contracts.core.recovery.intent import Intent
from dbt.adapters.spark_contracts.run import ForeignCommits, RestoreFailed, Runner, RunReport
from dbt.adapters.spark_contracts.run.lease import Leases
from dbt.adapters.spark_contracts.run.restore import Restorer
from tests.unit import history_fake

TAG = "dbt-spark-contracts:inv:model.p.m"


def restorer(spark: Any) -> Restorer:
    """The Runner's collaborator that puts a table back (run/restore.py)."""
    return Restorer(spark, Leases(spark))


class History:
    """`describe history` before and after the first RESTORE; records every statement."""

    def __init__(self, before, after, session_tag=TAG):
        self.rows, self.after, self.statements = before, after, []
        self.session_tag = session_tag
        self.leases: list = []  # `show tables` rows of the dead run's lease table
        self.beat = "0"

    def lease(self, beat: str) -> None:
        self.leases, self.beat = [{"tableName": "t__dbt_lease_inv"}], beat

    def application(self):
        """This process's embedded session: where this run's statements run."""
        import os
        import socket

        from dbt.adapters.spark_contracts.core.recovery.pending import Application

        return Application(f"session://{socket.gethostname()}/{os.getpid()}", "local-1")

    def fetch(self, sql):
        if sql.startswith("show tables in db like 't__dbt_lease_"):
            return self.leases
        if sql == "show tables in db like 't'":  # the model table is there (a taker's marker)
            return [{"tableName": "t"}]
        if sql == "show tblproperties db.t__dbt_lease_inv":
            return [{"key": "dbt_spark_contracts.heartbeat", "value": self.beat}]
        assert sql.startswith("describe history"), sql
        return [
            {"version": v, "operation": op, "userMetadata": tag, "operationParameters": params}
            for v, op, tag, *more in self.rows
            for params in [str(more[0]) if more else None]
        ]

    def run(self, sql):
        self.statements.append(sql)
        if "restore table" in sql:
            self.rows = self.after

    def set_conf(self, key, value):
        pass

    def leave_session(self, carried=()):
        return False

    def get_conf(self, key):
        return self.session_tag  # the session's commit tag: the RESTORE it makes carries it


def intent(version=1):
    return Intent("inv", "model.p.m", "db.t", "delta", version, TAG)


BEFORE = [(0, "CREATE TABLE AS SELECT", None), (1, "WRITE", None), (2, "ADD COLUMNS", TAG)]


def test_a_clean_restore_goes_back_once(tmp_path: Path):
    spark = History(BEFORE, BEFORE + [(3, "RESTORE", TAG)])
    done = restorer(spark).restore(intent())
    assert done == "restored to Delta version 1"
    assert spark.statements == ["restore table db.t to version as of 1"]


def test_a_commit_racing_the_restore_is_given_back(tmp_path: Path):
    raced = (3, "WRITE", "streaming job")
    spark = History(BEFORE, BEFORE + [raced, (4, "RESTORE", TAG)])
    with pytest.raises(ForeignCommits) as caught:
        restorer(spark).restore(intent())
    assert spark.statements == [
        "restore table db.t to version as of 1",
        "restore table db.t to version as of 3",  # the raced commit and the run's changes
    ]
    assert "3 (WRITE, by streaming job)" in str(caught.value), caught.value


def test_a_writers_commit_before_the_runs_first_change_is_kept(tmp_path: Path):
    """The run read version 1, another writer committed 2, the run's first change is 3: the
    table goes back to 2 (before the run's first own commit), the writer's commit stays."""
    rows = [(0, "CREATE TABLE AS SELECT", None), (1, "WRITE", None), (2, "WRITE", "other")]
    rows.append((3, "ADD COLUMNS", TAG))
    spark = History(rows, rows + [(4, "RESTORE", TAG)])
    assert restorer(spark).restore(intent()) == "restored to Delta version 2"
    assert spark.statements == ["restore table db.t to version as of 2"]


def test_a_change_already_put_back_is_not_put_back_again(tmp_path: Path):
    """A repair restored the table and was killed before it dropped the dead run's record: the
    next repair finds that RESTORE (to the restore point) in the log, with nothing of the run
    after it, and sends nothing; another writer's later commit is no reason to refuse."""
    undone = (3, "RESTORE", "dbt-spark-contracts:repairer:model.p.m", {"version": 1})
    rows = BEFORE + [undone, (4, "WRITE", "other")]
    spark = History(rows, rows)
    assert restorer(spark).restore(intent()).startswith("nothing to put back")
    assert spark.statements == []
    # a RESTORE to a version after the restore point is no such evidence
    later = (3, "RESTORE", "someone", {"version": 2})
    with pytest.raises(ForeignCommits):
        restorer(History(BEFORE + [later], [])).restore(intent())


def test_a_foreign_commit_before_the_check_stops_the_restore(tmp_path: Path):
    spark = History(BEFORE + [(3, "WRITE", "other")], [])
    with pytest.raises(ForeignCommits):
        restorer(spark).restore(intent())
    assert spark.statements == []


def test_a_raced_restore_is_not_taken_back_over_later_commits(tmp_path: Path):
    raced, later = (3, "WRITE", "streaming job"), (5, "WRITE", "another job")
    spark = History(BEFORE, BEFORE + [raced, (4, "RESTORE", TAG), later])
    with pytest.raises(ForeignCommits) as caught:
        restorer(spark).restore(intent())
    assert spark.statements == ["restore table db.t to version as of 1"]  # not a second one
    assert "5 (WRITE, by another job)" in str(caught.value), caught.value
    assert "decide by hand" in str(caught.value)


def test_another_writers_restore_is_not_taken_for_ours(tmp_path: Path):
    spark = History(BEFORE, BEFORE + [(3, "RESTORE", "someone else")])
    with pytest.raises(RestoreFailed):
        restorer(spark).restore(intent())


def test_a_dead_runs_late_commit_is_undone_by_the_repair(tmp_path: Path):
    """Over a server the dead client's last statement goes on and may commit between the
    repair's check and its RESTORE: that is the dead run's change, restored, not a foreign one."""
    repair = "dbt-spark-contracts:inv2:model.p.m"
    late = (3, "UPDATE", TAG)
    spark = History(BEFORE, BEFORE + [late, (4, "RESTORE", repair)], session_tag=repair)
    done = restorer(spark).restore(intent())
    assert done == "restored to Delta version 1"
    assert spark.statements == ["restore table db.t to version as of 1"]  # not given back


def test_the_repair_drops_the_dead_runs_stage(tmp_path: Path):
    from dbt.adapters.spark_contracts.run import stage_name

    spark = History(BEFORE, BEFORE + [(3, "RESTORE", TAG)])
    message = restorer(spark)._repair(intent(), "model.p.m")
    assert "restored to Delta version 1" in message
    # the dead run's pending rows are not dropped here: the settler decides them from the
    # table's log (a load a server may still commit would lose them)
    assert spark.statements == [
        f"drop table if exists {stage_name('db.t', 'inv')}",
        "restore table db.t to version as of 1",
    ]
    assert stage_name("db.t", "inv") == "db.t__dbt_stage_inv"


def test_an_intent_whose_run_renews_its_lease_is_not_repaired(tmp_path: Path, monkeypatch):
    """A run that is alive (it renews its lease while the other run watches) is never
    repaired: the other run fails naming it and changes nothing; once its process is gone, the
    other run takes its lease over (marked with who took it) and repairs."""
    import itertools
    import os
    import socket

    from dbt.adapters.spark_contracts.core.recovery.intent import INTENT_PROPERTY
    from dbt.adapters.spark_contracts.core.recovery.pending import APP_PROPERTY, RUN_PROPERTY
    from dbt.adapters.spark_contracts.core.recovery.record import CLIENT_PROPERTY
    from dbt.adapters.spark_contracts.run import RunInProgress
    from dbt.adapters.spark_contracts.run.lease import LEASE_ENV, ModelKey

    monkeypatch.setenv(LEASE_ENV, "3")
    host, beats = socket.gethostname(), itertools.count(1)
    pid = {"value": os.getpid()}  # the dead run's process: this one (running), then gone

    class Leased(History):
        def fetch(self, sql):
            if sql == "show tblproperties db.t__dbt_lease_inv":  # its run record
                return [
                    {"key": "dbt_spark_contracts.heartbeat", "value": str(next(beats))},
                    {"key": RUN_PROPERTY, "value": "inv"},
                    {"key": CLIENT_PROPERTY, "value": f"{host}/{pid['value']}"},
                    {"key": APP_PROPERTY, "value": f"session://{host}/{pid['value']} local-1"},
                    {"key": INTENT_PROPERTY, "value": intent().to_property()},
                ]
            return super().fetch(sql)

    spark = Leased(BEFORE, BEFORE + [(3, "RESTORE", TAG)])
    spark.lease("1")
    key = ModelKey("db.t", "next", "delta", "model.p.m")
    with pytest.raises(RunInProgress) as raised:
        Runner(spark, RunReport(), tmp_path).repair(key, on_table=False)
    assert "run inv is changing db.t" in str(raised.value)
    assert not any("restore" in s or "__dbt_lease_inv" in s for s in spark.statements)
    pid["value"] = 4_194_999  # its process has ended: positive evidence, no waiting
    assert "restored" in (Runner(spark, RunReport(), tmp_path).repair(key, False) or "")
    taken = [s for s in spark.statements if "t__dbt_lease_inv set tblproperties" in s]
    assert taken and "'next'" in taken[0], spark.statements
    # repaired, the dead run's record goes (after the restore)
    dropped = spark.statements.index("drop table if exists db.t__dbt_lease_inv")
    assert dropped > spark.statements.index("restore table db.t to version as of 1")


class IcebergTable:
    """An Iceberg table as the restore reads it: its schema, its current snapshot, no other
    writer's snapshot since the run's restore point."""

    def __init__(self, columns):
        self.columns, self.statements = list(columns), []

    def fetch(self, sql):
        if history_fake.is_read(sql):  # the history an ALTER is sent behind: never changes
            return [{"fingerprint": "1:7"}]
        if "refs where name = 'main'" in sql:
            return [{"snapshot_id": 7}]
        assert sql.endswith(".snapshots"), sql
        return [{"snapshot_id": 7, "parent_id": None, "operation": "append", "tag": None}]

    def run(self, sql):
        self.statements.append(sql)
        sql = history_fake.unwrapped(sql, "1:7") or sql
        if " drop columns " in sql:
            self.columns = [c for c in self.columns if f"`{c}`" not in sql]

    def relation_schema(self, relation, describable):
        from dbt.adapters.spark_contracts.core.schema.parse import parse_type

        return parse_type("struct<" + ",".join(f"{c}:string" for c in self.columns) + ">")

    def leave_session(self, carried=()):
        return False

    def get_conf(self, key):
        return None

    def set_conf(self, key, value):
        self.statements.append(f"set {key}={value}")


@pytest.mark.parametrize("added", [True, False])
def test_an_iceberg_undo_drops_only_the_columns_its_own_add_columns_added(added, tmp_path: Path):
    """Two runs of one model add `note`: the one whose ADD COLUMNS failed (the other's came
    first) must not drop the other's column when it puts the table back; a dead run's repair
    (nothing known of what it ran) drops what the intent names."""

    from dbt.adapters.spark_contracts.core.evolution.operations import AddColumns, NewColumn
    from dbt.adapters.spark_contracts.core.evolution.render import render_operation
    from dbt.adapters.spark_contracts.core.recovery.intent import Intent
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type

    note = NewColumn(("note",), parse_type("string"))
    add = render_operation(AddColumns((note,)), "ice.s.t", "iceberg")
    intent = Intent("inv", "model.p.m", "ice.s.t", "iceberg", 7, TAG, (("note",),), tuple(add))
    table = IcebergTable(["id", "note"])
    restorer(table).restore(intent, add if added else [])
    assert ("note" in table.columns) is not added
    dead = IcebergTable(["id", "note"])
    restorer(dead).restore(intent)
    assert dead.columns == ["id"]


class Names:
    """A catalog of table names (Parquet: no log), enough to follow a rewrite's statements."""

    def __init__(self, tables):
        self.tables, self.statements = dict(tables), []

    def run(self, sql):
        self.statements.append(sql)
        words = sql.split()
        if sql.startswith("DROP TABLE"):
            self.tables.pop(words[-1], None)
        elif sql.startswith("CREATE TABLE"):
            self.tables[words[2]] = "empty"
        elif sql.startswith("INSERT INTO"):
            self.tables[words[2]] = "new"
        elif " RENAME TO " in sql:
            assert words[-1] not in self.tables, sql
            self.tables[words[-1]] = self.tables.pop(words[2])
        else:
            assert "unset tblproperties" in sql, sql  # the intent cleared


@pytest.mark.parametrize("completed", range(8))
def test_a_parquet_rewrite_stopped_anywhere_is_put_back_from_the_steps_that_ran(completed):
    """The Restorer takes a Parquet table (no log) back by the inverses of the rewrite's steps
    that completed: the old table under its name and nothing half-built left, or, once the new
    table holds the name, the rewrite stands."""
    from dbt.adapters.spark_contracts.core.evolution.plan import Policy, plan_schema_change
    from dbt.adapters.spark_contracts.core.evolution.render import render_plan
    from dbt.adapters.spark_contracts.core.schema.diff import diff_schemas
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type

    d, c = parse_type("struct<a:int,b:int>"), parse_type("struct<a:bigint>")
    policy = Policy(allow_full_refresh=True, allow_column_removal=True)
    steps = render_plan(
        plan_schema_change(diff_schemas(d, c), "parquet", {}, policy, d, c), "`db`.`t`", "parquet"
    )
    table = Names({"`db`.`t`": "old", "`db`.`t__dbt_backup`": "stale"})
    for step in steps[:completed]:
        table.run(step.sql)
    intent = Intent("inv", "model.p.m", "`db`.`t`", "parquet", None, TAG, (), steps)
    done = restorer(table).restore(intent, steps[:completed])
    stands = completed >= 6
    assert table.tables.get("`db`.`t`") == ("new" if stands else "old"), (completed, table.tables)
    if not stands and completed:
        assert set(table.tables) == {"`db`.`t`"}, table.tables
    assert ("took the unfinished rewrite back" in done) is (1 < completed < 6)


# ---- an Iceberg rollback never silently takes back another writer's snapshot --------------
class RacedIceberg:
    """An Iceberg table whose run made snapshots 2 and 3 after the restore point 1; the check
    before the rollback saw them. `raced`: another writer's snapshot 4 (on 3) committed between
    that check and the rollback, which the rollback then took out of the current lineage."""

    def __init__(self, raced: bool, stale: bool = False):
        self.raced, self.statements, self.rolled = raced, [], False
        self.stale = stale  # snapshot 5 on 1: an earlier repair rolled it back before the check

    def fetch(self, sql):
        if "refs where name = 'main'" in sql:
            return [{"snapshot_id": 1 if self.rolled else 3}]
        assert sql.endswith(".snapshots"), sql
        # the check before the rollback lists 0 to 3; snapshot 4 commits after it
        own = [(2, 1, TAG), (3, 2, TAG)] + (
            [(4, 3, "someone else")] if self.raced and self.rolled else []
        )
        rows = [{"snapshot_id": 0, "parent_id": None, "operation": "append", "tag": None}]
        rows += [{"snapshot_id": 1, "parent_id": 0, "operation": "append", "tag": None}]
        if self.stale:
            rows += [{"snapshot_id": 5, "parent_id": 1, "operation": "append", "tag": "dead"}]
        return rows + [
            {"snapshot_id": i, "parent_id": p, "operation": "append", "tag": t} for i, p, t in own
        ]

    def run(self, sql):
        self.statements.append(sql)
        if "rollback_to_snapshot" in sql:
            self.rolled = True

    def relation_schema(self, relation, describable):
        from dbt.adapters.spark_contracts.core.schema.parse import parse_type

        return parse_type("struct<id:string>")

    def leave_session(self, carried=()):
        return False

    def get_conf(self, key):
        return None


@pytest.mark.parametrize("raced", [False, True])
def test_an_iceberg_rollback_names_a_snapshot_it_took_back_from_another_writer(raced):
    intent = Intent("inv", "model.p.m", "ice.s.t", "iceberg", 1, TAG)
    table = RacedIceberg(raced)
    if not raced:
        assert "rolled back to Iceberg snapshot 1" in restorer(table).restore(intent, [])
        return
    with pytest.raises(ForeignCommits) as failed:
        restorer(table).restore(intent, [])
    assert [c.version for c in failed.value.commits] == [4]
    assert "set_current_snapshot('s.t', 4)" in str(failed.value), str(failed.value)


def test_rolled_back_with_the_run_reads_parents_not_times():
    from hypothesis import given
    from hypothesis import strategies as st

    from dbt.adapters.spark_contracts.core.recovery.intent import (
        Commit,
        Snapshot,
        rolled_back_with_the_run,
    )
    from dbt.adapters.spark_contracts.core.recovery.txn_fence import marker_tag

    whose = st.sampled_from(["own", "other", "marker"])

    @given(st.lists(st.tuples(whose, st.booleans(), st.booleans()), max_size=8))
    def check(chain):
        """A chain of snapshots after the point 1, each (the run's own, another writer's or a
        lease taker's empty marker; seen by the check; still current); plus an old branch off
        snapshot 0 that never descends from 1. A marker changed nothing: never raced."""
        snaps = [Snapshot(Commit(0, "append", None), None, True)]
        snaps.append(Snapshot(Commit(1, "append", None), 0, True))
        snaps.append(Snapshot(Commit(99, "append", "old"), 0, False))
        seen, expected = [1], []
        tags = {"own": TAG, "other": "other", "marker": marker_tag("db.t__dbt_lease_x")}
        for i, (who, was_seen, current) in enumerate(chain, start=2):
            commit = Commit(i, "append", tags[who])
            snaps.append(Snapshot(commit, i - 1, current))
            if was_seen:
                seen.append(i)
            if who == "other" and not was_seen and not current:
                expected.append(commit)
        assert list(rolled_back_with_the_run(snaps, 1, seen, TAG)) == expected

    check()


def test_a_snapshot_off_the_lineage_before_the_check_did_not_race_the_rollback():
    """Snapshot 5 (an earlier killed run's, rolled back by its repair) hangs off the restore
    point 1 and was listed by the check: the rollback took nothing of it, so nothing is named
    (naming it would advise bringing the dead run's rows back)."""
    intent = Intent("inv", "model.p.m", "ice.s.t", "iceberg", 1, TAG)
    table = RacedIceberg(False, stale=True)
    assert "rolled back to Iceberg snapshot 1" in restorer(table).restore(intent, [])


@pytest.mark.parametrize("landed", [True, False])
def test_an_iceberg_removal_after_the_load_that_landed_is_not_put_back(landed, tmp_path: Path):
    """An Iceberg run drops its removed column after its load, its last step. Killed after that
    DROP landed (its record not yet gone), the repair puts nothing back: the table holds the
    whole change (a rollback would keep the schema without the column and take its load
    back). Killed before it (the column still there), the repair rolls back as ever."""
    from dbt.adapters.spark_contracts.core.evolution.operations import DropColumns
    from dbt.adapters.spark_contracts.core.evolution.render import render_operation
    from dbt.adapters.spark_contracts.core.recovery.intent import Intent

    drop = render_operation(DropColumns((("gone",),)), "ice.s.t", "iceberg")
    assert drop[0].after_load
    intent = Intent(
        "inv", "model.p.m", "ice.s.t", "iceberg", 5, TAG, (), tuple(drop),
        removed_after_load=(("gone",),),
    )  # fmt: skip
    assert Intent.from_property(intent.to_property()) == intent

    class Loaded(IcebergTable):  # the run's load (7, its tag) on its restore point (5)
        def fetch(self, sql):
            if "refs where name = 'main'" in sql:
                return [{"snapshot_id": 7}]
            return [
                {"snapshot_id": 5, "parent_id": None, "operation": "append", "tag": None},
                {"snapshot_id": 7, "parent_id": 5, "operation": "overwrite", "tag": TAG},
            ]

    from dbt.adapters.spark_contracts.run.iceberg_log import IcebergLog

    table = Loaded(["id"] if landed else ["id", "gone"])
    assert IcebergLog(table).landed_last(intent) is landed  # type: ignore[arg-type]
    done = restorer(table)._repair(intent, "model.p.m")
    rollbacks = [s for s in table.statements if "rollback_to_snapshot" in s]
    assert bool(rollbacks) is not landed, table.statements
    assert ("its change stands, nothing put back" in done) is landed, done
    # its load (7, the run's tag) is the evidence with the schema: without it, put back
    untagged = Loaded(["id"])
    untagged.fetch = lambda sql: (  # type: ignore[method-assign]
        [{"snapshot_id": 5}]
        if "refs where name = 'main'" in sql
        else [{"snapshot_id": 5, "parent_id": None, "operation": "append", "tag": None}]
    )
    assert IcebergLog(untagged).landed_last(intent) is False  # type: ignore[arg-type]
