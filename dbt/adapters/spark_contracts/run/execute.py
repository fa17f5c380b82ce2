"""Carrying one planned build out (the adapter's `execute_plan`): a blocked run refused and
recorded, a dry run recorded and logged, the table statement of a build (in one statement,
beside the relation and swapped in, after a drop, or Iceberg's NOT NULL build), and every other
run through the Runner (run/runner.py). One job, for one adapter: it decides nothing that the
plan did not."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import CompilationError, DbtRuntimeError

from dbt.adapters.spark_contracts.constraints import build_not_null, require_not_null_catalog
from dbt.adapters.spark_contracts.core.materialization.load import RENDERED_BY_DBT, render_load
from dbt.adapters.spark_contracts.core.materialization.snapshot import SnapshotMerge, source_stage
from dbt.adapters.spark_contracts.relation import source_view
from dbt.adapters.spark_contracts.run import swap as swaps
from dbt.adapters.spark_contracts.run.build import PlannedBuild
from dbt.adapters.spark_contracts.run.model_run import ContractsAdapterResponse, ModelRun
from dbt.adapters.spark_contracts.run.outcome_events import RunOutcome

logger = AdapterLogger("SparkContracts")


class PlanExecutor:
    """Carries a `PlannedBuild` out on `adapter`'s connection."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter

    def execute(
        self,
        plan: PlannedBuild,
        target: Any,
        existing: Optional[Any],
        create_sql: Optional[str],
        clauses: str = "",
    ) -> ContractsAdapterResponse:
        """The build carried out, as planned (the adapter's `plan_model`): a blocked
        run refused and recorded; a dry run recorded and logged; a full refresh or a build with
        no run, the table statement (`create_sql`, dbt-spark's DDL for `plan.builds_at(target)`,
        or the SELECT of Iceberg's NOT NULL build with its `clauses`); any other run, its steps
        and its one load (`_execute_run`)."""
        run = plan.run
        create_sql = plan.table_statement(create_sql, target)
        if plan.explicit_build and not (run is not None and (run.blocked or run.dry_run)):
            # before any statement of the build that writes (a drop first, a stage, a lease)
            require_not_null_catalog(self.adapter._spark(), str(target))
        if run is None:
            return self._build(plan, target, existing, create_sql, clauses)
        if run.blocked:
            self.record(run)
            raise CompilationError(str(run.error_message))
        if run.dry_run:
            logger.info(f"[dry run] {run.summary()}")
            self.record(run)
            return run.response(
                f"DRY RUN: {len(run.statements)} statement(s) planned, nothing changed",
                RunOutcome.repaired(run.repairs),
                dry_run=True,
            )
        if run.full_refresh:
            response = self._build(plan, target, existing, create_sql, clauses)
            return run.response(str(response), self.record(run))
        stage = None
        if isinstance(run.load, SnapshotMerge) and existing is not None:
            view = str(source_view(existing))
            stage = source_stage(str(existing), view, run.table_format, run.invocation_id)
        if stage is None:
            return self._execute_run(plan, target, existing, create_sql, clauses)
        spark = self.adapter._spark()
        try:  # the snapshot's query, once (core/materialization/snapshot.SourceStage)
            try:
                for statement in stage.statements():
                    spark.run(statement)
            except Exception:  # the query failed: nothing changed, and the report says so
                try:
                    self.record(run)
                except Exception as record_exc:  # the query's failure is the one to raise
                    logger.warning(f"{run.unique_id}: could not record the run: {record_exc}")
                raise
            return self._execute_run(plan, target, existing, create_sql, clauses)
        finally:
            try:
                spark.run(stage.drop)
            except Exception as exc:  # a leftover stage harms nothing; say so
                logger.warning(f"{run.unique_id}: could not drop the stage {stage.table}: {exc}")

    def _build(
        self,
        plan: PlannedBuild,
        target: Any,
        existing: Optional[Any],
        create_sql: Optional[str],
        clauses: str,
    ) -> Any:
        """The table statement of a build: in one statement; built beside the relation and
        swapped in under the model's lease (run/swap.py); after dropping the relation (a fixed
        path, a format's own catalog); or Iceberg's NOT NULL build (constraints.build_not_null)."""
        if create_sql is None:
            raise DbtRuntimeError(f"{plan.unique_id}: the build needs its table statement")
        if plan.swaps:
            assert existing is not None
            return self.adapter._swap_build(
                existing, create_sql, plan.unique_id, plan.invocation_id
            )
        if plan.drop_first and existing is not None:
            self.adapter.drop_relation(existing)
        if plan.explicit_build:
            return self._explicit_build(plan, target, existing, create_sql, clauses)
        response, _ = self.adapter.execute(create_sql)
        return response

    def _explicit_build(
        self, plan: PlannedBuild, target: Any, existing: Optional[Any], select: str, clauses: str
    ) -> Any:
        """Iceberg's NOT NULL build of the table from `select` (constraints.build_not_null)."""
        assert plan.constraints is not None
        exists = existing is not None and not plan.drop_first
        spark = self.adapter._spark()
        return build_not_null(spark, str(target), select, plan.constraints, clauses, exists)

    def _execute_run(
        self,
        plan: PlannedBuild,
        target: Any,
        existing: Any,
        rebuild_sql: Optional[str],
        clauses: str,
    ) -> ContractsAdapterResponse:
        """Every side effect of the planned run (runner.Runner.execute): stage, check, count,
        quarantine, multi-step changes, the one write (the run's typed load, rendered by
        core/materialization/load.py; a table model's rebuild: `rebuild_sql`, dbt-spark's DDL;
        a snapshot's merge: `rebuild_sql`, dbt's `snapshot_merge_sql`;
        a creating run's under an enforced contract with NOT NULL columns on Iceberg: the NOT
        NULL build from `rebuild_sql`, its SELECT); undone on failure. A rebuild whose format
        cannot replace atomically is built beside the table and swapped in after its load
        (core/recovery/swap.py), or, at a location_root, drops the table once every check
        passed."""
        run = plan.run
        assert run is not None
        if run.load is None:
            raise DbtRuntimeError(f"{run.unique_id}: the run has no load (blocked or dry run)")
        by_dbt = isinstance(run.load, RENDERED_BY_DBT)
        load_sql = rebuild_sql if by_dbt else render_load(run.load)
        if load_sql is None:
            raise DbtRuntimeError(f"{run.unique_id}: the load needs its statement from Jinja")
        load: Union[str, Callable[[], Any]] = load_sql
        if plan.explicit_build:  # a creating run's (PlannedBuild.explicit_build)
            select = load_sql
            load = lambda: self._explicit_build(plan, target, existing, select, clauses)  # noqa: E731
        spark = self.adapter._spark()
        runner = self.adapter._runner(spark, run.invocation_id)
        if not run.swaps_after_load:
            drop = (lambda: self.adapter.drop_relation(existing)) if run.drops_before_load else None
            return runner.execute(run, load, drop)
        # `rebuild_sql` builds the table beside the old one (PlannedBuild.builds_at); swapped
        # in after the load, under the model's lease (run/swap.py)
        swap = self.adapter._swap(existing)
        key = self.adapter._swap_key(existing, run.unique_id, run.invocation_id)
        with swaps.building(spark, key, swap, runner.leases) as swap_now:
            response = runner.execute(run, load_sql, after_load=swap_now)
        self.adapter._swapped(existing, swap)
        return response

    def record(self, run: ModelRun) -> RunOutcome:
        """A run that carried out no load (dry run, blocked, full refresh) in the report."""
        runner = self.adapter._runner(self.adapter._spark(), run.invocation_id)
        runner.book.begin(run.repairs)
        runner.record(run)
        return runner.out
