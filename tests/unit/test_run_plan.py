"""core/materialization/run_plan.py: the one build decision the materializations carry out."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.evolution.capabilities import capabilities_for
from dbt.adapters.spark_contracts.core.materialization.build_plan import (
    BuildPlan,
    created_by_rename,
    created_name,
    creates_by_rename,
)
from dbt.adapters.spark_contracts.core.materialization.run_plan import (
    Build,
    BuildFacts,
    Existing,
    creates_with_replace,
    load_strategy,
    plan_build,
    plan_model,
    replacement,
    replaces_atomically,
)
from dbt.adapters.spark_contracts.core.recovery.pending import batch_key
from dbt.adapters.spark_contracts.core.settings.config import ConfigError
from dbt.adapters.spark_contracts.relation import SparkContractsRelation as Relation
from dbt.adapters.spark_contracts.run.build import PlannedBuild

FORMATS = st.sampled_from(["delta", "iceberg", "parquet"])
EXISTING = st.none() | st.builds(Existing, st.booleans(), FORMATS)


@given(EXISTING, FORMATS)
def test_only_a_table_of_the_same_atomic_format_is_replaced_in_place(existing, fmt):
    expected = (
        existing is not None
        and not existing.is_view
        and existing.table_format == fmt
        and capabilities_for(fmt).atomic_rewrite
    )
    assert replaces_atomically(existing, fmt) == expected


@given(
    st.sampled_from(["table", "incremental"]),
    FORMATS,
    EXISTING,
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_every_build_is_one_of_five_actions(
    materialization, fmt, existing, full_refresh, binds, external
):
    facts = BuildFacts(materialization, fmt, existing, full_refresh, "merge", "id", binds, external)
    rebuilds = existing is not None and not facts.evolves
    if rebuilds and external and not existing.is_view and not replaces_atomically(existing, fmt):
        # a table at a fixed path cannot be dropped and built again over its files: refused,
        # before anything changes
        with pytest.raises(ConfigError, match="cannot be rebuilt"):
            plan_build(facts)
        return
    build = plan_build(facts)
    assert build.evolves == facts.evolves
    if existing is None:
        assert build.action is Build.CREATE
    elif existing.is_view or full_refresh or (materialization == "table" and not binds):
        atomic = replaces_atomically(existing, fmt)
        assert build.action is replacement(existing, fmt, external)
        # a relation that cannot be replaced in one statement is dropped first only at a
        # location_root (the new table's path is the old one's) or in Iceberg's own catalog
        drop_first = build.action is Build.DROP_AND_CREATE
        assert drop_first == (not atomic and (external or fmt == "iceberg"))
        assert (build.action is Build.SWAP) == (not atomic and not external and fmt != "iceberg")
    else:
        assert build.action is Build.EVOLVE
    # the built relation keeps its own format only when the run evolves it in place
    if build.evolves and materialization == "incremental":
        assert build.result_format == existing.table_format
    else:
        assert build.result_format == fmt
    assert build.is_delta == (build.result_format == "delta")
    # a managed Parquet table's CTAS goes to its run's own name first (a killed one's
    # `_temporary/` would block the table's own name); never at a fixed path
    assert build.creates_by_rename == (build.result_format == "parquet" and not external)


def test_a_table_rebuild_that_binds_a_contract_evolves_with_the_table_strategy():
    facts = BuildFacts("table", "delta", Existing(False, "delta"), binds_contract=True)
    build = plan_build(facts)
    assert build.evolves and build.load_strategy == "table"


@given(st.sampled_from(["table", "incremental"]), FORMATS, EXISTING, st.booleans(), st.booleans())
def test_plan_model_reads_the_run_facts_exactly_when_the_build_evolves(
    materialization, fmt, existing, full_refresh, binds
):
    facts = BuildFacts(materialization, fmt, existing, full_refresh, "merge", None, binds)
    if facts.evolves:
        with pytest.raises(ValueError, match="run facts missing"):
            plan_model(facts)
    else:
        plan = plan_model(facts)
        assert plan.run is None and plan.build == plan_build(facts)


@pytest.mark.parametrize(
    "strategy,fmt,key,expected",
    [
        # a keyless merge only appends, with or without incremental_predicates (dbt-spark joins
        # FALSE to them: nothing matches)
        ("merge", "delta", None, "append"),
        ("merge", "delta", "id", "merge"),
        ("merge", "iceberg", None, "append"),
        ("merge", "iceberg", "id", "merge"),
        ("merge", "parquet", None, "merge"),
        ("append", "delta", None, "append"),
    ],
)
def test_load_strategy(strategy, fmt, key, expected):
    assert load_strategy(strategy, fmt, key) == expected


@given(st.sampled_from(["table", "incremental"]), st.booleans(), st.booleans(), st.uuids())
def test_a_parquet_ctas_creates_under_its_runs_own_name_and_renames_in_one_script(
    materialization, swaps, enforced, invocation
):
    """The table statement as sent (`PlannedBuild.table_statement`): the CTAS Jinja rendered
    for `builds_at` (the run's own name), then its rename to where it `lands_at` (the model, or
    the table beside it that a swap puts in its place), as one script; another run's own name
    is another name. Delta's and Iceberg's CTAS go out as rendered."""
    target = Relation.create(schema="s", identifier="m", type="table")
    for fmt in ("parquet", "delta", "iceberg"):
        action = Build.SWAP if swaps else Build.CREATE
        build = BuildPlan(action, fmt, materialization, fmt, creates_by_rename(fmt, False))
        plan = PlannedBuild(build, None, "select 1 as id", invocation_id=str(invocation))
        lands = "s.m__dbt_rewrite" if swaps else "s.m"
        assert str(plan.lands_at(target)) == lands
        ctas = f"create table {plan.builds_at(target)} using {fmt} as select 1 as id"
        sent = plan.table_statement(ctas, target)
        if fmt != "parquet":
            assert str(plan.builds_at(target)) == lands and sent == ctas
            continue
        created = f"{lands}__dbt_new_{str(invocation).replace('-', '')[:12]}"
        assert str(plan.builds_at(target)) == created
        assert sent == f"BEGIN\n{ctas};\nALTER TABLE {created} RENAME TO {lands};\nEND"
        other = PlannedBuild(build, None, "select 1 as id", invocation_id="0" * 32)
        if str(invocation).replace("-", "")[:12] != "0" * 12:
            assert str(other.builds_at(target)) != created
    # no CTAS to rename: a snapshot's merge (no create_select), Iceberg's NOT NULL build
    parquet = BuildPlan(Build.CREATE, "parquet", materialization, "parquet", True)
    merge = "merge into s.m using v on false when not matched then insert *"
    assert PlannedBuild(parquet, None, None).table_statement(merge, target) == merge
    assert PlannedBuild(parquet).table_statement(None, target) is None


def test_a_ctas_at_a_fixed_path_is_not_renamed():
    """At a `location_root` or a `path` the table is external: a rename would leave its files
    where the CTAS wrote them."""
    assert creates_by_rename("parquet", False) and creates_by_rename("csv", False)
    assert not creates_by_rename("parquet", True)
    assert not creates_by_rename("delta", False) and not creates_by_rename("iceberg", False)
    assert created_name("`s`.`m`", "ab-cd") == "`s`.`m__dbt_new_abcd`"
    script = created_by_rename("create table s.x as select 1;\n", "s.x", "s.m")
    assert script == "BEGIN\ncreate table s.x as select 1;\nALTER TABLE s.x RENAME TO s.m;\nEND"


def test_create_statement_per_format():
    assert creates_with_replace("delta") and creates_with_replace("ICEBERG")
    assert not creates_with_replace("parquet") and not creates_with_replace("hudi")


@pytest.mark.parametrize("fmt", ["delta", "iceberg", "parquet"])
@pytest.mark.parametrize("observable", [True, False])
@pytest.mark.parametrize("strategy", ["append", "merge", "table", "microbatch"])
def test_quarantined_rows_go_to_the_runs_pending_table_never_the_driver(fmt, observable, strategy):
    """discard_row + quarantine: the model's output is read once into the run's pending table
    (the run's stage: every row with its reasons; counts observed, no row collected), and
    the load and the quarantine read it, on every format and method; a microbatch batch too,
    its pending table its own (named by its commit tag), its rows carrying that tag."""
    from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract

    decided = planned(
        fmt,
        strategy,
        "struct<id:bigint,n:bigint>",
        "struct<id:bigint,n:string>",
        contract=SchemaContract(data_type=ContractMode.DISCARD_ROW, quarantine=True),
        observable=observable,
        batch_tag=TAG if strategy == "microbatch" else "",
    )
    pending = "db.t__quarantine__pending_inv"
    if strategy == "microbatch":
        pending += "_" + batch_key(TAG)
    assert decided.quarantine_pending
    assert decided.load is not None and decided.load.quarantine_select is not None
    assert decided.stage == pending
    # counted while the pending table is written where the connection observes metrics
    # (Spark applies a result task's accumulator updates once), else by a query over it
    assert (decided.observed is not None) is (observable and strategy != "table")
    # the kept rows are those the pending table gave no reason: no predicate runs again
    assert decided.load.select.endswith(f"FROM {pending} WHERE `_contract_reason` IS NULL")
    assert decided.load.discard_count_sql == (
        "SELECT count_if(NOT (`_contract_reason` IS NULL)) AS rows_discarded, 0 AS "
        f"values_discarded FROM {pending}"
    )
    # the pending table is written from the model's view, every row
    written = decided.load.pending_from(decided.observed or "t__tmp") or ""
    assert written.endswith(f"FROM {decided.observed or 't__tmp'}") and " WHERE " not in written
    # a batch's rows carry its tag: its invocation's other batches share the run id
    tagged = f"'{TAG}' AS `_dbt_batch_tag`" in written
    assert tagged is (strategy == "microbatch")
    assert "collect_list" not in repr(decided)


TAG = "dbt-spark-contracts:inv:b1:model.p.t"


def _quarantining(
    fmt,
    strategy,
    observable=True,
    discarded_last=False,
    mode="discard_row",
    deployed="struct<id:bigint,n:bigint>",
    dry_run=False,
):
    from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract

    return planned(
        fmt,
        strategy,
        deployed,
        "struct<id:bigint,n:string,note:string>",
        evolution=True,
        dry_run=dry_run,
        contract=SchemaContract(
            data_type=ContractMode(mode),
            columns=ContractMode.DISCARD_ROW,
            quarantine=True,
        ),
        observable=observable,
        batch_tag=TAG if strategy == "microbatch" else "",
        discarded_last=discarded_last,
    )


@given(
    fmt=st.sampled_from(["delta", "iceberg", "parquet"]),
    strategy=st.sampled_from(["append", "merge", "insert_overwrite", "table", "microbatch"]),
    observable=st.booleans(),
    discarded_last=st.booleans(),
    mode=st.sampled_from(["discard_row", "discard_value", "freeze"]),
    dry_run=st.booleans(),
)
def test_a_quarantining_run_tries_its_first_pass_only_where_failing_it_changes_nothing(
    fmt, strategy, observable, discarded_last, mode, dry_run
):
    """The first pass (run_plan.first_pass) is planned for a quarantining run whose load is one
    atomic statement with nothing before it, whose last run discarded nothing, and that needs
    no second read of the output (a freeze sample, value counts a method cannot observe); its
    SELECT reads the model's output as it is and fails at the first discarded row, keeping the
    same rows as the pending path."""
    decided = _quarantining(fmt, strategy, observable, discarded_last, mode, dry_run=dry_run)
    first = decided.first_pass
    if not decided.quarantine_pending:
        assert first is None
        return
    atomic = not (
        strategy in ("table", "microbatch")
        or fmt == "parquet"
        or (fmt, strategy) == ("iceberg", "merge")
    )
    needs_second_read = mode == "freeze" or (mode == "discard_value" and not observable)
    expected = atomic and not discarded_last and not dry_run and not needs_second_read
    assert (first is not None) is expected, (fmt, strategy, mode, first)
    if first is None:
        return
    assert "raise_error(" in first.select and "NOT (" not in first.select
    assert decided.stage is not None and decided.stage not in first.select  # no pending read
    # the guard discards exactly what the pending path quarantines, over the coerced view
    assert f"WHERE CASE WHEN {first.quarantine_where} THEN raise_error(" in first.select
    assert first.source == (decided.observed or first.coerced_view("t__tmp"))


def test_a_first_pass_that_met_a_discarded_row_is_remembered_on_the_quarantine():
    """The quarantine's memory: set where a run's discarding changed, read back as a flag."""
    from dbt.adapters.spark_contracts.core.contracts.quarantine import (
        DISCARDED_PROPERTY,
        discarded_last,
        remember_sql,
    )

    assert discarded_last({DISCARDED_PROPERTY: "true"})
    assert not discarded_last({DISCARDED_PROPERTY: "false"})
    assert not discarded_last({})  # a quarantine of an earlier version, or none
    assert remember_sql("db.t__quarantine", True).endswith(f"('{DISCARDED_PROPERTY}' = 'true')")


def test_a_quarantining_batch_needs_its_tag():
    """Without its commit tag a batch's pending table and rows could not be told from its
    invocation's other batches': planning it is refused."""
    from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract
    from dbt.adapters.spark_contracts.core.evolution.plan import Policy
    from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs, plan_run
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type
    from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings

    inputs = RunInputs(
        "db.t",
        "t__tmp",
        "inv",
        "delta",
        "microbatch",
        parse_type("struct<id:bigint,n:bigint>"),
        {},
        parse_type("struct<id:bigint,n:string>"),
        EvolutionSettings(Policy(), "ignore", False, False),
        contract=SchemaContract(data_type=ContractMode.DISCARD_ROW, quarantine=True),
    )
    with pytest.raises(ValueError, match="needs its tag"):
        plan_run(inputs)


@pytest.mark.parametrize("name", ["_contract_reason", "_DBT_RUN_ID"])
@pytest.mark.parametrize("quarantine", [True, False])
def test_a_quarantining_model_may_not_output_the_quarantines_own_columns(name, quarantine):
    """The quarantine adds `_contract_reason` and `_dbt_run_id` to every discarded row: a model
    outputting either (in any case) is refused before anything runs, naming the column and
    the two ways out; without quarantine the name is the model's own."""
    from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract
    from dbt.adapters.spark_contracts.core.evolution.plan import Policy
    from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs, plan_run
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type
    from dbt.adapters.spark_contracts.core.settings.config import ConfigError, EvolutionSettings

    inputs = RunInputs(
        "db.t",
        "t__tmp",
        "inv",
        "delta",
        "append",
        parse_type(f"struct<id:bigint,n:bigint,{name}:string>"),
        {},
        parse_type(f"struct<id:bigint,n:string,{name}:string>"),
        EvolutionSettings(Policy(), "ignore", False, False),
        contract=SchemaContract(data_type=ContractMode.DISCARD_ROW, quarantine=quarantine),
        observable=True,
    )
    if not quarantine:
        assert plan_run(inputs).load is not None
        return
    with pytest.raises(ConfigError) as raised:
        plan_run(inputs)
    message = str(raised.value)
    assert f"db.t: the model outputs `{name}`" in message
    assert "rename the column in the model, or set schema_contract quarantine: false" in message


@pytest.mark.parametrize(
    "materialization,strategy,key,expected",
    [
        ("incremental", "merge", None, "append"),
        ("incremental", "merge", "id", "merge"),
        ("table", "", None, "table"),
    ],
)
def test_plan_model_plans_the_run_with_the_builds_load_strategy(
    materialization, strategy, key, expected
):
    """One ask: the build evolves, and its run is planned with the strategy the build loads
    with (a keyless Delta merge appends), whatever the run's facts said."""
    from dataclasses import replace

    from dbt.adapters.spark_contracts.core.evolution.plan import Policy
    from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs, plan_run
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type
    from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings

    facts = BuildFacts(
        materialization,
        "delta",
        Existing(False, "delta"),
        False,
        strategy,
        key,
        binds_contract=True,
    )
    run = RunInputs(
        "db.t",
        "t__tmp",
        "inv",
        "delta",
        "insert_overwrite",
        parse_type("struct<id:bigint,n:bigint>"),
        {},
        parse_type("struct<id:bigint,n:bigint,m:string>"),
        EvolutionSettings(Policy(), "append_new_columns", True, False),
    )
    plan = plan_model(facts, run)
    assert plan.build.evolves and plan.build.load_strategy == expected
    assert plan.run == plan_run(replace(run, strategy=expected))
    # the run facts' own strategy would have decided another write (here: in steps)
    assert plan.run != plan_run(replace(run, strategy="insert_overwrite"))


class _FailingLoad:
    """A session whose load statement fails, and whose Delta log is `history`."""

    def __init__(self, history):
        self.history, self.sent = history, []

    def run(self, sql):
        from dbt_common.exceptions import DbtDatabaseError

        self.sent.append(sql)
        if sql.startswith("insert into db.t "):
            raise DbtDatabaseError("the load failed")

    def fetch(self, sql):
        self.sent.append(sql)
        assert sql == "describe history db.t", sql
        if self.history is None:
            raise RuntimeError("the log cannot be read")
        return self.history


@pytest.mark.parametrize(
    "history, falls_back",
    [
        ([{"version": 0, "operation": "WRITE", "userMetadata": None}], True),
        ([{"version": 0, "operation": "WRITE", "userMetadata": "other"}], True),
        # the load committed and the error came after: the run fails, its load not repeated
        ([{"version": 1, "operation": "WRITE", "userMetadata": "TAG"}], False),
        (None, False),  # a log that cannot be read proves nothing: no second load
    ],
)
def test_a_failed_first_pass_falls_back_only_when_the_tables_log_holds_no_commit_of_the_run(
    tmp_path, history, falls_back
):
    from dbt_common.exceptions import DbtDatabaseError

    from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs
    from dbt.adapters.spark_contracts.run.model_run import ModelRun
    from dbt.adapters.spark_contracts.run.report import RunReport
    from dbt.adapters.spark_contracts.run.run_errors import FirstPassFailed
    from dbt.adapters.spark_contracts.run.runner import Runner

    decided = _quarantining("delta", "append")
    assert decided.first_pass is not None
    inputs = RunInputs(
        "db.t",
        "t__tmp",
        "inv",
        "delta",
        "append",
        decided.diff and _deployed(),
        {},
        _compiled(),
        _settings(),
    )
    run = ModelRun.planned(inputs, decided, "model.p.t", "TAG")
    spark = _FailingLoad(history)
    runner = Runner(spark, RunReport(), tmp_path)
    expected = FirstPassFailed if falls_back else DbtDatabaseError
    with pytest.raises(expected):
        runner._run_load(run, "insert into db.t select * from t__tmp__contract")
    # no statement but the load and the log's read
    assert spark.sent[0].startswith("insert into db.t ") and spark.sent[1:] == [
        "describe history db.t"
    ]


def _deployed():
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type

    return parse_type("struct<id:bigint,n:bigint>")


def _compiled():
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type

    return parse_type("struct<id:bigint,n:string,note:string>")


def _settings():
    from dbt.adapters.spark_contracts.core.evolution.plan import Policy
    from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings

    return EvolutionSettings(Policy(), "ignore", True, False)


# ---- a snapshot through the one plan (issue 40 §5) ----------------------------------------
SNAP_DEPLOYED = "struct<id:int,amount:int,dbt_scd_id:string,dbt_valid_to:string>"
SNAP_STAGED = (
    "struct<id:int,amount:{amount},dbt_scd_id:string,dbt_valid_to:string{extra},"
    "dbt_change_type:string,dbt_unique_key_1:int>"
)


def _snapshot_run(fmt, amount="int", extra="", contract=None, dry_run=False):
    from dbt.adapters.spark_contracts.core.evolution.plan import Policy
    from dbt.adapters.spark_contracts.core.materialization.load import (
        LoadOptions,
        SnapshotMerge,
        plan_load,
    )
    from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type
    from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings

    facts = BuildFacts("snapshot", fmt, Existing(False, fmt), False, "snapshot", "id")
    staged = parse_type(SNAP_STAGED.format(amount=amount, extra=extra))
    inputs = RunInputs(
        "db.snap",
        "snap__view",
        "inv",
        fmt,
        "snapshot",
        parse_type(SNAP_DEPLOYED),
        {},
        staged,
        EvolutionSettings(Policy(), "append_new_columns", False, dry_run),
        contract,
    )
    planned = plan_model(facts, inputs)
    decided = planned.run
    load = plan_load(
        "snapshot",
        "db.snap",
        "snap__view",
        fmt,
        inputs.deployed,
        staged,
        decided.plan,
        False,
        None,
        LoadOptions(),
    )
    assert isinstance(load, SnapshotMerge)
    return planned, decided, load


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_snapshot_over_its_table_is_planned_as_a_run_whose_load_is_dbts_merge(fmt):
    """The snapshot evolves like any run: the source's new column and widened type are steps
    under the run's record before dbt's merge (which cannot evolve the table); the merge
    inserts every staged column but dbt's own helpers."""
    from dbt.adapters.spark_contracts.core.materialization.write_path import WritePath

    planned, decided, load = _snapshot_run(fmt, amount="bigint", extra=",channel:string")
    assert planned.build.evolves and planned.build.load_strategy == "snapshot"
    assert planned.build.result_format == fmt
    assert decided.write.path is WritePath.MULTI_STEP and decided.violation is None
    sqls = " ".join(step.sql for step in decided.statements).lower()
    assert "add columns" in sqls and "channel" in sqls and "amount" in sqls
    # nothing staged: the staging SELECT reads the snapshot table within the merge's statement
    assert decided.stage is None and not decided.quarantine_pending and decided.load is None
    assert load.insert == ("`id`", "`amount`", "`dbt_scd_id`", "`dbt_valid_to`", "`channel`")


def test_an_unchanged_snapshot_is_its_merge_alone():
    from dbt.adapters.spark_contracts.core.materialization.write_path import WritePath

    _, decided, load = _snapshot_run("delta")
    assert decided.statements == () and decided.write.path is WritePath.NO_CHANGE
    assert not decided.plan.operations and load.insert[0] == "`id`"


def test_a_frozen_snapshot_is_refused_before_any_step():
    from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract

    frozen = SchemaContract(ContractMode.EVOLVE, ContractMode.FREEZE, ContractMode.FREEZE)
    _, decided, _ = _snapshot_run("delta", extra=",channel:string", contract=frozen)
    assert decided.violation is not None and decided.violation.column == "channel"
    assert decided.statements == () and not decided.plan.operations


def test_a_snapshot_refuses_a_discarding_mode_as_a_config_error():
    """A config error reaches dbt as its CompilationError (config_errors_as_compilation_errors)."""
    from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract

    with pytest.raises(ConfigError, match="not supported on snapshots"):
        _snapshot_run("delta", contract=SchemaContract(columns=ContractMode.DISCARD_ROW))


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_dry_run_snapshot_renders_its_steps_and_stages_nothing(fmt):
    planned, decided, _ = _snapshot_run(fmt, extra=",channel:string", dry_run=True)
    assert decided.statements and planned.build.evolves
    assert decided.stage is None


def _removing_a_field(
    fmt, contracted, compiled="struct<id:int,s:struct<a:int,c:string>>", changes=None
):
    from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract
    from dbt.adapters.spark_contracts.core.evolution.plan import Policy
    from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs, plan_run
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type
    from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings

    contract = SchemaContract(columns=ContractMode.EVOLVE) if contracted else None
    return plan_run(
        RunInputs(
            "db.t",
            "t__tmp",
            "inv",
            fmt,
            "merge",
            parse_type("struct<id:int,s:struct<a:int,b:int not null,c:string>>"),
            {},
            parse_type(compiled),
            EvolutionSettings(
                Policy(allow_column_removal=True, **({"changes": changes} if changes else {})),
                "ignore",
                True,
                False,
            ),
            contract=contract,
        )
    )


@pytest.mark.parametrize("contracted", [False, True])
@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_struct_field_is_dropped_after_the_load_where_a_rollback_keeps_the_schema(
    fmt, contracted
):
    """Iceberg's rollback keeps the schema: a removed struct field is dropped after the load,
    which writes it NULL in its struct (a load writes a struct whole), made nullable first
    where it is NOT NULL; with a contract its target keeps the field, so the contract's
    SELECT writes it. Delta drops first (its RESTORE brings it back) and writes the model's
    struct as it is."""
    run = _removing_a_field(fmt, contracted)
    steps = [(s.sql, s.after_load) for s in run.statements]
    drop = ("ALTER TABLE db.t DROP COLUMNS (`s`.`b`)", fmt == "iceberg")
    assert drop in steps and steps[-1] == drop, steps
    if fmt == "delta":
        assert run.fits is None and all(not after for _, after in steps)
        assert run.contract is None or run.contract.target.field("s").type.names == ("a", "c")
        return
    assert steps[0] == ("ALTER TABLE db.t ALTER COLUMN `s`.`b` DROP NOT NULL", False)
    if contracted:
        assert run.fits is None
        s = run.contract.target.field("s").type
        assert s.names == ("a", "b", "c") and s.field("b").nullable
        assert "'b', CAST(NULL AS INT)" in run.load.select, run.load.select
    else:
        assert run.fits == (
            "SELECT `id`, IF(`s` IS NULL, NULL, named_struct('a', `s`.`a`, 'b', "
            "CAST(NULL AS INT), 'c', `s`.`c`)) AS `s` FROM t__tmp"
        )


def test_a_struct_field_dropped_after_the_load_beside_an_ignored_change_is_written_null():
    """`on_additive_change: ignore` (the output fitted to the table, core/evolution/fit.py)
    with a struct field removed on Iceberg: the fitted SELECT leaves the ignored new field out
    and writes the removed one NULL, which is dropped after the load (without it, Spark fails
    the load: "Cannot find data for the output column `s`.`b`")."""
    from dbt.adapters.spark_contracts.core.evolution.change_policy import ChangePolicy, OnChange

    run = _removing_a_field(
        "iceberg",
        False,
        compiled="struct<id:int,s:struct<a:int,c:string,d:int>,e:int>",
        changes=ChangePolicy(on_additive=OnChange.IGNORE),
    )
    assert run.fits == (
        "SELECT `id`, IF(`s` IS NULL, NULL, named_struct('a', `s`.`a`, 'b', "
        "CAST(NULL AS INT), 'c', `s`.`c`)) AS `s` FROM t__tmp"
    ), run.fits
    steps = [(s.sql, s.after_load) for s in run.statements]
    assert steps[-1] == ("ALTER TABLE db.t DROP COLUMNS (`s`.`b`)", True), steps


@pytest.mark.parametrize(
    "strategy, options, fmt, new_column, expected",
    [
        # a partitioned insert_overwrite: the dynamic overwrite, whatever else the run does
        ("insert_overwrite", "partitioned by (day)", "parquet", False, "dynamic"),
        ("insert_overwrite", "partitioned by (day)", "delta", True, "dynamic"),
        ("insert_overwrite", "", "parquet", False, None),
        # Delta's evolving append: autoMerge; a merge evolves by its own SQL
        ("append", "", "delta", True, "automerge"),
        ("append", "", "delta", False, None),
        ("merge", "partitioned by (day)", "delta", True, None),
    ],
)
def test_the_run_plans_its_loads_settings(strategy, options, fmt, new_column, expected):
    """`plan_run` hands the load's SQL confs to the runner (write_path.load_settings), from the
    strategy, the model's `partitioned by` clause and whether the write evolves the table."""
    output = (
        "struct<id:bigint,day:string,note:string>" if new_column else "struct<id:bigint,day:string>"
    )
    deployed = "struct<id:bigint,day:string>"
    # schema_evolution set
    decided = planned(fmt, strategy, deployed, output, evolution=True, table_options=options)
    settings = dict(decided.load_settings)
    wanted = {
        "dynamic": {"spark.sql.sources.partitionOverwriteMode": "DYNAMIC"},
        "automerge": {"spark.databricks.delta.schema.autoMerge.enabled": "true"},
        None: {},
    }[expected]
    assert settings == wanted, (decided.write, settings)


def planned(
    fmt: str,
    strategy: str,
    deployed: str,
    output: str,
    evolution: bool = False,
    dry_run: bool = False,
    **inputs: Any,
) -> Any:
    """`plan_run` of the model `db.t` (view `t__tmp`, invocation `inv`) over `deployed`, its
    output `output` (type strings), `on_schema_change: ignore`; `evolution`: schema_evolution
    or a contract is set; `inputs`: RunInputs' other fields."""
    from dbt.adapters.spark_contracts.core.evolution.plan import Policy
    from dbt.adapters.spark_contracts.core.materialization.run_plan import RunInputs, plan_run
    from dbt.adapters.spark_contracts.core.schema.parse import parse_type
    from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings

    settings = EvolutionSettings(Policy(), "ignore", evolution, dry_run)
    table = RunInputs(
        "db.t",
        "t__tmp",
        "inv",
        fmt,
        strategy,
        parse_type(deployed),
        {},
        parse_type(output),
        settings,
        **inputs,
    )
    return plan_run(table)
