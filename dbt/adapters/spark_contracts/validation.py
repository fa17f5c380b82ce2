"""dbt's side of config validation: gather a node's resolved config, as dbt parsed it or as a
materialization hands it over, and run core's one validation on it (`core/settings/validate.py`)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.factory import get_adapter_package_names
from dbt.exceptions import ParsingError

from dbt.adapters.spark_contracts.connection.errors import config_errors_as_compilation_errors
from dbt.adapters.spark_contracts.core.settings.config import ConfigError, read_run_vars
from dbt.adapters.spark_contracts.core.settings.validate import (
    NodeConfig,
    NodeSettings,
    model_label,
    validate_node_config,
)

# Resource types whose materializations this adapter runs (tests, sources, ... are not built).
BUILT_RESOURCE_TYPES = ("model", "seed", "snapshot")
MAX_LISTED = 20  # a bad --vars value fails every node: list this many, then count the rest

logger = AdapterLogger("SparkContracts")


def _as_dict(constraint: Any) -> Dict[str, Any]:
    return constraint if isinstance(constraint, dict) else constraint.to_dict()


def _column_constraints(column: Any) -> List[Dict[str, Any]]:
    raw = column.get("constraints") if isinstance(column, dict) else column.constraints
    return [_as_dict(c) for c in raw or []]


def _enforced(contract: Any) -> bool:
    """dbt's contract config: a dict in a materialization's `model`, an object at parse time."""
    if isinstance(contract, dict):
        return bool(contract.get("enforced"))
    return bool(getattr(contract, "enforced", False))


def _method(adapter: Any) -> Optional[str]:
    return getattr(adapter.config.credentials, "method", None)


def settings_at_run(adapter: Any, model: Dict[str, Any], run_vars: Dict[str, Any]) -> NodeSettings:
    """The run's settings from the materialization's `model` and run vars (validated again: the
    same checks as at parse time)."""
    node = NodeConfig(
        model=model_label(model.get("unique_id", "model"), model.get("original_file_path")),
        config=model.get("config") or {},
        run_vars=run_vars,
        constraints=[_as_dict(c) for c in model.get("constraints") or []],
        columns={
            name: _column_constraints(column)
            for name, column in (model.get("columns") or {}).items()
        },
        contract_enforced=_enforced((model.get("config") or {}).get("contract")),
        language=str(model.get("language") or "sql"),
        connection_method=_method(adapter),
        project_root=adapter.config.project_root,
        resource_type=str(model.get("resource_type") or "model"),
        materialized=(model.get("config") or {}).get("materialized"),
    )
    with config_errors_as_compilation_errors():
        return validate_node_config(node)


class _NoContext(dict):  # type: ignore[type-arg]
    """The empty rendering context of the `var()` below, in both of dbt's shapes: a mapping up
    to dbt-core 1.11, an object whose `_ctx` is that mapping from 1.12 on."""

    @property
    def _ctx(self) -> Dict[str, Any]:
        return self


def _run_vars(adapter: Any, node: Any) -> Dict[str, Any]:
    from dbt.context.providers import RuntimeVar  # dbt's own `var()`: project vars and --vars

    return read_run_vars(RuntimeVar(_NoContext(), adapter.config, node))


def _node_config(adapter: Any, node: Any, run_vars: Dict[str, Any]) -> NodeConfig:
    return NodeConfig(
        model=model_label(node.unique_id, node.original_file_path),
        config=node.config,
        run_vars=run_vars,
        constraints=[_as_dict(c) for c in getattr(node, "constraints", None) or []],
        columns={name: _column_constraints(column) for name, column in node.columns.items()},
        contract_enforced=_enforced(node.config.get("contract")),
        language=str(getattr(node, "language", None) or "sql"),
        connection_method=_method(adapter),
        project_root=adapter.config.project_root,
        resource_type=str(node.resource_type),
        materialized=node.config.get("materialized"),
    )


def validate_manifest(adapter: Any, manifest: Any) -> None:
    """Validate every node this adapter builds; raise one `ParsingError` listing each bad node.

    Nodes materialized by another package's (or the project's own) materialization are left
    alone: their config keys are not this adapter's to judge.
    """
    nodes = getattr(manifest, "nodes", None)
    if nodes is None:
        return  # a macro-only manifest: nothing is built from it
    ours = set(get_adapter_package_names(adapter.type()))
    project = adapter.config.project_name
    is_ours: Dict[str, bool] = {}
    run_vars: Dict[str, Dict[str, Any]] = {}  # `var()` differs only by the node's package
    errors: List[str] = []
    for node in nodes.values():
        if str(node.resource_type) not in BUILT_RESOURCE_TYPES:
            continue
        materialized = node.config.get("materialized")
        if materialized not in is_ours:
            macro = manifest.find_materialization_macro_by_name(
                project, materialized, adapter.type()
            )
            is_ours[materialized] = macro is not None and macro.package_name in ours
        if not is_ours[materialized]:
            continue
        if node.package_name not in run_vars:
            run_vars[node.package_name] = _run_vars(adapter, node)
        try:
            validate_node_config(_node_config(adapter, node, run_vars[node.package_name]))
        except ConfigError as exc:
            errors.append(str(exc))
    if errors:
        listed = sorted(errors)[:MAX_LISTED]
        if len(errors) > MAX_LISTED:
            listed.append(f"... and {len(errors) - MAX_LISTED} more node(s)")
        raise ParsingError("\n".join(listed))


def resolved_settings(adapter: Any, model: Dict[str, Any], run_vars: Dict[str, Any]) -> Any:
    """(schema contract, evolution settings, declared `pydantic_contract`) of this run."""
    settings = settings_at_run(adapter, model, run_vars)
    config = model.get("config", {})
    if settings.contract is not None and config.get("on_schema_change") not in (None, "ignore"):
        logger.warning(
            f"{model.get('unique_id', 'model')}: schema_contract is set, so on_schema_change "
            f"({config.get('on_schema_change')}) is ignored"
        )
    return settings.contract, settings.evolution, settings.declared
