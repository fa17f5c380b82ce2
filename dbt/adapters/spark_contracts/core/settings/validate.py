"""One validation of a node's adapter configuration, run when dbt parses the project and again
when the node runs (pure). A feature with config keys of its own adds one check to `CHECKS`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dbt.adapters.spark_contracts.core.contracts.constraint_checks import check_constraints
from dbt.adapters.spark_contracts.core.contracts.contract import SchemaContract, resolve_contract
from dbt.adapters.spark_contracts.core.contracts.decision import (
    Declared,
)
from dbt.adapters.spark_contracts.core.contracts.pydantic_contract import declared_contract
from dbt.adapters.spark_contracts.core.evolution.capabilities import DEFAULT_FILE_FORMAT
from dbt.adapters.spark_contracts.core.evolution.change_policy import (
    ADDITIVE_KEY,
    DESTRUCTIVE_KEY,
    ChangePolicy,
    OnChange,
)
from dbt.adapters.spark_contracts.core.materialization.microbatch import check_microbatch_config
from dbt.adapters.spark_contracts.core.materialization.python_model import check_python_model
from dbt.adapters.spark_contracts.core.materialization.snapshot import (
    snapshot_refusal,
    unsupported_on_snapshots,
)
from dbt.adapters.spark_contracts.core.settings.config import (
    ConfigError,
    EvolutionSettings,
    resolve_settings,
)


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
    contract_enforced: bool = False  # dbt's `contract: {enforced: true}`
    language: str = "sql"
    connection_method: str | None = None
    project_root: str | None = None  # where a `pydantic_contract` module is imported from
    resource_type: str = "model"  # model, seed or snapshot
    materialized: str | None = None


@dataclass(frozen=True)
class NodeSettings:
    """The validated settings a run uses."""

    contract: SchemaContract | None
    evolution: EvolutionSettings
    declared: Declared | None = None  # a `pydantic_contract` class's columns and value rules


def model_label(unique_id: str, path: str | None) -> str:
    return f"{unique_id} ({path})" if path else unique_id


def _check_constraints(node: NodeConfig) -> None:
    check_constraints(node.model, node.constraints, node.columns)


def _check_evolution_columns_declared(node: NodeConfig) -> None:
    """With an enforced contract the declared columns are the model's output, so a
    `schema_evolution.columns` entry naming another column is known to be wrong before the run
    (without one, the run checks the entries against the compiled output)."""
    if not (node.contract_enforced and node.columns):
        return
    entries = (node.config.get("schema_evolution") or {}).get("columns") or {}
    declared = {name.lower() for name in node.columns}
    unknown = [str(name) for name in entries if str(name).lower() not in declared]
    if unknown:
        raise ConfigError(
            f"{node.model}: `schema_evolution.columns` names {', '.join(unknown)}, which the "
            f"model's enforced contract does not declare; allowed: {', '.join(node.columns)}"
        )


def _check_python_model(node: NodeConfig) -> None:
    check_python_model(node.model, node.language, node.connection_method)


Check = Callable[[NodeConfig], None]

# Checks beyond schema_contract/schema_evolution/on_schema_change/run vars (which build the
# settings below, so a check may read those keys as valid). Each raises `ConfigError` naming the
# model, the key, the bad value and what is allowed.
CONTRACT_KEYS = ("schema_contract", "schema_evolution", "pydantic_contract")


def _check_materialization_support(node: NodeConfig) -> None:
    """Keys a materialization would otherwise ignore fail here instead (never skipped silently)."""
    if node.resource_type == "seed":
        keys = [k for k in CONTRACT_KEYS if node.config.get(k) is not None]
        if keys:
            raise ConfigError(
                f"{node.model}: {', '.join(keys)} is not supported on seeds (dbt's seed "
                "loads its CSV as is); allowed on models and snapshots"
            )
        return
    if node.config.get("pydantic_contract") is not None and (
        node.resource_type == "snapshot" or node.materialized == "view"
    ):
        what = "snapshots" if node.resource_type == "snapshot" else "views"
        raise ConfigError(
            f"{node.model}: pydantic_contract is not supported on {what}; allowed on table and "
            "incremental models (use schema_contract freeze here)"
        )
    if node.resource_type == "snapshot":
        contract = resolve_contract(
            node.model, node.config.get("schema_contract"), node.run_vars.get("schema_contract")
        )
        refused = unsupported_on_snapshots(contract) if contract is not None else []
        if refused:
            raise ConfigError(snapshot_refusal(node.model, refused))


# Table formats that store a VARIANT column. Probed on Spark 4.1.1 with the Hive metastore the
# adapter uses: Delta and Iceberg (v3) do; a parquet table's ALTER TABLE ADD COLUMNS (c VARIANT)
# is refused by the metastore ("types incompatible with the existing columns"); ORC and CSV
# refuse VARIANT columns.
VARIANT_FORMATS = ("delta", "iceberg")


def check_native_variants(node: NodeConfig, contract: SchemaContract | None) -> None:
    """`variant_columns: native` needs a format that stores VARIANT; an Iceberg model whose
    `tbl_properties` pin a format version before v3 cannot hold one either."""
    if contract is None or not contract.native_variants:
        return
    file_format = str(node.config.get("file_format") or DEFAULT_FILE_FORMAT).lower()
    if file_format not in VARIANT_FORMATS:
        raise ConfigError(
            f"{node.model}: `schema_contract.variant_columns` is 'native', but file_format "
            f"{file_format!r} cannot store a VARIANT column; use variant_columns: typed, or a "
            f"file_format of {', '.join(VARIANT_FORMATS)}"
        )
    # unset: the adapter's default, merge on Iceberg (impl.default_incremental_strategy), which
    # scans its target when the model has a unique_key (without one it appends)
    # a microbatch batch on Iceberg replaces its window by a merge, which scans its target too
    strategy = str(node.config.get("incremental_strategy") or "").lower()
    merges = strategy in ("merge", "microbatch") or (
        not strategy and bool(node.config.get("unique_key"))
    )
    if file_format == "iceberg" and node.materialized == "incremental" and merges:
        kind = "microbatch" if strategy == "microbatch" else "merge"
        raise ConfigError(
            f"{node.model}: `schema_contract.variant_columns` is 'native' on an Iceberg {kind} "
            "model: Iceberg 1.12 cannot scan a table whose new VARIANT column no data file "
            "holds yet (NullPointerException in BaseScan.includeColumnStats, or in Schema."
            f"findField planning a merge), and a {kind} scans its target first; use "
            "variant_columns: typed, or incremental_strategy append"
        )
    properties = node.config.get("tbl_properties") or {}
    version = str(properties.get("format-version", "")).strip() if file_format == "iceberg" else ""
    if version.isdigit() and int(version) < 3:
        raise ConfigError(
            f"{node.model}: `schema_contract.variant_columns` is 'native', but tbl_properties "
            f"pin Iceberg format-version {version}, which cannot store a VARIANT column; set "
            "'format-version': '3', or use variant_columns: typed"
        )


def _check_microbatch(node: NodeConfig) -> None:
    check_microbatch_config(node.model, node.config)


CHECKS: tuple[Check, ...] = (
    _check_constraints,
    _check_evolution_columns_declared,
    _check_python_model,
    _check_microbatch,
)


def validate_node_config(node: NodeConfig) -> NodeSettings:
    """Raise `ConfigError` for the first bad key of the node; else the settings its run uses."""
    _check_materialization_support(node)  # first: a refused key is not loaded at all
    declared, base = declared_contract(
        node.model, node.config.get("pydantic_contract"), node.project_root
    )
    contract = resolve_contract(
        node.model,
        node.config.get("schema_contract"),
        node.run_vars.get("schema_contract"),
        base,
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
    check_native_variants(node, contract)
    _check_snapshot_policy(node, evolution.policy.changes)
    return NodeSettings(contract, evolution, declared)


def _check_snapshot_policy(node: NodeConfig, changes: ChangePolicy) -> None:
    """A snapshot records its source's columns as they are: `ignore` would record false
    changes (a column it leaves out reads as changed on every `check_cols: all` run)."""
    if node.resource_type != "snapshot":
        return
    ignored = [
        key
        for key, setting in (
            (ADDITIVE_KEY, changes.on_additive),
            (DESTRUCTIVE_KEY, changes.on_destructive),
        )
        if setting is OnChange.IGNORE
    ]
    if ignored:
        raise ConfigError(
            f"{node.model}: `schema_evolution.{ignored[0]}` is 'ignore' on a snapshot, which "
            "records its source's columns as they are (ignoring a change would record false "
            "changes); allowed on snapshots: allow, warn, error"
        )
