"""A node's commit tag is set for one block: `CommitTags.clear` (dbt's `post_model_hook`) takes
it out of the thread's session; a thread that carries no tag makes no statement; threads keep
their own."""

from __future__ import annotations

import threading
from typing import Dict, List, Optional, Tuple

from dbt.adapters.spark_contracts.run.commit_tag import CommitTags
from dbt.adapters.spark_contracts.run.model_run import DELTA_USER_METADATA, ICEBERG_SNAPSHOT_TAG


class Conf:
    def __init__(self) -> None:
        self.conf: Dict[str, Optional[str]] = {}
        self.calls: List[Tuple[str, Optional[str]]] = []

    def set_conf(self, key: str, value: Optional[str]) -> None:
        self.calls.append((key, value))
        self.conf[key] = value


def test_the_tag_is_set_and_cleared():
    tags, spark = CommitTags(), Conf()
    tags.set(spark, "dbt-spark-contracts:inv:model.p.m")  # type: ignore[arg-type]
    assert tags.tagged()
    assert spark.conf[DELTA_USER_METADATA] == spark.conf[ICEBERG_SNAPSHOT_TAG]
    tags.clear(lambda: spark)  # type: ignore[arg-type,return-value]
    assert not tags.tagged()
    assert spark.conf == {DELTA_USER_METADATA: None, ICEBERG_SNAPSHOT_TAG: None}


def test_a_thread_without_a_tag_makes_no_statement():
    tags, spark = CommitTags(), Conf()
    tags.clear(lambda: spark)  # type: ignore[arg-type,return-value]
    assert spark.calls == []


def test_each_thread_clears_its_own():
    tags, mine, theirs = CommitTags(), Conf(), Conf()
    tags.set(mine, "mine")  # type: ignore[arg-type]
    seen: List[bool] = []

    def other() -> None:
        tags.set(theirs, "theirs")  # type: ignore[arg-type]
        tags.clear(lambda: theirs)  # type: ignore[arg-type,return-value]
        seen.append(tags.tagged())

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen == [False] and tags.tagged()  # the other thread's end left this one's tag
    assert mine.conf[DELTA_USER_METADATA] == "mine"


def test_a_failed_clear_leaves_the_thread_tagged_for_the_next_try():
    tags, spark = CommitTags(), Conf()
    tags.set(spark, "t")  # type: ignore[arg-type]

    class Lost(Conf):
        def set_conf(self, key: str, value: Optional[str]) -> None:
            raise ConnectionError("the connection is gone")

    try:
        tags.clear(lambda: Lost())  # type: ignore[arg-type,return-value]
    except ConnectionError:
        pass
    assert tags.tagged()  # the next node's end tries again
    tags.clear(lambda: spark)  # type: ignore[arg-type,return-value]
    assert not tags.tagged() and spark.conf[DELTA_USER_METADATA] is None


def test_start_sets_a_new_tag_per_run_of_the_node():
    tags, spark = CommitTags(), Conf()
    first = tags.start(spark, "inv", "model.p.m")  # type: ignore[arg-type]
    assert first.startswith("dbt-spark-contracts:inv:") and first.endswith(":model.p.m")
    assert spark.conf[DELTA_USER_METADATA] == spark.conf[ICEBERG_SNAPSHOT_TAG] == first
    second = tags.start(spark, "inv", "model.p.m")  # type: ignore[arg-type]
    assert second != first and spark.conf[DELTA_USER_METADATA] == second


def test_a_tag_set_under_one_key_is_cleared_under_that_key_only():
    tags, spark = CommitTags(), Conf()
    tags.set(spark, "t", (DELTA_USER_METADATA,))  # type: ignore[arg-type]
    assert spark.calls == [(DELTA_USER_METADATA, "t")] and tags.carries() == "t"
    tags.clear(lambda: spark)  # type: ignore[arg-type,return-value]
    assert spark.calls[1:] == [(DELTA_USER_METADATA, None)] and tags.carries() == ""


def test_the_same_tag_is_not_set_again():
    tags, spark = CommitTags(), Conf()
    tags.set(spark, "t")  # type: ignore[arg-type]
    tags.set(spark, "t", (DELTA_USER_METADATA,))  # type: ignore[arg-type]
    assert len(spark.calls) == 2  # the two keys, once


def test_another_tag_replaces_a_stale_one_and_the_clear_takes_every_key():
    """A tag left by a node whose clear failed: the next run's own is set over it, and the
    clear at that node's end resets every key either set."""
    tags, spark = CommitTags(), Conf()
    tags.set(spark, "old")  # type: ignore[arg-type]
    tags.set(spark, "new", (DELTA_USER_METADATA,))  # type: ignore[arg-type]
    assert spark.conf[DELTA_USER_METADATA] == "new" and tags.carries() == "new"
    tags.clear(lambda: spark)  # type: ignore[arg-type,return-value]
    assert spark.conf == {DELTA_USER_METADATA: None, ICEBERG_SNAPSHOT_TAG: None}


def test_new_sets_nothing():
    tags, spark = CommitTags(), Conf()
    tag = tags.new("inv", "model.p.m")
    assert tag.startswith("dbt-spark-contracts:inv:") and spark.calls == [] and not tags.tagged()
