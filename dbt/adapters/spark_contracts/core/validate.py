"""One validation of a node's adapter configuration, run when dbt parses the project and again
when the node runs (pure). A feature with config keys of its own adds one check to `CHECKS`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .config import EvolutionSettings, resolve_settings
from .constraint_checks import check_constraints
from .contract import SchemaContract, resolve_contract


class Config(Protocol):
    """A node's resolved config: a dict at run time, dbt's node config object at parse time."""

    def get(self, key: str, default: Any = None) -> Any: ...


@dataclass(frozen=True)
class NodeConfig:
    """What the checks read of one node, after dbt merged its config hierarchy."""

    model: str  # how messages name the node: `unique_id (original_file_path)`
    config: Config
    run_vars: Mapping[str, Any]  # `read_run_vars`: the run vars as `var()` sees them
    constraints: Sequence[Mapping[str, Any]] = ()  # model-level, as dicts
    # every declared column (in order) -> its constraints, as dicts
    columns: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    language: str = "sql"
    connection_method: str | None = None


@dataclass(frozen=True)
class NodeSettings:
    """The validated settings a run uses."""

    contract: SchemaContract | None
    evolution: EvolutionSettings


def model_label(unique_id: str, path: str | None) -> str:
    return f"{unique_id} ({path})" if path else unique_id


def _check_constraints(node: NodeConfig) -> None:
    check_constraints(node.model, node.constraints, node.columns)


Check = Callable[[NodeConfig], None]

# Checks beyond schema_contract/schema_evolution/on_schema_change/run vars (which build the
# settings below). Each raises `ConfigError` naming the model, the key, the value, what is allowed.
CHECKS: tuple[Check, ...] = (_check_constraints,)


def validate_node_config(node: NodeConfig) -> NodeSettings:
    """Raise `ConfigError` for the first bad key of the node; else the settings its run uses."""
    contract = resolve_contract(
        node.model, node.config.get("schema_contract"), node.run_vars.get("schema_contract")
    )
    evolution = resolve_settings(
        node.model,
        node.config.get("schema_evolution"),
        contract,
        node.config.get("on_schema_change"),
        node.run_vars,
    )
    for check in CHECKS:
        check(node)
    return NodeSettings(contract, evolution)
