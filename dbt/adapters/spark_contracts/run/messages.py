"""Messages a run logs or raises that are not errors of their own."""

from __future__ import annotations

from dbt.adapters.spark_contracts.core.evolution.operations import Plan


def blocked_message(unique_id: str, relation: str, table_format: str, plan: Plan) -> str:
    """The error of a plan with blocked changes (incremental runs, table rebuilds, snapshots)."""
    lines = [
        f"Schema change blocked for {unique_id} ({relation}, {table_format}); nothing was changed:"
    ]
    lines += [f"  - {blocked.describe()}" for blocked in plan.blocked]
    return "\n".join(lines)


def counts_not_observed_note(unique_id: str, method: str) -> str:
    """Said once per model run whose discard counts the connection cannot observe in the load."""
    return (
        f"{unique_id}: method {method} does not receive metrics observed in a statement: the "
        "discard counts come from the model's output staged once and counted by a query of "
        "their own (one more write and read of the output than method session)"
    )
