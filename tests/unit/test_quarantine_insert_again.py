"""run/quarantine_steps: the run's insert into the quarantine, refused while the table fits, is
sent again only while the quarantine holds none of the run's rows (Delta refuses an append that
meets a concurrent change of the quarantine's metadata, and that refusal wrote nothing; found
by two concurrent quarantining runs in `make cluster-test`). Rows of the run found there mean
it committed: nothing more is sent."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict, List

import pytest
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.run import quarantine_steps
from dbt.adapters.spark_contracts.run.quarantine_steps import INSERT_ATTEMPTS, Quarantine

INSERT = "insert into s.m__quarantine by name select * from s.m__quarantine__pending_x where d"


class Refusing:
    """Refuses the first `refusals` inserts; the quarantine holds the run's rows once `held`."""

    def __init__(self, refusals: int, held: bool = False) -> None:
        self.refusals, self.held = refusals, held
        self.sent: List[str] = []

    def run(self, sql: str) -> None:
        self.sent.append(sql)
        if sql.startswith("insert") and self.refusals > 0:
            self.refusals -= 1
            raise DbtDatabaseError("[DELTA_METADATA_CHANGED] a concurrent update")

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        self.sent.append(sql)
        return [{"held": 1}] if self.held else []


def run(batch_tag: str = "") -> Any:
    return SimpleNamespace(
        quarantine_table="s.m__quarantine",
        quarantine_format=None,  # nothing to evolve: the table fits
        invocation_id="inv-1",
        batch_tag=batch_tag,
        unique_id="model.p.m",
    )


def quarantine(spark: Refusing) -> Quarantine:
    return Quarantine(spark, book=None, leases=SimpleNamespace())  # type: ignore[arg-type]


def inserts(spark: Refusing) -> int:
    return sum(1 for s in spark.sent if s.startswith("insert"))


def test_a_refused_insert_that_wrote_nothing_is_sent_again() -> None:
    spark = Refusing(refusals=1)
    quarantine(spark)._insert_quarantined(run(), INSERT)
    assert inserts(spark) == 2
    checks = [s for s in spark.sent if s.startswith("select")]
    assert checks == ["select 1 as held from s.m__quarantine where `_dbt_run_id` = 'inv-1' limit 1"]


def test_rows_of_the_run_found_mean_it_committed_nothing_more_is_sent() -> None:
    spark = Refusing(refusals=1, held=True)
    quarantine(spark)._insert_quarantined(run(), INSERT)
    assert inserts(spark) == 1


def test_a_batch_looks_for_its_own_rows_among_its_invocations() -> None:
    spark = Refusing(refusals=1)
    quarantine(spark)._insert_quarantined(run(batch_tag="tag-3"), INSERT)
    checks = [s for s in spark.sent if s.startswith("select")]
    assert "`_dbt_batch_tag` = 'tag-3'" in checks[0], checks


def test_refused_every_time_the_last_refusal_is_raised() -> None:
    spark = Refusing(refusals=100)
    with pytest.raises(DbtDatabaseError):
        quarantine(spark)._insert_quarantined(run(), INSERT)
    assert inserts(spark) == 1 + INSERT_ATTEMPTS
    assert quarantine_steps.INSERT_ATTEMPTS >= 2
