"""Model configuration and run vars for schema evolution, validated into a `Policy` (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from dbt.adapters.spark_contracts.core.evolution.change_policy import (
    ADDITIVE_KEY,
    DESTRUCTIVE_KEY,
    ChangePolicy,
)
from dbt.adapters.spark_contracts.core.evolution.plan import (
    ON_SCHEMA_CHANGE,
    STRATEGIES,
    ColumnEvolution,
    Policy,
)

EVOLUTION_KEYS = ("strategy", "columns", ADDITIVE_KEY, DESTRUCTIVE_KEY)
COLUMN_KEYS = ("default", "backfill")
# Every run-level var the adapter reads, with its default when the run does not set it (the
# permission vars: None, so that a var the run gave wins over a model's change policy).
RUN_VAR_DEFAULTS: Mapping[str, Any] = {
    "allow_full_refresh": None,
    "allow_column_removal": None,
    "schema_evolution_dry_run": False,
    "schema_contract": None,
}


class ConfigError(ValueError):
    """A configuration value is wrong: the message names the model, the key and what is allowed."""


@dataclass(frozen=True)
class RunVars:
    allow_full_refresh: bool | None = None  # None: not given
    allow_column_removal: bool | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class EvolutionSettings:
    """What a model's run does with schema changes: §4 evolution, or dbt's on_schema_change."""

    policy: Policy
    on_schema_change: str
    uses_evolution: bool  # schema_evolution or schema_contract set: §4 semantics
    dry_run: bool


def _as_bool(model: str, key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{model}: --vars `{key}` must be true or false, got {value!r}")


def _given_bool(model: str, key: str, value: Any) -> bool | None:
    return None if value is None else _as_bool(model, key, value)


def read_run_vars(var: Callable[[str, Any], Any]) -> dict[str, Any]:
    """The run vars as dbt's `var(name, default)` resolves them for one node."""
    return {name: var(name, default) for name, default in RUN_VAR_DEFAULTS.items()}


def parse_run_vars(model: str, raw: Mapping[str, Any]) -> RunVars:
    return RunVars(
        allow_full_refresh=_given_bool(model, "allow_full_refresh", raw.get("allow_full_refresh")),
        allow_column_removal=_given_bool(
            model, "allow_column_removal", raw.get("allow_column_removal")
        ),
        dry_run=_as_bool(
            model, "schema_evolution_dry_run", raw.get("schema_evolution_dry_run", False)
        ),
    )


def _parse_columns(model: str, raw: Any) -> dict[str, ColumnEvolution]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{model}: `schema_evolution.columns` must be a mapping of column name to "
            f"{{default: <SQL>, backfill: <SQL>}}, got {type(raw).__name__} {raw!r}"
        )
    columns: dict[str, ColumnEvolution] = {}
    for name, given in raw.items():
        entry = _keyed(model, f"schema_evolution.columns.{name}", given, COLUMN_KEYS)
        values = {}
        for key in COLUMN_KEYS:
            value = entry.get(key)
            if value is not None and not isinstance(value, (str, int, float)):
                raise ConfigError(
                    f"{model}: `schema_evolution.columns.{name}.{key}` must be a SQL expression "
                    f'(a string such as "\'pending\'" or "0"), got {value!r}'
                )
            values[key] = None if value is None else str(value)
        columns[str(name)] = ColumnEvolution(**values)
    return columns


def _keyed(model: str, key: str, value: Any, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    """`value` (the config at `key`) as a mapping whose keys are all `allowed`."""
    listed = ", ".join(allowed)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{model}: `{key}` must be a mapping with keys {listed}, got {value!r}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise ConfigError(
            f"{model}: `{key}` has unknown key(s) {', '.join(unknown)}; allowed: {listed}"
        )
    return value


def parse_policy(model: str, schema_evolution: Any, run_vars: RunVars) -> Policy:
    given = {} if schema_evolution is None else schema_evolution
    raw = _keyed(model, "schema_evolution", given, EVOLUTION_KEYS)
    strategy = raw.get("strategy") or "alter_and_backfill"
    if strategy not in STRATEGIES:
        raise ConfigError(
            f"{model}: `schema_evolution.strategy` is {strategy!r}; allowed: {', '.join(STRATEGIES)}"
        )
    try:
        changes = ChangePolicy.parse(model, raw)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return Policy(
        strategy=strategy,
        allow_full_refresh=run_vars.allow_full_refresh,
        allow_column_removal=run_vars.allow_column_removal,
        columns=_parse_columns(model, raw.get("columns")),
        changes=changes,
    )


def resolve_settings(
    model: str,
    schema_evolution: Any,
    schema_contract: Any,
    on_schema_change: Any,
    raw_vars: Mapping[str, Any],
) -> EvolutionSettings:
    run_vars = parse_run_vars(model, raw_vars)
    setting = on_schema_change or "ignore"
    if not isinstance(setting, str) or setting.lower() not in ON_SCHEMA_CHANGE:
        raise ConfigError(
            f"{model}: `on_schema_change` is {on_schema_change!r}; allowed: {', '.join(ON_SCHEMA_CHANGE)}"
        )
    policy = parse_policy(model, schema_evolution, run_vars)
    ignores = [key for key, value in policy.changes.to_dict().items() if value == "ignore"]
    if ignores and schema_contract is not None:
        raise ConfigError(
            f"{model}: `schema_evolution.{ignores[0]}: ignore` with a `schema_contract`; the "
            "contract decides what reaches the table: use its `columns` / `data_type` modes "
            "(discard_value, discard_row, freeze) instead, or set allow / warn / error"
        )
    return EvolutionSettings(
        policy=policy,
        on_schema_change=setting.lower(),
        uses_evolution=schema_evolution is not None or schema_contract is not None,
        dry_run=run_vars.dry_run,
    )


def fixed_path(config: Mapping[str, Any]) -> bool:
    """The model's table has a path of its own (`location_root`, or a `path` option): a table
    built beside it would be built at the same path."""
    options = config.get("options") or {}
    return bool(
        config.get("location_root") or (isinstance(options, Mapping) and options.get("path"))
    )
