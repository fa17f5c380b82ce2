"""The adapter's run-path entry points: the build decision, the planned incremental run (read,
repair, decide once), its execution in one call, and the run's responses."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, Dict, Optional, Tuple

from dbt.adapters.base import available
from dbt.adapters.base.meta import AdapterMeta
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts import run as runs
from dbt.adapters.spark_contracts.connection.errors import (
    config_errors_as_compilation_errors,
    refused_before_any_change,
)
from dbt.adapters.spark_contracts.connection.spark_handle import _ConnectionSpark
from dbt.adapters.spark_contracts.constraints import build_constraints
from dbt.adapters.spark_contracts.core.contracts.constraints import declared_not_null
from dbt.adapters.spark_contracts.core.contracts.data_tests import AttachedTests
from dbt.adapters.spark_contracts.core.contracts.quarantine import QUARANTINE_SUFFIX
from dbt.adapters.spark_contracts.core.evolution.capabilities import describable as is_describable
from dbt.adapters.spark_contracts.core.materialization.create_run import plan_refresh
from dbt.adapters.spark_contracts.core.materialization.load import LoadOptions
from dbt.adapters.spark_contracts.core.materialization.microbatch import (
    MICROBATCH,
    Microbatch,
    check_batch_plan,
)
from dbt.adapters.spark_contracts.core.materialization.run_plan import (
    SNAPSHOT,
    Build,
    BuildFacts,
    Existing,
    RunDecision,
    RunInputs,
    creates_with_replace,
    plan_model,
    replacement,
)
from dbt.adapters.spark_contracts.core.settings.config import fixed_path, read_run_vars
from dbt.adapters.spark_contracts.relation import model_view
from dbt.adapters.spark_contracts.run import repair as repairs_
from dbt.adapters.spark_contracts.run.build import plan_batch
from dbt.adapters.spark_contracts.run.execute import PlanExecutor
from dbt.adapters.spark_contracts.run.first_pass import read_discarded_last
from dbt.adapters.spark_contracts.run.lease import ModelKey
from dbt.adapters.spark_contracts.run.violations import raise_violation
from dbt.adapters.spark_contracts.validation import resolved_settings

logger = AdapterLogger("SparkContracts")


class RunPathMethods(metaclass=AdapterMeta):
    """Mixed into `SparkContractsAdapter`; every method Jinja calls is one step."""

    _tags: runs.CommitTags  # the adapter's: which threads carry a node's commit tag

    @available
    @refused_before_any_change
    def repair_model(
        self,
        materialization: str,
        this: BaseRelation,
        existing: Optional[BaseRelation],
        model: Dict[str, Any],
        run_vars: Dict[str, Any],
        full_refresh: bool,
        invocation_id: str,
    ) -> repairs_.Repaired:
        """Step 1 of a build, before it is planned: a swap or rewrite a dead run stopped between
        its renames put back; for a build that evolves, the node's commit tag set on its session,
        then dead runs' intents repaired and other runs' pending discarded rows settled, under the
        model's lease (run/repair.py; a dry run repairs nothing). The plan then only reads."""
        contract, settings, _ = resolved_settings(self, model, run_vars)
        if settings.dry_run:  # nothing put back: refused over a swap stopped half way
            relation = self.dry_run_relation(this, existing)
        else:
            relation = existing if existing is not None else self.recover_rewrite(this)
        facts = BuildFacts(
            materialization,
            "",
            self._existing(relation),
            bool(full_refresh),
            binds_contract=bool(settings.uses_evolution or contract is not None),
        )
        if relation is None or not facts.evolves:
            return repairs_.Repaired(relation)
        spark = self._spark()
        unique_id = model.get("unique_id", str(relation))
        # this run's commit tag, to the node's end (post_model_hook): set here for a quarantining
        # model and before a repair, else when the planned run needs it (execute_plan)
        tag = self._tags.new(invocation_id, unique_id)
        key = ModelKey(str(relation), invocation_id, self.table_format_of(relation), unique_id)
        quarantines = contract is not None and bool(getattr(contract, "quarantine", False))
        if quarantines and not settings.dry_run:
            self._tags.set(spark, tag)
        runner = repairs_.TaggedRepairs(self._runner(spark, invocation_id), self._tags, spark, tag)
        done, deployed = repairs_.repair(
            spark,
            runner,
            key,
            self._deployed(spark, relation, schema=False),  # the schema: read when planned
            lambda: self._deployed(spark, relation, schema=False),
            settings.dry_run,
        )
        return repairs_.Repaired(relation, tag, done, deployed)

    @available
    @refused_before_any_change
    def plan_model(
        self,
        materialization: str,
        file_format: str,
        repaired: repairs_.Repaired,
        target: BaseRelation,
        model: Dict[str, Any],
        run_vars: Dict[str, Any],
        full_refresh: bool,
        strategy: str,
        compiled_code: str,
        table_options: str,
        invocation_id: str,
        data_tests: Optional[AttachedTests] = None,
    ) -> runs.PlannedBuild:
        """Step 2, the one question a table, incremental or snapshot build asks
        (core/materialization/run_plan.plan_model):
        what to do with the relation and, when the build evolves, the run planned against the
        deployed table as `repair_model` left it (the model's query as a temporary view, its
        schema read, then decided once). It only reads: its statements go through a guard that
        refuses anything else (run/repair.ReadOnly). `data_tests`: `data_tests_of`'s."""
        existing = repaired.relation
        options = LoadOptions.from_config(model.get("config") or {})
        contract, settings, declared = resolved_settings(self, model, run_vars)
        facts = BuildFacts(
            materialization,
            file_format,
            self._existing(existing),
            bool(full_refresh),
            strategy,
            options.unique_key,
            bool(settings.uses_evolution or contract is not None),
            external=fixed_path(model.get("config") or {}),
        )
        unique_id = model.get("unique_id", str(target))
        planned_as = partial(runs.PlannedBuild, unique_id=unique_id, invocation_id=invocation_id)
        if not facts.evolves:
            build = plan_model(facts).build
            run = self._plan_create_run(
                build, target, compiled_code, model, run_vars, invocation_id, data_tests
            )
            select = self._create_select(run, target, compiled_code, model, run_vars)
            return planned_as(build, run, select, build_constraints(model, file_format, select))
        assert existing is not None
        if not repaired.tag:
            raise DbtRuntimeError(
                f"{model.get('unique_id')}: plan_model needs repair_model's result first"
            )
        view = model_view(existing, snapshot=materialization == SNAPSHOT)
        spark = repairs_.ReadOnly(self._spark())
        spark.run(f"create or replace temporary view {view} as {compiled_code}")
        runner = self._runner(spark, invocation_id)
        inputs, microbatch = self._run_facts(
            spark,
            existing,
            view,
            model,
            facts,
            options,
            settings,
            contract,
            declared,
            invocation_id,
            table_options,
            repaired.deployed,
        )
        inputs = replace(inputs, data_tests=data_tests)
        if facts.load_strategy == MICROBATCH:  # its pending table and quarantined rows carry it
            inputs = replace(inputs, batch_tag=repaired.tag)
        with config_errors_as_compilation_errors():
            planned = plan_model(facts, inputs)
            assert planned.run is not None  # a full refresh it decided may be a creating run
            inputs, decided = plan_refresh(inputs, planned.run)
        run = self._model_run(
            spark,
            runner,
            inputs,
            decided,
            unique_id,
            repaired.tag,
            microbatch,
            repaired.repairs,
            existing,
            replacement(facts.existing, file_format, facts.external),
            options,
        )
        logger.debug(f"{unique_id}: planned with {len(spark.sent)} statement(s), all reads")
        select = self._create_select(run, target, compiled_code, model, run_vars)
        return planned_as(planned.build, run, select, build_constraints(model, file_format, select))

    def _create_select(
        self,
        run: Optional[runs.ModelRun],
        target: BaseRelation,
        compiled_code: str,
        model: Dict[str, Any],
        run_vars: Dict[str, Any],
    ) -> Optional[str]:
        """The SELECT the build's table statement creates the table from: a run's rebuild reads
        the run's source; a full refresh, or a build with no run, the model's query (under a
        pydantic_contract coerced into the declared columns, adapter_contracts); None: the
        run's load writes, or the run is blocked or a dry run: no table statement."""
        if run is not None and (run.blocked or run.dry_run):
            return None  # refused or only planned: no table statement is made (nor read)
        if run is not None and run.rebuilds:
            return f"select * from {run.source}"
        if run is not None and not run.full_refresh:
            return None
        query = (run.fits if run is not None else None) or compiled_code
        return self._contract_create_sql(target, query, model, run_vars)  # type: ignore[attr-defined]

    def _existing(self, relation: Optional[BaseRelation]) -> Optional[Existing]:
        if relation is None:
            return None
        return Existing(bool(relation.is_view), self.table_format_of(relation))

    @available
    def creates_with_replace(self, file_format: str) -> bool:
        return creates_with_replace(file_format)

    def _run_facts(
        self,
        spark: Any,
        relation: BaseRelation,
        view: BaseRelation,
        model: Dict[str, Any],
        facts: BuildFacts,
        options: LoadOptions,
        settings: Any,
        contract: Any,
        declared: Any,
        invocation_id: str,
        table_options: str,
        deployed_read: Optional[Tuple[Any, Dict[str, str]]],
    ) -> Tuple[RunInputs, Optional[Microbatch]]:
        """What the run is decided from: the output's schema, the deployed table's (read now or
        by the repair step) and the load's options."""
        unique_id = model.get("unique_id", str(relation))
        deployed, properties = deployed_read or self._deployed(spark, relation, schema=False)
        if deployed is None:  # over thrift: the table's schema read with the view's, in one
            output, deployed = spark.relation_schemas([str(view), str(relation)])
        else:
            output = spark.relation_schema(str(view), True)
        compiled = runs.compiled_schema(output, declared_not_null(model))
        self._validate_column_settings(unique_id, settings, compiled, relation)
        table_format = self.table_format_of(relation)
        microbatch = plan_batch(unique_id, facts.load_strategy, table_format, model, compiled)
        # read only where dbt's cache holds the quarantine: the model's last run quarantined
        quarantine = self._sibling(relation, QUARANTINE_SUFFIX)
        inputs = RunInputs(
            relation=str(relation),
            view=str(view),
            invocation_id=invocation_id,
            table_format=table_format,
            strategy=facts.load_strategy,
            deployed=deployed,
            properties=properties,
            compiled=compiled,
            settings=settings,
            contract=contract,
            declared=declared,
            column_lists=options.column_lists,
            merge_narrowed=options.narrowed,
            table_options=table_options,
            observable=spark.can_observe(),
            discarded_last=bool(
                quarantine and getattr(contract, "quarantine", False) and not settings.dry_run
            )
            and read_discarded_last(spark, str(quarantine)),
        )
        return inputs, microbatch

    def _model_run(
        self,
        spark: runs.Spark,
        runner: runs.Runner,
        inputs: RunInputs,
        decided: RunDecision,
        unique_id: str,
        tag: str,
        microbatch: Optional[Microbatch],
        repairs: Tuple[str, ...],
        relation: BaseRelation,
        replace_by: Build,
        options: LoadOptions,
    ) -> runs.ModelRun:
        """The decided run as Jinja carries it out: refused on a contract violation, the
        files a rewrite rewrites counted, the batch checked, its plan logged and recorded."""
        table_format = inputs.table_format
        for line in decided.contract.gates.log_lines() if decided.contract else ():
            logger.info(f"{unique_id}: {line}")  # the model's tests, gating or after the load
        if decided.violation is not None:
            found = (unique_id, str(relation), decided.violation.to_dict())
            raise_violation(runner.report, runner.target_dir, *found)
        if decided.plan.rewrites_files:  # the plan file names the files a rewrite rewrites
            files = runner.log(table_format).data_files(str(relation))
            if files is not None:
                decided = replace(decided, plan=decided.plan.with_data_files(files))
        if microbatch is not None:
            with config_errors_as_compilation_errors():
                check_batch_plan(microbatch, decided.plan)
        load = decided.load
        if decided.stage and load is not None and load.discard_metrics and not spark.can_observe():
            method = str(self.config.credentials.method)
            logger.info(runs.counts_not_observed_note(unique_id, method))
        run = self._planned_run(
            relation,
            inputs,
            decided,
            unique_id,
            tag,
            options,
            microbatch=microbatch,
            replace_by=replace_by,
            repairs=repairs,
        )
        if (
            run.has_changes or run.blocked or run.plan.notes or run.plan.ignored or repairs
        ) and not run.dry_run:
            logger.info(run.summary())  # a dry run logs its own `[dry run]` line
        if not run.blocked:  # `warn`: applied (or, in a dry run, to be), each change named
            for warning in run.plan.warnings:
                logger.warning(f"{unique_id} ({relation}): {warning}")
        return run

    def _planned_run(
        self,
        relation: BaseRelation,
        inputs: RunInputs,
        decided: RunDecision,
        unique_id: str,
        tag: str,
        options: LoadOptions,
        **facts: Any,
    ) -> runs.ModelRun:
        """`decided` as a run, its load typed (one the config cannot load: a compilation error),
        with the format of the model's quarantine where a quarantining load writes one and dbt's
        cache holds it (None: the run makes it, or writes none)."""
        load, cached = decided.load, None
        if load is not None and load.quarantine_row is not None:
            cached = self._sibling(relation, QUARANTINE_SUFFIX)
        quarantine = self.table_format_of(cached) if cached is not None else None
        with config_errors_as_compilation_errors():
            return runs.ModelRun.planned(
                inputs, decided, unique_id, tag, options, quarantine_format=quarantine, **facts
            )

    def _deployed(
        self, spark: runs.Spark, relation: BaseRelation, schema: bool = True
    ) -> Tuple[Any, Dict[str, str]]:
        """(schema, properties) of the deployed table; `schema` False: the schema may be None,
        left for `_run_facts` to read beside the model's view (Spark.deployed)."""
        describable = is_describable(self.table_format_of(relation))
        return spark.deployed(str(relation), describable, schema)

    def _spark(self) -> _ConnectionSpark:
        return _ConnectionSpark(self)

    def _runner(self, spark: runs.Spark, invocation_id: str) -> runs.Runner:
        self._report.start(invocation_id)
        return runs.Runner(spark, self._report, self._target_dir)

    @available
    def execute_plan(
        self,
        plan: runs.PlannedBuild,
        target: BaseRelation,
        existing: Optional[BaseRelation],
        create_sql: Optional[str],
        clauses: str = "",
    ) -> runs.ContractsAdapterResponse:
        """Step 3, the one call that carries a build out as planned (run/execute.py), its
        commit tag in the session first where the run needs it (`ModelRun.tags_commits`)."""
        run = plan.run
        if run is not None and run.tags_commits:
            self._tags.set(self._spark(), run.commit_tag, run.tag_keys)
        elif run is not None and self._tags.carries() not in ("", run.commit_tag):
            self._tags.clear(self._spark)  # an earlier node's, whose clear failed: not this run's
        return PlanExecutor(self).execute(plan, target, existing, create_sql, clauses)

    @available
    def run_vars(self, var: Any) -> Dict[str, Any]:
        """The run vars the adapter reads, as the model's `var()` resolves them."""
        return read_run_vars(var)
