"""run/quarantine_steps: the run's insert into a Delta quarantine, refused while the table fits,
is sent again behind the lease's fence as a MERGE on the run's id, which inserts nothing where
the quarantine holds the run's rows (Delta refuses an append that meets a concurrent change of
the quarantine's metadata, and that refusal wrote nothing; found by two concurrent quarantining
runs in `make cluster-test`). An Iceberg quarantine takes the run's own rows by a MERGE on its
id from the first, sent again likewise where its commit met another's; a Parquet quarantine's
refused insert is not sent again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict, List

import pytest
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.core.schema.types import Field, Primitive, Struct
from dbt.adapters.spark_contracts.run import retry
from dbt.adapters.spark_contracts.run.quarantine_steps import Quarantine
from dbt.adapters.spark_contracts.run.retry import INSERT_ATTEMPTS

PENDING = "s.m__quarantine__pending_x"
INSERT = f"insert into s.m__quarantine by name select * from {PENDING} where d"
SCHEMA = Struct((Field("id", Primitive("bigint")), Field("_dbt_run_id", Primitive("string"))))


class Refusing:
    """Refuses the first `refusals` writes into the quarantine (insert or merge); `held`: the
    quarantine holds the run's rows (what a MERGE that found them would insert: none)."""

    def __init__(self, refusals: int, held: bool = False) -> None:
        self.refusals, self.held = refusals, held
        self.sent: List[str] = []

    def run(self, sql: str) -> None:
        self.sent.append(sql)
        if sql.startswith(("insert", "merge")) and self.refusals > 0:
            self.refusals -= 1
            raise DbtDatabaseError("refused")

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        self.sent.append(sql)
        return [{"held": 1}] if self.held else []

    quarantine = SCHEMA  # the quarantine's columns, read after a refusal of a batch's rows

    def relation_schema(self, relation: str, describable: bool) -> Struct:
        assert relation in (PENDING, "s.m__quarantine"), relation
        return SCHEMA if relation == PENDING else self.quarantine


class Fence:
    def __init__(self) -> None:
        self.checks = 0

    def check(self, run: Any) -> None:
        self.checks += 1

    def fenced(self, table_format: str, action: Any) -> Any:  # Leases.fenced: no transaction id
        return action()


def a_run(table_format: str = "delta", batch_tag: str = "") -> Any:
    return SimpleNamespace(
        quarantine_table="s.m__quarantine",
        quarantine_format=None,  # nothing to evolve: the table fits
        table_format=table_format,
        invocation_id="inv-1",
        batch_tag=batch_tag,
        unique_id="model.p.m",
        # what the quarantine takes from the run: the model's columns (a batch's tag too)
        quarantined_schema=SCHEMA
        if not batch_tag
        else Struct((*SCHEMA.fields, Field("_dbt_batch_tag", Primitive("string")))),
    )


WAITS: List[float] = []


@pytest.fixture(autouse=True)
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    WAITS.clear()
    monkeypatch.setattr(retry.time, "sleep", WAITS.append)


def insert(spark: Refusing, run: Any, fence: Fence) -> None:
    Quarantine(spark, book=None, leases=fence)._insert_quarantined(run, INSERT, PENDING)  # type: ignore[arg-type]


def writes(spark: Refusing) -> List[str]:
    return [s.split()[0] for s in spark.sent if s.startswith(("insert", "merge"))]


def test_a_refused_insert_is_sent_again_behind_the_fence_as_a_merge_on_the_runs_id() -> None:
    spark, fence = Refusing(refusals=1), Fence()
    insert(spark, a_run(), fence)
    # the fence after the refusal (a taker's marker refuses too), before the merge, and after
    # it (a write skipped inside its commit: LeaseLost)
    assert writes(spark) == ["insert", "merge"] and fence.checks == 3
    merge = next(s for s in spark.sent if s.startswith("merge"))
    assert "q.`_dbt_run_id` = p.`_dbt_run_id`" in merge and f"from {PENDING} where" in merge


def test_a_refused_merge_after_which_the_rows_are_there_ends_it() -> None:
    """The merge's refusal with the run's rows found in the quarantine (another run moved them,
    or the merge committed): nothing more is sent, nothing raised."""
    spark, fence = Refusing(refusals=2, held=True), Fence()
    insert(spark, a_run(), fence)
    assert writes(spark) == ["insert", "merge"]


def test_a_batch_merges_on_its_own_tag_among_its_invocations_rows() -> None:
    spark, fence = Refusing(refusals=1), Fence()
    spark.quarantine = Struct((*SCHEMA.fields, Field("_dbt_batch_tag", Primitive("string"))))
    insert(spark, a_run(batch_tag="tag-3"), fence)
    merge = next(s for s in spark.sent if s.startswith("merge"))
    assert "q.`_dbt_batch_tag` = p.`_dbt_batch_tag` and q.`_dbt_batch_tag` = 'tag-3'" in merge


def test_a_batchs_rows_refused_by_a_quarantine_an_earlier_batch_made_add_its_tag_column() -> None:
    """A microbatch model's first batch makes the quarantine while the next batch's plan read
    dbt's cache without it (`quarantine_format` None): that batch's rows, refused there (no
    `_dbt_batch_tag` column), are sent again once the column is added."""
    spark, fence = Refusing(refusals=1), Fence()
    spark.quarantine = Struct((*SCHEMA.fields, Field("_dbt_batch_tag", Primitive("string"))))
    insert(spark, a_run(batch_tag="tag-3"), fence)
    assert not any(s.lower().startswith("alter") for s in spark.sent)  # it fits
    spark, fence = Refusing(refusals=1), Fence()
    insert(spark, a_run(batch_tag="tag-3"), fence)
    (added,) = [s for s in spark.sent if s.lower().startswith("alter")]
    assert "s.m__quarantine" in added and "_dbt_batch_tag" in added, added
    assert writes(spark) == ["insert", "insert"], spark.sent


def test_refused_every_time_the_last_refusal_is_raised() -> None:
    spark, fence = Refusing(refusals=100), Fence()
    with pytest.raises(DbtDatabaseError):
        insert(spark, a_run(), fence)
    assert writes(spark) == ["insert"] + ["merge"] * INSERT_ATTEMPTS
    assert fence.checks == 1 + INSERT_ATTEMPTS  # after the refusal, then before each merge
    assert WAITS == [1, 2, 3][:INSERT_ATTEMPTS]  # a second longer before each


def test_a_fence_that_cannot_read_the_lease_is_raised_and_nothing_sent_again() -> None:
    """The fence fails closed (a lease listed but not readable raises a database error): that
    error is raised as it is, never taken for a refused merge and tried again."""

    class Unreadable(Fence):
        def check(self, run: Any) -> None:
            self.checks += 1
            raise DbtDatabaseError("lease unreadable")

    spark, fence = Refusing(refusals=1), Unreadable()
    with pytest.raises(DbtDatabaseError, match="lease unreadable"):
        insert(spark, a_run(), fence)  # type: ignore[arg-type]
    assert writes(spark) == ["insert"] and fence.checks == 1


def test_a_run_that_lost_its_lease_sends_nothing_again() -> None:
    class Lost(Exception):
        pass

    class Taken(Fence):
        def check(self, run: Any) -> None:
            raise Lost

    spark = Refusing(refusals=1)
    with pytest.raises(Lost):
        Quarantine(spark, book=None, leases=Taken())._insert_quarantined(a_run(), INSERT, PENDING)  # type: ignore[arg-type]
    assert writes(spark) == ["insert"]


def test_a_parquet_refusal_is_raised_and_nothing_sent_again() -> None:
    spark, fence = Refusing(refusals=1), Fence()
    with pytest.raises(DbtDatabaseError):
        insert(spark, a_run(table_format="parquet"), fence)
    assert writes(spark) == ["insert"] and fence.checks == 1  # the lease, then the refusal


def test_an_iceberg_merge_whose_commit_met_another_runs_is_sent_again() -> None:
    """Two runs moving their own rows into one Iceberg quarantine at once: a MERGE's commit
    that meets the other's is refused (Iceberg retries an append itself, not a MERGE); it is
    sent again behind the fence, as Delta's refused append is."""
    spark, fence = Refusing(refusals=1), Fence()
    insert(spark, a_run(table_format="iceberg"), fence)
    assert writes(spark) == ["merge", "merge"]
    assert fence.checks == 3  # after the refusal, before the merge again, after it


def test_an_iceberg_quarantine_takes_the_runs_own_rows_by_a_merge_on_its_id() -> None:
    """Iceberg fences no append inside its commit: a move sent before the run lost its lease
    and landing after a settler's would add the rows a second time. As a MERGE on the run's
    id (its literal too: the scan reads the run's files only, and the commit is checked
    against appends of the run's rows only) it inserts none where they are there, or its
    commit fails; the fence is checked after it."""
    spark, fence = Refusing(refusals=0), Fence()
    insert(spark, a_run(table_format="iceberg"), fence)
    assert writes(spark) == ["merge"] and fence.checks == 1
    merge = spark.sent[-1]
    assert "on q.`_dbt_run_id` = p.`_dbt_run_id` and q.`_dbt_run_id` = 'inv-1'" in merge
    assert f"from {PENDING} where `_contract_reason` IS NOT NULL" in merge  # discarded only


def test_an_iceberg_merge_refused_after_a_settler_moved_the_rows_sends_nothing_more() -> None:
    """The run's MERGE refused (its commit met the settler's, which moved the run's rows after
    taking its lease): the rows are there, nothing is raised here and nothing sent again; the
    fence after it then finds the lease lost."""
    spark, fence = Refusing(refusals=1, held=True), Fence()
    insert(spark, a_run(table_format="iceberg"), fence)
    assert writes(spark) == ["merge"] and fence.checks == 1


def test_a_delta_quarantine_takes_the_runs_own_rows_by_an_append() -> None:
    """Delta fences the append inside its commit (the lease's transaction id): no MERGE, no
    scan of the quarantine."""
    spark, fence = Refusing(refusals=0), Fence()
    insert(spark, a_run(table_format="delta"), fence)
    assert writes(spark) == ["insert"]


class Creating:
    """The quarantine's create refused `refusals` times; the table there after `appears_after`
    checks (another run of the model made it), or never."""

    def __init__(self, refusals: int, appears_after: int | None) -> None:
        self.refusals, self.appears_after, self.checks = refusals, appears_after, 0
        self.sent: List[str] = []

    def run(self, sql: str) -> None:
        self.sent.append(sql)
        if sql.startswith("create") and self.refusals > 0:
            self.refusals -= 1
            raise DbtDatabaseError("DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION")

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        self.checks += 1
        if self.appears_after is None or self.checks <= self.appears_after:
            raise DbtDatabaseError("TABLE_OR_VIEW_NOT_FOUND")
        return []


def ready(spark: Creating) -> None:
    Quarantine(spark, book=None, leases=Fence())._ready_quarantine(a_run(), "select 1 as id")  # type: ignore[arg-type]


def test_a_create_refused_while_another_run_makes_the_quarantine_waits_for_it() -> None:
    """Two first discarding runs at once: the second's create is refused while the first's is
    under way (found on the cluster); it is there at the next look, and the run goes on."""
    spark = Creating(refusals=100, appears_after=1)
    ready(spark)
    assert sum(1 for s in spark.sent if s.startswith("create")) == 2


def test_a_create_refused_once_and_then_made_goes_on() -> None:
    spark = Creating(refusals=1, appears_after=None)
    ready(spark)
    assert sum(1 for s in spark.sent if s.startswith("create")) == 2


def test_a_create_refused_every_time_with_no_table_raises() -> None:
    spark = Creating(refusals=100, appears_after=None)
    with pytest.raises(DbtDatabaseError):
        ready(spark)
    assert sum(1 for s in spark.sent if s.startswith("create")) == 1 + INSERT_ATTEMPTS
    assert WAITS == [1, 2, 3][:INSERT_ATTEMPTS]  # the first try at once, then longer each time
