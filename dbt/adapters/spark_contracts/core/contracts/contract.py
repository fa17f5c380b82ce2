"""Resolve a model's `schema_contract` (SPEC §2, §3): dlt's contract modes mapped onto dbt config.

dbt has already merged the config hierarchy (dbt_project.yml folders < properties yml <
`{{ config() }}`) into one value; the run-level `--vars '{schema_contract: ...}'` overrides it.
Pure: no dbt, no Spark. Bad values raise `ConfigError` naming the model, the key and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from dbt.adapters.spark_contracts.core.settings.config import ConfigError

# the entities a mode string (`schema_contract: freeze`) sets; `data_tests` is set only by name,
# so a project keeps dbt's after-the-load tests until it opts in (core/contracts/data_tests.py)
SHORTHAND_ENTITIES = ("tables", "columns", "data_type")
DATA_TESTS = "data_tests"
ENTITIES = (*SHORTHAND_ENTITIES, DATA_TESTS)
QUARANTINE = "quarantine"
VARIANT_COLUMNS = "variant_columns"
CONTRACT_KEYS = (*ENTITIES, QUARANTINE, VARIANT_COLUMNS)
# where `data_type: evolve` keeps a value that does not coerce: dlt's typed columns
# (`<col>__v_<type>`, one per type) or one native VARIANT column `<col>__v`
TYPED, NATIVE = "typed", "native"
VARIANT_STYLES = (TYPED, NATIVE)
CONFIG_KEY = "schema_contract"
RUN_KEY = "--vars schema_contract"


class ContractMode(Enum):
    """What a contract does when its entity changes (dlt's four modes)."""

    EVOLVE = "evolve"
    FREEZE = "freeze"
    DISCARD_ROW = "discard_row"
    DISCARD_VALUE = "discard_value"

    @property
    def discards(self) -> bool:
        return self in (ContractMode.DISCARD_ROW, ContractMode.DISCARD_VALUE)


MODES = tuple(m.value for m in ContractMode)
_ALLOWED_MODES = ", ".join(MODES)


@dataclass(frozen=True)
class SchemaContract:
    """The fully expanded contract of one model for one run."""

    tables: ContractMode = ContractMode.EVOLVE
    columns: ContractMode = ContractMode.EVOLVE
    data_type: ContractMode = ContractMode.EVOLVE
    quarantine: bool = False
    variant_columns: str = TYPED
    data_tests: ContractMode = ContractMode.EVOLVE

    @property
    def native_variants(self) -> bool:
        return self.variant_columns == NATIVE

    def mode(self, entity: str) -> ContractMode:
        """The mode of `tables`, `columns`, `data_type` or `data_tests`."""
        if entity not in ENTITIES:
            raise KeyError(f"unknown schema entity {entity!r}; expected one of {ENTITIES}")
        mode: ContractMode = getattr(self, entity)
        return mode

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping, as reported in `adapter_response.contract`."""
        return {
            "tables": self.tables.value,
            "columns": self.columns.value,
            "data_type": self.data_type.value,
            DATA_TESTS: self.data_tests.value,
            "quarantine": self.quarantine,
            **({VARIANT_COLUMNS: self.variant_columns} if self.native_variants else {}),
        }


@dataclass(frozen=True)
class _Partial:
    """A contract value as written: only the entities (and quarantine) it names."""

    modes: Mapping[str, ContractMode]
    quarantine: bool | None
    variant_columns: str | None = None

    def apply_to(self, contract: SchemaContract) -> SchemaContract:
        changes: dict[str, Any] = dict(self.modes)
        if self.quarantine is not None:
            changes[QUARANTINE] = self.quarantine
        if self.variant_columns is not None:
            changes[VARIANT_COLUMNS] = self.variant_columns
        return replace(contract, **changes)


def _shape_error(model: str, key: str, value: Any) -> ConfigError:
    return ConfigError(
        f"{model}: `{key}` must be a mode string ({_ALLOWED_MODES}) or a mapping with keys "
        f"{', '.join(CONTRACT_KEYS)}; got {type(value).__name__} {value!r}"
    )


def _parse_mode(model: str, key: str, value: Any) -> ContractMode:
    """A mode string, compared case-insensitively with surrounding blanks ignored."""
    if isinstance(value, str):
        for mode in ContractMode:
            if value.strip().lower() == mode.value:
                return mode
    raise ConfigError(f"{model}: `{key}` is {value!r}; allowed: {_ALLOWED_MODES}")


def _parse_quarantine(model: str, key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ConfigError(
        f"{model}: `{key}.{QUARANTINE}` must be true or false; got {type(value).__name__} {value!r}"
    )


def _parse_variant_columns(model: str, key: str, value: Any) -> str:
    if isinstance(value, str) and value.strip().lower() in VARIANT_STYLES:
        return value.strip().lower()
    raise ConfigError(
        f"{model}: `{key}.{VARIANT_COLUMNS}` is {value!r}; allowed: {', '.join(VARIANT_STYLES)}"
    )


def _parse(model: str, key: str, value: Any) -> _Partial:
    """A string is shorthand for every entity but `data_tests`; a mapping names some entities
    and quarantine."""
    if isinstance(value, str):
        mode = _parse_mode(model, key, value)
        return _Partial({entity: mode for entity in SHORTHAND_ENTITIES}, None)
    if not isinstance(value, Mapping):
        raise _shape_error(model, key, value)
    unknown = sorted(str(k) for k in value if k not in CONTRACT_KEYS)
    if unknown:
        raise ConfigError(
            f"{model}: `{key}` has unknown key(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(CONTRACT_KEYS)} (modes: {_ALLOWED_MODES})"
        )
    modes = {
        entity: _parse_mode(model, f"{key}.{entity}", value[entity])
        for entity in ENTITIES
        if entity in value
    }
    quarantine = value.get(QUARANTINE)
    if QUARANTINE in value:
        quarantine = _parse_quarantine(model, key, quarantine)
    variants = None
    if VARIANT_COLUMNS in value:
        variants = _parse_variant_columns(model, key, value[VARIANT_COLUMNS])
    return _Partial(modes, quarantine, variants)


def resolve_contract(
    model: str, config_value: Any, run_override: Any, base: SchemaContract | None = None
) -> SchemaContract | None:
    """The model's contract for this run, or None when neither config nor run vars set one.

    `config_value` is the model's resolved `schema_contract` config; `run_override` the run-level
    var: a string replaces every entity but `data_tests`, a mapping only the entities (and quarantine) it names.
    Entities set nowhere are `evolve` (dlt's default), or `base`'s modes when given (the modes a
    `pydantic_contract` class implies, which `schema_contract` then overrides entity by entity).
    """
    config = None if config_value is None else _parse(model, CONFIG_KEY, config_value)
    override = None if run_override is None else _parse(model, RUN_KEY, run_override)
    if config is None and override is None and base is None:
        return None
    contract = base or SchemaContract()
    for layer in (config, override):
        if layer is not None:
            contract = layer.apply_to(contract)
    return contract


def for_new_table(contract: SchemaContract) -> SchemaContract:
    """dlt's new-table rule: on the run that creates the table, columns and data_type evolve."""
    return replace(contract, columns=ContractMode.EVOLVE, data_type=ContractMode.EVOLVE)
