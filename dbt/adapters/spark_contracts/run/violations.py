"""What a run's freeze check found, as the violation its error and its report carry."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from dbt.adapters.spark_contracts.core.contracts.data_tests import GateCount
from dbt.adapters.spark_contracts.core.contracts.load_columns import COERCE_REASON
from dbt.adapters.spark_contracts.run.model_run import ModelRun
from dbt.adapters.spark_contracts.run.report import RunReport
from dbt.adapters.spark_contracts.run.run_errors import SchemaContractViolation


def value_violation(
    run: ModelRun, samples: List[Dict[str, Any]], counts: Sequence[GateCount] = ()
) -> Tuple[Dict[str, Any], List[Any]]:
    """The first sampled column's violation (its column, types and reason) and the values of
    that column the sample holds for that reason. `counts`: the run's counts per data test,
    where it has them (a freeze gate's failing rows)."""
    decision = run.contract
    assert decision is not None
    column = str(samples[0]["column_name"])
    reason = str(samples[0].get("reason") or COERCE_REASON)
    values = [
        row["value"]
        for row in samples
        if str(row["column_name"]) == column and str(row.get("reason") or COERCE_REASON) == reason
    ]
    gate = decision.gates.by_reason(reason)
    if gate is not None:  # one of the model's data tests (issue 42)
        failing = next((c.rows for c in counts if c.test == gate.test), None)
        rows = "rows" if failing is None else f"{failing} row{'s' if failing != 1 else ''}"
        violation = {
            "schema_entity": "data_tests",
            "contract_mode": "freeze",
            "column": gate.column,
            "deployed_type": None,
            "compiled_type": None,
            "reason": f"{rows} fail the data test {gate.reason} ({gate.test})",
            "data_test": gate.test,
            **({"failing_rows": failing} if failing is not None else {}),
        }
        return violation, values
    check = next((c for c in decision.value_checks if c.dotted.lower() == column.lower()), None)
    if reason != COERCE_REASON:  # a declared rule (pydantic_contract), not a coercion
        check = None
    violation = {
        "schema_entity": "data_type",
        "contract_mode": "freeze",
        "column": column,
        "deployed_type": check.deployed_type.to_sql() if check else None,
        "compiled_type": check.compiled_type.to_sql() if check else None,
        "reason": reason,
    }
    return violation, values


def raise_violation(
    report: RunReport,
    target_dir: Path,
    unique_id: str,
    relation: str,
    violation: Dict[str, Any],
    values: Any = (),
) -> None:
    """A `freeze` contract broken: the violation recorded in `target/schema_changes.json`, then
    `SchemaContractViolation` raised (nothing was written)."""
    error = SchemaContractViolation(unique_id, relation, violation, values)
    entry = {"violation": {**violation, "offending_values": [str(v) for v in values]}}
    report.record(target_dir, unique_id, entry)
    raise error
