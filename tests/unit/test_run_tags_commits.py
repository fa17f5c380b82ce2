"""Which runs' sessions carry the commit tag (`ModelRun.tags_commits`, issue 41 section 2): a
run whose commits a later step or run looks up by the tag always does (its intent's restore, a
first pass or pending table, a microbatch batch, a schema change, a stage, a rebuild); only the
load of an unchanged schema in one statement, with nothing to put back or settle, goes
untagged. And the repair step's runner sets the tag before a repair's RESTORE, which finds its
own commit by it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

import pytest

from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract
from dbt.adapters.spark_contracts.core.evolution.plan import Policy
from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs, plan_run
from dbt.adapters.spark_contracts.core.recovery.intent import commit_tag
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings
from dbt.adapters.spark_contracts.run.commit_tag import CommitTags
from dbt.adapters.spark_contracts.run.model_run import (
    DELTA_USER_METADATA,
    ICEBERG_SNAPSHOT_TAG,
    TAG_KEYS,
    ModelRun,
)
from dbt.adapters.spark_contracts.run.repair import TaggedRepairs

DEPLOYED = parse_type("struct<id:bigint,n:bigint>")
EVOLVE = EvolutionSettings(Policy(), "ignore", True, False)  # schema_evolution: {}


def planned(
    compiled: str = "struct<id:bigint,n:bigint>",
    strategy: str = "merge",
    table_format: str = "delta",
    contract: Optional[SchemaContract] = None,
) -> ModelRun:
    inputs = RunInputs(
        "db.t",
        "t__dbt_tmp",
        "inv",
        table_format,
        strategy,
        DEPLOYED,
        {},
        parse_type(compiled),
        EVOLVE,
        contract,
    )
    return ModelRun.planned(inputs, plan_run(inputs), "model.p.t", commit_tag("inv", "model.p.t"))


@pytest.mark.parametrize(
    "strategy,table_format", [("merge", "delta"), ("append", "delta"), ("append", "iceberg")]
)
def test_the_load_of_an_unchanged_schema_goes_untagged(strategy: str, table_format: str):
    run = planned(strategy=strategy, table_format=table_format)
    assert run.load is not None and not run.has_changes and not run.statements
    assert not run.tags_commits


def test_an_iceberg_merge_with_a_key_is_staged_and_tagged():
    run = planned(table_format="iceberg")
    assert run.stage is not None and run.tags_commits


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_a_run_that_changes_the_schema_is_tagged_under_its_formats_key(table_format: str):
    run = planned("struct<id:bigint,n:bigint,note:string>", table_format=table_format)
    assert run.has_changes and run.tags_commits
    key = DELTA_USER_METADATA if table_format == "delta" else ICEBERG_SNAPSHOT_TAG
    assert run.tag_keys == (key,)


def test_a_run_with_steps_before_its_load_is_tagged():
    """An intent's restore finds the run's commits by its tag (run/table_log.py)."""
    run = planned("struct<id:bigint,n:bigint,note:string>")
    stepped = replace(run, statements=run.statements or ("step",))  # type: ignore[arg-type]
    assert stepped.tags_commits


def test_a_quarantining_run_is_tagged():
    """Its first pass, or its pending table's settling, reads its load by the tag."""
    contract = SchemaContract(data_type=ContractMode.DISCARD_ROW, quarantine=True)
    run = planned("struct<id:bigint,n:string>", strategy="append", contract=contract)
    assert run.tags_commits


@pytest.mark.parametrize(
    "change",
    [
        {"stage": "db.t__dbt_stage_x"},
        {"quarantine_pending": True},
        {"creates": True},
        {"microbatch": object()},
    ],
)
def test_a_run_that_stages_settles_creates_or_batches_is_tagged(change: Dict[str, Any]):
    assert replace(planned(), **change).tags_commits


def test_a_run_that_creates_the_table_sets_every_key():
    assert replace(planned(), creates=True).tag_keys == TAG_KEYS


def test_a_parquet_table_run_sets_every_key():
    assert planned("struct<id:bigint,n:bigint,note:string>", table_format="parquet").tag_keys == (
        TAG_KEYS
    )


class Conf:
    def __init__(self) -> None:
        self.calls: List[Tuple[str, Optional[str]]] = []

    def set_conf(self, key: str, value: Optional[str]) -> None:
        self.calls.append((key, value))


class Runner:
    def __init__(self, spark: Conf) -> None:
        self.spark, self.seen_at_repair, self.leases = spark, None, "leases"

    def repair(self, key: Any, on_table: bool, tag: Optional[str] = None) -> Optional[str]:
        self.seen_at_repair, self.tag = list(self.spark.calls), tag
        return "repaired"


def test_the_repair_step_sets_the_tag_before_a_repair_only():
    spark, tags = Conf(), CommitTags()
    runner = Runner(spark)
    wrapped = TaggedRepairs(runner, tags, spark, "the-tag")  # type: ignore[arg-type]
    assert wrapped.leases == "leases" and spark.calls == []  # reads pass through, no SET
    assert wrapped.repair("key", False) == "repaired"
    assert runner.seen_at_repair == [(k, "the-tag") for k in TAG_KEYS]
    assert runner.tag == "the-tag"  # its record names it (run/late.on_takeover)
