"""One incremental model run, end to end: plan once (typed, immutable), then stage, change, load and
finish, all-or-nothing. Decisions come from `core/`; this module runs them against a connection.

The shape of a run (Jinja calls one step at a time and hands the `ModelRun` back):

1. `repair` (the adapter's `repair_model`, run/repair.py): what a dead run of the model left
   repaired under the model's lease (its durable intent, a stopped swap, pending tables); then
   `plan` (the adapter's `plan_model`, asked once per build, only reading): analyse the model's
   view and the deployed table, decide the build, the contract, the evolution plan, the write
   path and the typed load (core/materialization/run_plan, core/materialization/load).
2. `execute` (the adapter's `execute_plan`, run/execute.py): stage the model's output once when the run
   needs it (a multi-step change, a freeze check, discard counts, quarantine); check freeze;
   count discards; quarantine; record the intent and run the multi-step statements; then the
   one write (evolving the schema itself on the in-write path); on failure the table is put
   back, never over another writer's commit; the intent is cleared.

The parts live in their own modules: `model_run` (the plan Jinja reads), `runner` (carrying it
out), `quarantine_steps` (the pending table and the quarantine; `quarantine_merge`, a run's rows
moved at most once; `retry`, a refused statement sent again), `restore` (putting a table back, repairs), `table_log` (each format's log), `lease` (leases and heartbeats), `commit_tag` (a node's
commit tag), `run_errors`, `outcome_events` (what a run did, as events; its working state), `report`. This package names them for the adapter and the tests
(`from dbt.adapters.spark_contracts import run as runs`).
"""

from dbt.adapters.spark_contracts.connection.spark_handle import Observed, Spark, from_json
from dbt.adapters.spark_contracts.core.schema.types import compiled_schema
from dbt.adapters.spark_contracts.run.build import PlannedBuild
from dbt.adapters.spark_contracts.run.commit_tag import CommitTags
from dbt.adapters.spark_contracts.run.messages import counts_not_observed_note
from dbt.adapters.spark_contracts.run.model_run import (
    DELTA_USER_METADATA,
    ICEBERG_SNAPSHOT_TAG,
    ICEBERG_TAG_KEY,
    STAGE_SUFFIX,
    ContractsAdapterResponse,
    ModelRun,
    stage_name,
)
from dbt.adapters.spark_contracts.run.outcome_events import RunEvents, RunOutcome, RunState
from dbt.adapters.spark_contracts.run.report import RunReport
from dbt.adapters.spark_contracts.run.restore import Restorer
from dbt.adapters.spark_contracts.run.run_errors import (
    ABSENT,
    ForeignCommits,
    LeaseLost,
    QuarantineMismatch,
    QuarantinePending,
    RepairFirst,
    RestoreFailed,
    RunInProgress,
    RunUndone,
    SchemaContractViolation,
    StepUnanswered,
)
from dbt.adapters.spark_contracts.run.runner import Runner

__all__ = [
    "counts_not_observed_note",
    "CommitTags",
    "ABSENT",
    "DELTA_USER_METADATA",
    "ICEBERG_SNAPSHOT_TAG",
    "ICEBERG_TAG_KEY",
    "STAGE_SUFFIX",
    "ContractsAdapterResponse",
    "ForeignCommits",
    "LeaseLost",
    "StepUnanswered",
    "ModelRun",
    "PlannedBuild",
    "QuarantinePending",
    "RepairFirst",
    "RunInProgress",
    "QuarantineMismatch",
    "Observed",
    "RestoreFailed",
    "Restorer",
    "RunEvents",
    "RunOutcome",
    "RunState",
    "RunReport",
    "RunUndone",
    "Runner",
    "SchemaContractViolation",
    "Spark",
    "compiled_schema",
    "from_json",
    "stage_name",
]
