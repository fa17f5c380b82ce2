"""What a schema contract decided for one run (SPEC §3), as frozen values: violations, the columns
it adds, the per-value checks, a declared contract's columns, the decision itself. Pure."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from dbt.adapters.spark_contracts.core.contracts.checks import ColumnRules
from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract
from dbt.adapters.spark_contracts.core.contracts.data_tests import (
    AttachedTests,
    Gates,
    plan_gates,
)
from dbt.adapters.spark_contracts.core.contracts.set_tests import GatedLoad
from dbt.adapters.spark_contracts.core.schema.diff import (
    Path,
    SchemaDiff,
)
from dbt.adapters.spark_contracts.core.schema.types import (
    Field,
    SparkType,
    Struct,
)

CREATE, FAIL, SKIP, LOAD = "create", "fail", "skip", "load"
# How a data_type change is handled; CAST (a safe widening into the deployed type) is not listed.
WIDEN, VARIANT = "widen", "variant"

VARIANT_INFIX = "__v_"
NATIVE_VARIANT_SUFFIX = "__v"  # `variant_columns: native`: one VARIANT column per column
_Key = tuple[str, ...]


def _key(path: Path) -> _Key:
    return tuple(segment.lower() for segment in path)


def _type_sql(t: SparkType | None) -> str | None:
    return None if t is None else t.to_sql()


@dataclass(frozen=True)
class ContractViolation:
    """A `freeze` broken before anything runs (dlt's DataValidationError context)."""

    schema_entity: str
    contract_mode: str
    column: str | None
    deployed_type: SparkType | None
    compiled_type: SparkType | None
    reason: str

    def describe(self) -> str:
        where = f" column `{self.column}`" if self.column else ""
        types = ""
        if self.deployed_type is not None or self.compiled_type is not None:
            deployed = _type_sql(self.deployed_type) or "(absent)"
            types = f" (deployed {deployed}, compiled {_type_sql(self.compiled_type)})"
        return f"{self.schema_entity} {self.contract_mode}{where}{types}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_entity": self.schema_entity,
            "contract_mode": self.contract_mode,
            "column": self.column,
            "deployed_type": _type_sql(self.deployed_type),
            "compiled_type": _type_sql(self.compiled_type),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class AddedColumn:
    """A compiled column or nested struct field the deployed table lacks, and its `columns` mode."""

    path: Path
    field: Field
    mode: ContractMode

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class ValueCheck:
    """A leaf whose compiled type does not safely cast into the deployed one (`data_type`).

    `handling`: `widen` (the planner widens the column), `variant` (non-coercible values go to
    `variant_column`), or the mode's value (`freeze`, `discard_row`, `discard_value`).
    """

    path: Path
    deployed_type: SparkType
    compiled_type: SparkType
    handling: str
    variant_column: str | None = None

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class Declared:
    """A contract that declares its columns (a Pydantic class): their types, pre-merged into the
    deployed schema before the contract is checked (dlt's authoritative model), per-column
    validity rules checked on every value under the `data_type` mode, and the fields the model
    must output. `origin` names the declaration in messages."""

    columns: Struct
    rules: tuple[ColumnRules, ...] = ()
    required: tuple[str, ...] = ()
    origin: str = "the declared contract"

    def reference(self, deployed: Struct | None) -> Struct:
        """The schema the contract checks against: the deployed table plus declared columns it
        lacks (the declared schema alone when there is no table)."""
        if deployed is None:
            return self.columns
        extra = tuple(f for f in self.columns.fields if deployed.field(f.name) is None)
        return Struct(deployed.fields + extra)


@dataclass(frozen=True)
class ContractDecision:
    """What one run does under its contract; `target` is the table schema after the planner."""

    contract: SchemaContract
    table_action: str
    table_format: str
    violations: tuple[ContractViolation, ...] = ()
    new_columns: tuple[AddedColumn, ...] = ()
    value_checks: tuple[ValueCheck, ...] = ()
    target: Struct | None = None
    evolve_diff: SchemaDiff = SchemaDiff()
    warnings: tuple[str, ...] = ()
    rule_checks: tuple[ColumnRules, ...] = ()  # checked under contract.data_type
    gates: Gates = Gates()  # the model's data tests, under contract.data_tests

    def with_gates(
        self, tests: AttachedTests | None, compiled: Struct, load: GatedLoad = GatedLoad()
    ) -> ContractDecision:
        """The decision with the model's data tests as gates on its load (issue 42); `load`:
        what the set tests read besides the load's rows (`plan_gates`)."""
        gates = plan_gates(tests, self.contract.data_tests, compiled, self.target, load)
        return replace(self, gates=gates)

    def rules_of(self, column: str) -> ColumnRules | None:
        return next((r for r in self.rule_checks if r.column.lower() == column.lower()), None)

    @property
    def variant_columns(self) -> tuple[str, ...]:
        names = (c.variant_column for c in self.value_checks if c.variant_column)
        return tuple(dict.fromkeys(names))

    def summary(self) -> str:
        mapping = ", ".join(f"{k}: {v}" for k, v in self.contract.to_dict().items())
        lines = [f"schema_contract {{{mapping}}} ({self.table_format}): {self.table_action}"]
        lines += [f"  violation: {v.describe()}" for v in self.violations]
        lines += [f"  new {n.dotted}: {n.mode.value}" for n in self.new_columns]
        for check in self.value_checks:
            types = f"{check.compiled_type.to_sql()} into {check.deployed_type.to_sql()}"
            extra = f" -> {check.variant_column}" if check.variant_column else ""
            lines.append(f"  data_type {check.dotted} ({types}): {check.handling}{extra}")
        lines += [f"  evolve: {change.describe()}" for change in self.evolve_diff]
        mode = self.contract.data_type.value
        lines += [f"  rules {r.column} ({r.describe()}): {mode}" for r in self.rule_checks]
        lines += self.gates.summary_lines()
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        rules = [{"column": r.column, "rules": r.describe()} for r in self.rule_checks]
        return {
            "contract": self.contract.to_dict(),
            "table_action": self.table_action,
            "table_format": self.table_format,
            "violations": [v.to_dict() for v in self.violations],
            "new_columns": [{"path": n.dotted, "mode": n.mode.value} for n in self.new_columns],
            "value_checks": [
                {
                    "path": c.dotted,
                    "deployed_type": c.deployed_type.to_sql(),
                    "compiled_type": c.compiled_type.to_sql(),
                    "handling": c.handling,
                    "variant_column": c.variant_column,
                }
                for c in self.value_checks
            ],
            "evolve": [change.describe() for change in self.evolve_diff],
            "warnings": list(self.warnings),
            **({"rule_checks": rules} if rules else {}),
            **(
                {"data_tests": self.gates.to_dict()}
                if self.gates.mode is not ContractMode.EVOLVE
                else {}
            ),
        }
