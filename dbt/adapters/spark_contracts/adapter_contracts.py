"""The adapter's contract entry points outside the planned run: first builds, views, dbt's
enforced model contract and the constraints built with a table. (A snapshot is planned and
carried out like an incremental run: adapter_run.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, Optional

from dbt.adapters.base import available
from dbt.adapters.base.meta import AdapterMeta
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import CompilationError, DbtRuntimeError
from dbt_common.invocation import get_invocation_id

from dbt.adapters.spark_contracts import run as runs
from dbt.adapters.spark_contracts.connection.errors import config_errors_as_compilation_errors
from dbt.adapters.spark_contracts.constraints import model_table_constraints
from dbt.adapters.spark_contracts.core.contracts.constraints import (
    TableConstraints,
    declared_not_null,
)
from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract
from dbt.adapters.spark_contracts.core.contracts.data_tests import AttachedTests, attached_tests
from dbt.adapters.spark_contracts.core.contracts.decision import ContractViolation, Declared
from dbt.adapters.spark_contracts.core.contracts.enforce import decide, view_violations
from dbt.adapters.spark_contracts.core.contracts.load_select import render_load_select
from dbt.adapters.spark_contracts.core.contracts.model_contract import (
    compare_model_contract,
    mismatch_table,
)
from dbt.adapters.spark_contracts.core.evolution.capabilities import DEFAULT_FILE_FORMAT
from dbt.adapters.spark_contracts.core.materialization.create_run import plan_create
from dbt.adapters.spark_contracts.core.materialization.load import (
    LoadOptions,
    merge_load,
    render_load,
)
from dbt.adapters.spark_contracts.core.materialization.run_plan import BuildPlan, RunInputs
from dbt.adapters.spark_contracts.core.materialization.write_path import REBUILD
from dbt.adapters.spark_contracts.core.schema.diff import SchemaDiff
from dbt.adapters.spark_contracts.core.schema.types import Struct
from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings
from dbt.adapters.spark_contracts.relation import model_view
from dbt.adapters.spark_contracts.run.violations import raise_violation
from dbt.adapters.spark_contracts.validation import resolved_settings

logger = AdapterLogger("SparkContracts")


@dataclass(frozen=True)
class ContractGate:
    """What a contract entry point starts from: the model's schema contract (None: it sets
    none), its evolution settings and declared `pydantic_contract`, and its name in messages."""

    unique_id: str
    relation: str
    contract: Optional[SchemaContract]
    settings: EvolutionSettings
    declared: Optional[Declared]


class ContractMethods(metaclass=AdapterMeta):
    """Mixed into `SparkContractsAdapter`."""

    @available
    def contract_before_create(
        self,
        relation: BaseRelation,
        existing: Optional[BaseRelation],
        compiled_sql: str,
        model: Dict[str, Any],
        run_vars: Dict[str, Any],
    ) -> str:
        """The schema contract before the first statement that creates `relation`, or replaces
        `existing` where that is a view: "create" or "skip".

        - A new relation: the model's settings checked against its output
          (`schema_evolution.columns`), then `tables` of the contract: create, or skip (discard
          modes, with a warning); freeze fails here, before anything is created.
        - A view being replaced: the contract's `freeze` modes against the view's current
          schema, by analysis only; a violation is raised before the view changes."""
        gate = self._contract_gate(existing if existing is not None else relation, model, run_vars)
        if existing is not None:
            if gate.contract is not None and existing.is_view:
                spark = self._spark()
                deployed = spark.relation_schema(str(existing), True)  # a view
                compiled = spark.schema(compiled_sql)
                self._refuse(spark, gate, view_violations(gate.contract, deployed, compiled))
            return "create"
        if not gate.settings.policy.columns and gate.contract is None:
            return "create"  # nothing to check: no analysis of the query
        spark = self._spark()
        compiled = spark.schema(compiled_sql)
        self._validate_column_settings(
            gate.unique_id, gate.settings, compiled, f"({compiled_sql}) AS t"
        )
        if gate.contract is None:
            return "create"
        decision = decide(gate.contract, None, compiled, SchemaDiff(), "delta", gate.declared)
        self._refuse(spark, gate, decision.violations)
        if decision.table_action == "skip":
            logger.warning(f"{gate.unique_id}: {decision.warnings[0]} ({relation})")
            return "skip"
        return "create"

    @available
    def data_tests_of(self, model: Dict[str, Any], graph: Dict[str, Any]) -> AttachedTests:
        """The model's data tests, from dbt's graph, for `plan_model` (issue 42)."""
        nodes = {**(graph.get("sources") or {}), **(graph.get("nodes") or {})}
        unique_key = (model.get("config") or {}).get("unique_key")
        return attached_tests(str(model.get("unique_id")), nodes, unique_key)

    def _contract_create_sql(
        self, relation: BaseRelation, compiled_sql: str, model: Dict[str, Any], run_vars: Any
    ) -> str:
        """The SELECT a run that creates the table writes: the model's query itself, or, under a
        `pydantic_contract`, that query coerced into the declared columns with the declared rules
        applied (freeze fails the CREATE itself). Only where nothing can be discarded: a
        build that can discard is a creating run (`_plan_create_run`), which counts and
        quarantines."""
        gate = self._contract_gate(relation, model, run_vars)
        contract, declared = gate.contract, gate.declared
        if contract is None or declared is None:
            return compiled_sql
        spark = self._spark()
        compiled = runs.compiled_schema(spark.schema(compiled_sql), declared_not_null(model))
        table_format = (model.get("config") or {}).get("file_format") or DEFAULT_FILE_FORMAT
        # `tables` was decided already (spark_contracts_may_create), or the table exists
        creating = replace(contract, tables=ContractMode.EVOLVE)
        decision = decide(creating, None, compiled, SchemaDiff(), table_format, declared)
        self._refuse(spark, gate, decision.violations)
        source = f"(\n{compiled_sql}\n) AS __dbt_contract_source"
        return render_load_select(decision, source, None, compiled, "", hoist=False).select

    def _plan_create_run(
        self,
        build: BuildPlan,
        relation: BaseRelation,
        compiled_sql: str,
        model: Dict[str, Any],
        run_vars: Any,
        invocation_id: str,
        data_tests: Optional[AttachedTests] = None,
    ) -> Optional[runs.ModelRun]:
        """A build that creates the table (`build`: create, replace, swap or drop then create)
        under a `pydantic_contract` whose rules can discard, or data tests that gate the load
        (`data_tests`): planned as a run of the table
        strategy over no table (core/materialization/create_run.py), which `execute_plan` carries out like
        any run (its discards counted, quarantined through the run's pending table, all or
        nothing; Iceberg's NOT NULL build is its load). None: the build writes
        `_contract_create_sql` itself (nothing to discard)."""
        gate = self._contract_gate(relation, model, run_vars)
        contract, settings, declared = gate.contract, gate.settings, gate.declared
        if contract is None or settings.dry_run:
            return None
        gated = data_tests is not None and contract.data_tests is not ContractMode.EVOLVE
        if declared is None and not gated:
            return None
        config = model.get("config") or {}
        table_format = build.result_format
        not_null = declared_not_null(model)
        spark = self._spark()
        compiled = runs.compiled_schema(spark.schema(compiled_sql), not_null)
        view = model_view(relation)
        inputs = RunInputs(
            relation=str(relation),
            view=str(view),
            invocation_id=invocation_id,
            table_format=table_format,
            strategy=REBUILD,
            deployed=Struct(()),
            properties={},
            compiled=compiled,
            settings=settings,
            contract=contract,
            declared=declared,
            data_tests=data_tests,
        )
        with config_errors_as_compilation_errors():
            decided = plan_create(inputs)
        if decided is None:
            return None
        for line in decided.contract.gates.log_lines() if decided.contract else ():
            logger.info(f"{gate.unique_id}: {line}")  # the model's tests, gating or after the load
        spark.run(f"create or replace temporary view {view} as {compiled_sql}")
        tag = self._tags.start(spark, invocation_id, gate.unique_id)  # type: ignore[attr-defined]
        options = LoadOptions.from_config(config)
        # recorded when it is carried out (execute_plan), not while planned
        return self._planned_run(  # type: ignore[attr-defined, no-any-return]
            relation, inputs, decided, gate.unique_id, tag, options, replace_by=build.action
        )

    def _contract_gate(
        self, relation: BaseRelation, model: Dict[str, Any], run_vars: Dict[str, Any]
    ) -> ContractGate:
        contract, settings, declared = resolved_settings(self, model, run_vars)
        unique_id = model.get("unique_id", str(relation))
        return ContractGate(unique_id, str(relation), contract, settings, declared)

    def _refuse(
        self, spark: runs.Spark, gate: ContractGate, violations: Sequence[ContractViolation]
    ) -> None:
        """A contract broken outside an incremental run (first build, view): the
        first violation raised, and recorded in this invocation's report; none, nothing."""
        if violations:
            runner = self._runner(spark, get_invocation_id())
            raise_violation(
                runner.report,
                runner.target_dir,
                gate.unique_id,
                gate.relation,
                violations[0].to_dict(),
            )

    def _validate_column_settings(
        self, unique_id: str, settings: Any, compiled: Any, relation: Any
    ) -> None:
        """`schema_evolution.columns` against the model's output, by analysis only: each entry
        names an output column, each default/backfill is valid SQL over `relation` (the
        deployed table, or on a first build the model's query)."""
        unknown = settings.policy.unknown_columns(compiled)
        if unknown:
            # written ahead of the column (the next run adds it) or left behind: not an error,
            # and it changes nothing the other entries do
            logger.warning(
                f"{unique_id}: `schema_evolution.columns` names {', '.join(unknown)}, which the "
                f"model does not output (yet); its columns are {', '.join(compiled.names)}. "
                "The entry applies on the run that adds the column."
            )
        lowered = {name.lower() for name in unknown}
        for name, column in settings.policy.columns.items():
            if name.lower() in lowered:
                continue  # its expressions are checked on the run that adds the column
            for key in ("default", "backfill"):
                expr = getattr(column, key)
                if expr is None:
                    continue
                try:
                    # analysed against the deployed table: a backfill may read its columns
                    self.schema_json(f"select {expr} as v from {relation}")
                except DbtRuntimeError as exc:
                    raise CompilationError(
                        f"{unique_id}: `schema_evolution.columns.{name}.{key}` is not a valid SQL "
                        f"expression: {expr!r} ({str(exc).splitlines()[0]})"
                    ) from exc

    @available
    def skipped_response(self, model: Dict[str, Any]) -> runs.ContractsAdapterResponse:
        return runs.ContractsAdapterResponse(
            _message="SKIP (schema_contract tables: the relation does not exist; not created)",
            schema_changes=[],
        )

    @property
    def _target_dir(self) -> Path:
        return Path(self.config.project_root) / self.config.target_path

    @available
    def assert_model_contract(self, sql: str, empty_schema_sql: str, model: Dict[str, Any]) -> str:
        """dbt's enforced contract, on typed schemas: nested types field by field; raises dbt's
        mismatch table. Runs on every build, incremental runs included."""
        definition = runs.from_json(self.schema_json(sql))
        contract = runs.from_json(self.schema_json(empty_schema_sql))
        mismatches = compare_model_contract(definition, contract)  # type: ignore[arg-type]
        if mismatches:
            raise CompilationError(
                "This model has an enforced contract that failed.\n"
                "Please ensure the name, data_type, and number of columns in your contract match "
                "the columns in your model's definition.\n\n" + mismatch_table(mismatches),
                node=None,
            )
        return ""

    # ---- model constraints ----------------------------------------------------------------
    @available
    def table_constraints(self, model: Dict[str, Any], file_format: str) -> TableConstraints:
        """The constraints a build of `model` creates with its table (dbt warns here about the
        ones `file_format` does not enforce or support)."""
        return model_table_constraints(model, file_format)

    @available
    def merge_sql(
        self,
        target: BaseRelation,
        source: BaseRelation,
        unique_key: Any,
        incremental_predicates: Optional[List[str]],
        config: Dict[str, Any],
    ) -> str:
        """dbt's `get_merge_sql` where no run was planned (a package calling it): a MERGE by
        name over the columns source and target share, in the table's order (core/materialization/load.py)."""
        source_names = {c.name.lower() for c in self.get_columns_in_relation(source)}
        shared = [
            c.name for c in self.get_columns_in_relation(target) if c.name.lower() in source_names
        ]
        given = LoadOptions.from_config(
            {"unique_key": unique_key, "incremental_predicates": incremental_predicates}
        )
        options = replace(
            LoadOptions.from_config(config),
            unique_key=given.unique_key,
            predicates=given.predicates,
        )
        return render_load(merge_load(str(target), str(source), shared, options))
