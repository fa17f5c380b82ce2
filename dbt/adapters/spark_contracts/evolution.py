"""One model's schema evolution at run time: gather both schemas, plan (core/), and run the plan
and the load all-or-nothing. Jinja asks for a `SchemaEvolution`, then hands it back to run."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.core import (
    AddColumns,
    Plan,
    Struct,
    diff_schemas,
    from_spark_json,
    plan_on_schema_change,
    plan_schema_change,
    quote_identifier,
    render_plan,
)
from dbt.adapters.spark_contracts.core.config import EvolutionSettings
from dbt.adapters.spark_contracts.core.diff import SchemaDiff
from dbt.adapters.spark_contracts.core.types import Field, as_nullable

logger = AdapterLogger("SparkContracts")

FILE_FORMATS_WITH_HISTORY = ("delta", "iceberg")


@dataclass
class ContractsAdapterResponse(AdapterResponse):
    """dbt's adapter response plus what this adapter did to the table and its rows."""

    schema_changes: List[Dict[str, Any]] = field(default_factory=list)
    rows_discarded: Optional[int] = None
    values_discarded: Optional[int] = None
    contract: Optional[Dict[str, str]] = None
    dry_run: Optional[bool] = None


def compiled_schema(schema_json: Mapping[str, Any], not_null_columns: Tuple[str, ...]) -> Struct:
    """The model's output schema as a table built from it would store it: nullable, except
    the columns the model declares `not_null` (Spark marks literals NOT NULL; CTAS does not)."""
    analysed = as_nullable(from_spark_json(schema_json))
    assert isinstance(analysed, Struct)
    declared = {name.lower() for name in not_null_columns}
    return Struct(
        tuple(
            Field(f.name, f.type, nullable=f.name.lower() not in declared, comment=f.comment)
            for f in analysed.fields
        )
    )


@dataclass
class RestorePoint:
    table_format: str
    version: Optional[int] = None  # Delta table version
    snapshot_id: Optional[int] = None  # Iceberg snapshot


@dataclass
class SchemaEvolution:
    """Everything Jinja needs for one model: read attributes, never re-decide."""

    unique_id: str
    relation: str
    table_format: str
    deployed: Struct
    compiled: Struct
    diff: SchemaDiff
    plan: Plan
    statements: List[str]
    dry_run: bool
    mode: str  # "schema_evolution" or "on_schema_change: <setting>"
    executed: List[str] = field(default_factory=list)
    restore_point: Optional[RestorePoint] = None
    restored: Optional[str] = None
    contract: Optional[Any] = None  # core.enforce.ContractDecision when a schema_contract applies
    load: Optional[Any] = None  # core.enforce.LoadSql
    rows_discarded: Optional[int] = None
    values_discarded: Optional[int] = None
    violation: Optional[Dict[str, Any]] = None
    cached: bool = False

    @property
    def blocked(self) -> bool:
        return self.plan.is_blocked

    @property
    def has_changes(self) -> bool:
        return bool(self.plan.operations)

    @property
    def full_refresh(self) -> bool:
        return self.plan.full_refresh is not None

    @property
    def error_message(self) -> str:
        lines = [
            f"Schema change blocked for {self.unique_id} ({self.relation}, {self.table_format}); "
            "nothing was changed:"
        ]
        lines += [f"  - {blocked.describe()}" for blocked in self.plan.blocked]
        return "\n".join(lines)

    def summary(self) -> str:
        head = f"{self.unique_id} ({self.relation}): {self.mode}"
        body = self.plan.summary()
        ddl = "\n".join(f"    {sql.strip()};" for sql in self.statements)
        return f"{head}\n{body}" + (f"\n  DDL:\n{ddl}" if ddl else "")

    def report(self) -> Dict[str, Any]:
        return {
            "relation": self.relation,
            "table_format": self.table_format,
            "mode": self.mode,
            "dry_run": self.dry_run,
            "diff": [
                {"change": type(c).__name__, "path": c.dotted, "description": c.describe()}
                for c in self.diff.changes
            ],
            "plan": self.plan.to_dict(),
            "statements": list(self.statements),
            "executed": list(self.executed),
            "restored": self.restored,
            "contract": self.contract.to_dict() if self.contract is not None else None,
            "rows_discarded": self.rows_discarded,
            "values_discarded": self.values_discarded,
            "violation": self.violation,
        }

    def applied_changes(self) -> List[Dict[str, Any]]:
        if self.dry_run:
            return []
        return [
            {"op": type(op).__name__, "description": op.describe()} for op in self.plan.operations
        ]


def plan_evolution(
    unique_id: str,
    relation: str,
    table_format: str,
    deployed: Struct,
    compiled: Struct,
    table_properties: Mapping[str, str],
    settings: EvolutionSettings,
    table_options: str = "",
    contract: Optional[Any] = None,
) -> SchemaEvolution:
    diff = diff_schemas(deployed, compiled)
    if contract is not None:
        # §3 decided per entity; the planner carries out what `evolve` allows, towards `target`
        plan = plan_schema_change(
            contract.evolve_diff,
            table_format,
            table_properties,
            settings.policy,
            deployed,
            contract.target,
        )
        mode = f"schema_contract {contract.contract.to_dict()}"
    elif settings.uses_evolution:
        plan = plan_schema_change(
            diff, table_format, table_properties, settings.policy, deployed, compiled
        )
        mode = f"schema_evolution (strategy {settings.policy.strategy})"
    else:
        plan = plan_on_schema_change(
            settings.on_schema_change,
            diff,
            table_format,
            table_properties,
            deployed,
            compiled,
            settings.policy,
        )
        mode = f"on_schema_change: {settings.on_schema_change}"
    statements = [] if plan.is_blocked else render_plan(plan, relation, table_format, table_options)
    return SchemaEvolution(
        unique_id=unique_id,
        relation=relation,
        table_format=table_format,
        deployed=deployed,
        compiled=compiled,
        diff=diff,
        plan=plan,
        statements=statements,
        dry_run=settings.dry_run,
        mode=mode,
        contract=contract,
    )


Execute = Callable[[str], List[Tuple[Any, ...]]]


def current_version(execute: Execute, relation: str, table_format: str) -> Optional[int]:
    """The table's latest Delta version or Iceberg snapshot id (None: no history yet)."""
    if table_format == "delta":
        rows = execute(f"describe history {relation} limit 1")
    elif table_format == "iceberg":
        rows = execute(
            f"select snapshot_id from {relation}.snapshots order by committed_at desc limit 1"
        )
    else:
        return None
    return int(rows[0][0]) if rows else None


def take_restore_point(execute: Execute, relation: str, table_format: str) -> RestorePoint:
    version = current_version(execute, relation, table_format)
    if table_format == "delta":
        return RestorePoint(table_format, version=version)
    return RestorePoint(table_format, snapshot_id=version)


def restore(execute: Execute, evolution: SchemaEvolution, catalog: Optional[str]) -> str:
    """Put the table back as it was before this run: Delta RESTORE reverts schema and rows;
    Iceberg drops the columns this run added and rolls back to the snapshot."""
    point = evolution.restore_point
    relation = evolution.relation
    if point is None or point.table_format not in FILE_FORMATS_WITH_HISTORY:
        return "nothing to restore (no table history for this format)"
    if point.table_format == "delta" and point.version is not None:
        if current_version(execute, relation, "delta") != point.version:
            execute(f"restore table {relation} to version as of {point.version}")
            return f"restored to Delta version {point.version}"
        return "unchanged"
    done = []
    if evolution.executed:
        added = [
            col.path
            for op in evolution.plan.operations
            if isinstance(op, AddColumns)
            for col in op.columns
        ]
        if added:
            paths = ", ".join(".".join(quote_identifier(p) for p in path) for path in added)
            execute(f"alter table {relation} drop columns ({paths})")
            done.append(f"dropped added columns {', '.join('.'.join(p) for p in added)}")
    if point.snapshot_id is not None:
        if current_version(execute, relation, "iceberg") != point.snapshot_id:
            ident = relation.split(".", 1)[1] if catalog else relation
            execute(f"call {catalog}.system.rollback_to_snapshot('{ident}', {point.snapshot_id})")
            done.append(f"rolled back to Iceberg snapshot {point.snapshot_id}")
    return "; ".join(done) or "unchanged"


class SchemaContractViolation(DbtRuntimeError):
    """A broken `freeze`, with dlt's DataValidationError context as attributes."""

    def __init__(self, unique_id: str, relation: str, violation: Dict[str, Any], values=()):
        self.unique_id, self.relation = unique_id, relation
        self.schema_entity = violation.get("schema_entity")
        self.contract_mode = violation.get("contract_mode")
        self.column_name = violation.get("column")
        self.deployed_type = violation.get("deployed_type")
        self.compiled_type = violation.get("compiled_type")
        self.offending_values = list(values)
        lines = [
            f"Schema contract violated in {unique_id} ({relation}); nothing was loaded:",
            f"  schema_entity: {self.schema_entity}",
            f"  contract_mode: {self.contract_mode}",
        ]
        if self.column_name:
            lines.append(f"  column: {self.column_name}")
        if self.deployed_type or self.compiled_type:
            lines.append(
                f"  deployed type: {self.deployed_type}, compiled type: {self.compiled_type}"
            )
        if self.offending_values:
            shown = ", ".join(repr(v) for v in self.offending_values[:5])
            lines.append(f"  offending values (up to 5): {shown}")
        if violation.get("reason"):
            lines.append(f"  reason: {violation['reason']}")
        super().__init__("\n".join(lines))


class SchemaChangeReport:
    """`target/schema_changes.json`: per model, the diff, the plan, what ran, any violation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: Dict[str, Dict[str, Any]] = {}

    def record(self, target_path: Path, unique_id: str, entry: Dict[str, Any]) -> None:
        with self._lock:
            self._entries.setdefault(unique_id, {}).update(entry)
            target_path.mkdir(parents=True, exist_ok=True)
            path = target_path / "schema_changes.json"
            path.write_text(json.dumps({"models": self._entries}, indent=2, default=str))


REPORT = SchemaChangeReport()
