"""Checks of a model's `constraints` that dbt itself leaves to run time or silently drops (pure).

dbt already rejects an unknown constraint type (on columns always; on the model when its contract
is enforced) and more than one column-level primary key. What it accepts but renders as nothing,
or as broken DDL, is caught here: a `check`/`custom` without `expression`, a model-level key
constraint without `columns` or naming a column the model does not declare, a `foreign_key`
that references nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dbt.adapters.spark_contracts.core.settings.config import ConfigError

NEEDS_EXPRESSION = ("check", "custom")
NEEDS_COLUMNS = ("not_null", "unique", "primary_key", "foreign_key")


def _needs_expression(model: str, key: str, constraint: Mapping[str, Any]) -> None:
    kind = constraint.get("type")
    expression = constraint.get("expression")
    if kind in NEEDS_EXPRESSION and not (isinstance(expression, str) and expression.strip()):
        what = "a boolean SQL expression" if kind == "check" else "the constraint's SQL"
        raise ConfigError(
            f"{model}: `{key}` is a `{kind}` constraint with expression {expression!r}; "
            f'allowed: {what}, e.g. `expression: "id > 0"`'
        )


def _references_something(model: str, key: str, constraint: Mapping[str, Any]) -> None:
    if constraint.get("type") != "foreign_key":
        return
    if constraint.get("expression") or (constraint.get("to") and constraint.get("to_columns")):
        return
    raise ConfigError(
        f"{model}: `{key}` is a `foreign_key` constraint that references nothing "
        f"(to: {constraint.get('to')!r}, to_columns: {constraint.get('to_columns')!r}); "
        "allowed: `to` with `to_columns`, or an `expression`"
    )


def _bare(name: str) -> str:
    """A column name as Spark resolves it: quotes (`from`, "from") off, case ignored."""
    stripped = name.strip()
    if len(stripped) > 1 and stripped[0] == stripped[-1] and stripped[0] in '`"':
        stripped = stripped[1:-1]
    return stripped.lower()


def _model_level_columns(
    model: str, key: str, constraint: Mapping[str, Any], declared: Sequence[str]
) -> None:
    columns = constraint.get("columns") or []
    if constraint.get("type") in NEEDS_COLUMNS and not columns:
        raise ConfigError(
            f"{model}: `{key}` is a model-level `{constraint.get('type')}` constraint with "
            f"columns {columns!r}; allowed: a list of the model's columns"
        )
    if not declared:
        return  # no columns declared: dbt requires them when the contract is enforced
    known = {_bare(name) for name in declared}
    unknown = [str(name) for name in columns if _bare(str(name)) not in known]
    if unknown:
        raise ConfigError(
            f"{model}: `{key}.columns` names {', '.join(unknown)}, which the model does not "
            f"declare; allowed: {', '.join(declared)}"
        )


def check_constraints(
    model: str,
    constraints: Sequence[Mapping[str, Any]],
    column_constraints: Mapping[str, Sequence[Mapping[str, Any]]],
) -> None:
    """Raise `ConfigError` for the first bad constraint, model-level first, then per column.

    `column_constraints` maps every declared column (in order) to its constraints.
    """
    declared = list(column_constraints)
    for index, constraint in enumerate(constraints):
        key = f"constraints[{index}]"
        _needs_expression(model, key, constraint)
        _references_something(model, key, constraint)
        _model_level_columns(model, key, constraint, declared)
    for column, its_constraints in column_constraints.items():
        for index, constraint in enumerate(its_constraints):
            key = f"columns.{column}.constraints[{index}]"
            _needs_expression(model, key, constraint)
            _references_something(model, key, constraint)
