"""schema_contract resolution: shorthand, mappings, run-level override, new-table rule, errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.contracts.contract import (
    ENTITIES,
    MODES,
    SHORTHAND_ENTITIES,
    ContractMode,
    SchemaContract,
    for_new_table,
    resolve_contract,
)
from dbt.adapters.spark_contracts.core.settings.config import ConfigError

E, F, R, V = (
    ContractMode.EVOLVE,
    ContractMode.FREEZE,
    ContractMode.DISCARD_ROW,
    ContractMode.DISCARD_VALUE,
)


def C(tables=E, columns=E, data_type=E, quarantine=False) -> SchemaContract:
    return SchemaContract(tables, columns, data_type, quarantine)


@pytest.mark.parametrize(
    ("config", "override", "expected"),
    [
        (None, None, None),
        ("freeze", None, C(F, F, F)),
        ("discard_row", None, C(R, R, R)),
        ("discard_value", None, C(V, V, V)),
        ("evolve", None, C()),
        (" Freeze ", None, C(F, F, F)),
        ({}, None, C()),
        ({"columns": "freeze"}, None, C(columns=F)),
        ({"tables": "discard_row", "data_type": "discard_value"}, None, C(R, E, V)),
        ({"data_type": "freeze", "quarantine": True}, None, C(data_type=F, quarantine=True)),
        ({"quarantine": True}, None, C(quarantine=True)),
        # run-level string overrides every entity, keeps the model's quarantine
        ({"columns": "discard_row", "quarantine": True}, "freeze", C(F, F, F, True)),
        ("evolve", "discard_value", C(V, V, V)),
        # run-level mapping overrides only what it names
        ("freeze", {"columns": "evolve"}, C(F, E, F)),
        ({"tables": "discard_row"}, {"data_type": "freeze"}, C(R, E, F)),
        ({"quarantine": True}, {"quarantine": False}, C()),
        ("freeze", {}, C(F, F, F)),
        # run-level alone sets a contract
        (None, "freeze", C(F, F, F)),
        (None, {"columns": "discard_value"}, C(columns=V)),
    ],
)
def test_resolution_table(config, override, expected):
    assert resolve_contract("model.p.m", config, override) == expected


def test_to_dict_is_the_expanded_mapping():
    contract = resolve_contract("m", {"columns": "freeze", "quarantine": True}, None)
    assert contract is not None
    assert contract.to_dict() == {
        "tables": "evolve",
        "columns": "freeze",
        "data_type": "evolve",
        "data_tests": "evolve",
        "quarantine": True,
    }


def test_mode_accessor_and_unknown_entity():
    contract = C(F, R, V)
    assert [contract.mode(e) for e in ENTITIES] == [F, R, V, E]
    with pytest.raises(KeyError):
        contract.mode("rows")


def test_new_table_rule_evolves_columns_and_data_type_only():
    assert for_new_table(C(F, F, F, True)) == C(F, E, E, True)
    gated = SchemaContract(data_tests=R)
    assert for_new_table(gated).data_tests is R  # data tests bind on the creating run too
    assert for_new_table(C(R, V, R)) == C(R, E, E)


def test_discards_property():
    assert [m.discards for m in ContractMode] == [False, False, True, True]


ALLOWED = "allowed: evolve, freeze, discard_row, discard_value"


@pytest.mark.parametrize(
    ("config", "override", "fragments"),
    [
        ("froze", None, ["model.p.m", "`schema_contract` is 'froze'", ALLOWED]),
        (
            {"columns": "froze"},
            None,
            ["model.p.m", "`schema_contract.columns` is 'froze'", ALLOWED],
        ),
        (
            {"data_type": 1},
            None,
            ["`schema_contract.data_type` is 1", ALLOWED],
        ),
        (
            {"tables": None},
            None,
            ["`schema_contract.tables` is None", ALLOWED],
        ),
        (
            {"colums": "freeze", "rows": "evolve"},
            None,
            [
                "model.p.m",
                "`schema_contract` has unknown key(s) colums, rows",
                "allowed: tables, columns, data_type, data_tests, quarantine",
            ],
        ),
        (
            ["freeze"],
            None,
            [
                "model.p.m",
                "`schema_contract` must be a mode string (evolve, freeze, discard_row, "
                "discard_value) or a mapping with keys tables, columns, data_type, data_tests, "
                "quarantine",
                "got list ['freeze']",
            ],
        ),
        (True, None, ["`schema_contract` must be a mode string", "got bool True"]),
        (
            {"quarantine": "yes"},
            None,
            ["model.p.m", "`schema_contract.quarantine` must be true or false", "got str 'yes'"],
        ),
        (
            {"quarantine": 1},
            None,
            ["`schema_contract.quarantine` must be true or false", "got int 1"],
        ),
        (
            {"data_tests": "drop"},
            None,
            ["model.p.m", "`schema_contract.data_tests` is 'drop'", ALLOWED],
        ),
        (None, {"data_tests": 2}, ["`--vars schema_contract.data_tests` is 2", ALLOWED]),
        (None, "strict", ["model.p.m", "`--vars schema_contract` is 'strict'", ALLOWED]),
        (
            "freeze",
            {"columns": "nope"},
            ["`--vars schema_contract.columns` is 'nope'", ALLOWED],
        ),
        (None, 3, ["`--vars schema_contract` must be a mode string", "got int 3"]),
        (
            None,
            {"tables": "freeze", "extra": 1},
            ["`--vars schema_contract` has unknown key(s) extra"],
        ),
    ],
)
def test_invalid_values_name_model_key_and_allowed_values(config, override, fragments):
    with pytest.raises(ConfigError) as raised:
        resolve_contract("model.p.m", config, override)
    message = str(raised.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_invalid_override_fails_even_when_config_is_valid():
    with pytest.raises(ConfigError, match="--vars schema_contract"):
        resolve_contract("m", "freeze", ["evolve"])


modes = st.sampled_from(MODES)
partial_mappings = st.dictionaries(st.sampled_from(ENTITIES), modes)
configs = st.one_of(
    modes, partial_mappings, partial_mappings.map(lambda m: {**m, "quarantine": True})
)


@given(modes)
def test_shorthand_equals_full_mapping_without_data_tests(mode):
    full = {entity: mode for entity in SHORTHAND_ENTITIES}
    assert resolve_contract("m", mode, None) == resolve_contract("m", full, None)
    assert resolve_contract("m", None, mode) == resolve_contract("m", full, None)


@given(modes, modes)
def test_shorthand_never_sets_data_tests(data_tests, mode):
    """A project keeps dbt's after-the-load tests until it names `data_tests` (issue 42)."""
    assert resolve_contract("m", mode, None).data_tests is E
    named = resolve_contract("m", {"data_tests": data_tests}, mode)
    assert named.data_tests is ContractMode(data_tests)  # a string override keeps it too
    assert resolve_contract("m", mode, {"data_tests": data_tests}).data_tests is ContractMode(
        data_tests
    )


@given(configs, partial_mappings)
def test_override_mapping_changes_only_named_entities(config, override):
    base = resolve_contract("m", config, None)
    result = resolve_contract("m", config, override)
    assert base is not None and result is not None
    for entity in ENTITIES:
        expected = ContractMode(override[entity]) if entity in override else base.mode(entity)
        assert result.mode(entity) == expected
    assert result.quarantine == base.quarantine


@given(configs, modes)
def test_override_string_replaces_every_entity(config, mode):
    result = resolve_contract("m", config, mode)
    base = resolve_contract("m", config, None)
    assert result is not None and base is not None
    assert {result.mode(e) for e in SHORTHAND_ENTITIES} == {ContractMode(mode)}
    assert result.data_tests is base.data_tests


@given(partial_mappings)
def test_unset_entities_default_to_evolve(mapping):
    result = resolve_contract("m", mapping, None)
    assert result is not None
    for entity in ENTITIES:
        assert result.mode(entity) == ContractMode(mapping.get(entity, "evolve"))
