"""The one validation of a node's config (core/settings/validate.py): every bad key fails with a message
naming the model, the key, the bad value and what is allowed; good configs give the settings."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.contracts.contract import ENTITIES, MODES, ContractMode
from dbt.adapters.spark_contracts.core.evolution.plan import ON_SCHEMA_CHANGE, STRATEGIES
from dbt.adapters.spark_contracts.core.settings import validate
from dbt.adapters.spark_contracts.core.settings.config import (
    RUN_VAR_DEFAULTS,
    ConfigError,
    read_run_vars,
)
from dbt.adapters.spark_contracts.core.settings.validate import (
    NodeConfig,
    model_label,
    validate_node_config,
)

MODEL = model_label("model.p.m", "models/m.sql")
ALLOWED_MODES = ", ".join(MODES)


def node(
    config: dict[str, Any] | None = None,
    run_vars: dict[str, Any] | None = None,
    constraints: list[dict[str, Any]] | None = None,
    columns: dict[str, list[dict[str, Any]]] | None = None,
) -> NodeConfig:
    return NodeConfig(
        model=MODEL,
        config=config or {},
        run_vars=run_vars or {},
        constraints=constraints or [],
        columns=columns or {},
    )


def error_of(n: NodeConfig) -> str:
    with pytest.raises(ConfigError) as info:
        validate_node_config(n)
    message = str(info.value)
    assert message.startswith(f"{MODEL}: "), message  # names the model and its file
    return message


def test_model_label_names_the_file() -> None:
    assert model_label("model.p.m", "models/m.sql") == "model.p.m (models/m.sql)"
    assert model_label("model.p.m", None) == "model.p.m"


def test_good_config_gives_the_run_settings() -> None:
    settings = validate_node_config(
        node(
            {
                "schema_contract": {"tables": "evolve", "columns": "Freeze", "quarantine": True},
                "schema_evolution": {
                    "strategy": "full_refresh",
                    "columns": {"note": {"default": "'n/a'", "backfill": 0}},
                },
                "on_schema_change": "FAIL",
            },
            run_vars={"allow_column_removal": "true", "schema_contract": {"data_type": "freeze"}},
            constraints=[
                {"type": "check", "expression": "id > 0"},
                {"type": "not_null", "columns": ["ID"]},  # Spark resolves names case-insensitively
                {"type": "foreign_key", "columns": ["id"], "to": "ref('o')", "to_columns": ["id"]},
            ],
            columns={"id": [{"type": "not_null"}], "note": [{"type": "custom", "expression": "x"}]},
        )
    )
    assert settings.contract is not None
    assert settings.contract.columns is ContractMode.FREEZE
    assert settings.contract.data_type is ContractMode.FREEZE  # from the run var
    assert settings.contract.quarantine
    assert settings.evolution.policy.strategy == "full_refresh"
    assert settings.evolution.policy.allow_column_removal
    assert settings.evolution.policy.column("note").backfill == "0"
    assert settings.evolution.on_schema_change == "fail"
    assert settings.evolution.uses_evolution


def test_no_config_means_no_contract_and_dbt_semantics() -> None:
    settings = validate_node_config(node())
    assert settings.contract is None
    assert not settings.evolution.uses_evolution
    assert settings.evolution.on_schema_change == "ignore"


# (config, run vars, model constraints, column constraints) -> parts the message must hold
BAD = {
    "contract mode": (
        {"schema_contract": "fly"},
        {},
        [],
        {},
        ["`schema_contract`", "'fly'", f"allowed: {ALLOWED_MODES}"],
    ),
    "contract entity mode": (
        {"schema_contract": {"columns": "fly"}},
        {},
        [],
        {},
        ["`schema_contract.columns`", "'fly'", f"allowed: {ALLOWED_MODES}"],
    ),
    "contract entity": (
        {"schema_contract": {"colums": "freeze"}},
        {},
        [],
        {},
        [
            "`schema_contract`",
            "colums",
            "allowed: tables, columns, data_type, data_tests, quarantine",
        ],
    ),
    "contract type": (
        {"schema_contract": ["freeze"]},
        {},
        [],
        {},
        ["`schema_contract`", "['freeze']", ALLOWED_MODES],
    ),
    "contract quarantine": (
        {"schema_contract": {"quarantine": "yes"}},
        {},
        [],
        {},
        ["`schema_contract.quarantine`", "'yes'", "true or false"],
    ),
    "evolution key": (
        {"schema_evolution": {"stratgy": "full_refresh"}},
        {},
        [],
        {},
        ["`schema_evolution`", "stratgy", "allowed: strategy, columns"],
    ),
    "evolution strategy": (
        {"schema_evolution": {"strategy": "yolo"}},
        {},
        [],
        {},
        ["`schema_evolution.strategy`", "'yolo'", f"allowed: {', '.join(STRATEGIES)}"],
    ),
    "evolution not a mapping": (
        {"schema_evolution": False},
        {},
        [],
        {},
        ["`schema_evolution`", "False", "strategy, columns"],
    ),
    "evolution columns type": (
        {"schema_evolution": {"columns": ["note"]}},
        {},
        [],
        {},
        ["`schema_evolution.columns`", "['note']", "{default: <SQL>, backfill: <SQL>}"],
    ),
    "evolution column entry": (
        {"schema_evolution": {"columns": {"note": "'x'"}}},
        {},
        [],
        {},
        ["`schema_evolution.columns.note`", "\"'x'\"", "default, backfill"],
    ),
    "evolution column key": (
        {"schema_evolution": {"columns": {"note": {"defualt": "1"}}}},
        {},
        [],
        {},
        ["`schema_evolution.columns.note`", "defualt", "allowed: default, backfill"],
    ),
    "evolution default type": (
        {"schema_evolution": {"columns": {"note": {"default": ["a"]}}}},
        {},
        [],
        {},
        ["`schema_evolution.columns.note.default`", "['a']", "SQL expression"],
    ),
    "on_schema_change": (
        {"on_schema_change": "append"},
        {},
        [],
        {},
        ["`on_schema_change`", "'append'", f"allowed: {', '.join(ON_SCHEMA_CHANGE)}"],
    ),
    "on_schema_change type": (
        {"on_schema_change": 5},
        {},
        [],
        {},
        ["`on_schema_change`", "5", ", ".join(ON_SCHEMA_CHANGE)],
    ),
    "run var bool": (
        {},
        {"allow_full_refresh": "maybe"},
        [],
        {},
        ["`allow_full_refresh`", "'maybe'", "true or false"],
    ),
    "run var dry run": (
        {},
        {"schema_evolution_dry_run": 1},
        [],
        {},
        ["`schema_evolution_dry_run`", "1", "true or false"],
    ),
    "run var contract": (
        {"schema_contract": "freeze"},
        {"schema_contract": {"tables": "fly"}},
        [],
        {},
        ["`--vars schema_contract.tables`", "'fly'", f"allowed: {ALLOWED_MODES}"],
    ),
    "check without expression": (
        {},
        {},
        [{"type": "check"}],
        {"id": []},
        ["`constraints[0]`", "`check`", "None", "allowed: a boolean SQL expression"],
    ),
    "blank check on a column": (
        {},
        {},
        [],
        {"id": [{"type": "not_null"}, {"type": "check", "expression": " "}]},
        ["`columns.id.constraints[1]`", "`check`", "' '", "boolean SQL expression"],
    ),
    "custom without expression": (
        {},
        {},
        [{"type": "custom", "expression": ""}],
        {},
        ["`constraints[0]`", "`custom`", "''", "allowed: the constraint's SQL"],
    ),
    "model constraint without columns": (
        {},
        {},
        [{"type": "unique"}],
        {"id": []},
        ["`constraints[0]`", "`unique`", "[]", "allowed: a list of the model's columns"],
    ),
    "model constraint on an undeclared column": (
        {},
        {},
        [{"type": "check", "expression": "x > 0"}, {"type": "not_null", "columns": ["idd"]}],
        {"id": [], "note": []},
        ["`constraints[1].columns`", "idd", "allowed: id, note"],
    ),
    "foreign key to nothing": (
        {},
        {},
        [],
        {"id": [{"type": "foreign_key", "to": "ref('o')"}]},
        ["`columns.id.constraints[0]`", "`foreign_key`", "to_columns: None", "`to` with"],
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_config_names_model_key_value_and_allowed(case: str) -> None:
    config, run_vars, constraints, columns, parts = BAD[case]
    message = error_of(node(config, run_vars, constraints, columns))
    for part in parts:
        assert part in message, (part, message)


def test_evolution_columns_must_be_declared_when_the_contract_is_enforced() -> None:
    evolution = {"schema_evolution": {"columns": {"Note": {"default": "1"}, "nope": {}}}}
    declared = {"id": [], "note": []}
    enforced = NodeConfig(MODEL, evolution, {}, columns=declared, contract_enforced=True)
    message = error_of(enforced)
    assert "`schema_evolution.columns` names nope, which the model's enforced contract" in message
    assert "allowed: id, note" in message
    # without enforcement the declared columns may be partial: the run checks the output
    validate_node_config(NodeConfig(MODEL, evolution, {}, columns=declared))


def test_undeclared_columns_are_not_judged_without_declarations() -> None:
    # no columns declared in properties: nothing to compare with at parse time
    validate_node_config(node(constraints=[{"type": "not_null", "columns": ["id"]}]))


@given(entity=st.sampled_from(ENTITIES), mode=st.sampled_from(MODES), upper=st.booleans())
def test_every_entity_takes_every_mode(entity: str, mode: str, upper: bool) -> None:
    written = mode.upper() if upper else mode
    # the shorthand string sets every entity but data_tests (issue 42)
    values = (written, {entity: written}) if entity != "data_tests" else ({entity: written},)
    for value in values:
        settings = validate_node_config(node({"schema_contract": value}))
        assert settings.contract is not None
        assert settings.contract.mode(entity) is ContractMode(mode)


@given(entity=st.sampled_from(ENTITIES), value=st.text(max_size=12))
def test_any_other_mode_fails_naming_the_entity_and_value(entity: str, value: str) -> None:
    if value.strip().lower() in MODES:
        return
    message = error_of(node({"schema_contract": {entity: value}}))
    assert f"`schema_contract.{entity}` is {value!r}; allowed: {ALLOWED_MODES}" in message


@given(
    name=st.sampled_from([n for n in RUN_VAR_DEFAULTS if n != "schema_contract"]),
    value=st.one_of(st.booleans(), st.sampled_from(["true", "False", " TRUE "])),
)
def test_run_var_booleans_accept_bools_and_their_strings(name: str, value: Any) -> None:
    validate_node_config(node(run_vars={name: value}))


@given(
    name=st.sampled_from([n for n in RUN_VAR_DEFAULTS if n != "schema_contract"]),
    value=st.one_of(st.integers(), st.text(max_size=8), st.none()),
)
def test_run_var_booleans_reject_anything_else(name: str, value: Any) -> None:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return
    if value is None and name.startswith("allow_"):
        return  # a permission var given as null: not given (a model's change policy decides)
    message = error_of(node(run_vars={name: value}))
    assert f"`{name}` must be true or false, got {value!r}" in message


@given(setting=st.sampled_from(ON_SCHEMA_CHANGE), upper=st.booleans())
def test_on_schema_change_values(setting: str, upper: bool) -> None:
    written = setting.upper() if upper else setting
    settings = validate_node_config(node({"on_schema_change": written}))
    assert settings.evolution.on_schema_change == setting


def test_read_run_vars_asks_var_for_each_run_var_with_its_default() -> None:
    asked: list[tuple[str, Any]] = []

    def var(name: str, default: Any) -> Any:
        asked.append((name, default))
        return "freeze" if name == "schema_contract" else default

    assert read_run_vars(var) == {**RUN_VAR_DEFAULTS, "schema_contract": "freeze"}
    assert asked == list(RUN_VAR_DEFAULTS.items())


def test_a_check_added_to_checks_runs_after_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def pydantic_like(n: NodeConfig) -> None:
        seen.append(n.model)
        if n.config.get("extra_key") == "bad":
            raise ConfigError(f"{n.model}: `extra_key` is 'bad'; allowed: good")

    monkeypatch.setattr(validate, "CHECKS", (*validate.CHECKS, pydantic_like))
    validate_node_config(node({"extra_key": "good"}))
    assert seen == [MODEL]
    assert "`extra_key` is 'bad'" in error_of(node({"extra_key": "bad"}))
    # settings are validated first: a bad contract is reported before the extra check runs
    error_of(node({"schema_contract": "fly", "extra_key": "bad"}))
    assert seen == [MODEL, MODEL]


def test_quoted_constraint_columns_name_declared_columns() -> None:
    # dbt's quoted-column suite names `from` with its quotes; Spark resolves it as `from`
    for written in ("`from`", '"from"', "FROM"):
        constraints = [{"type": "not_null", "columns": [written]}]
        validate_node_config(node(constraints=constraints, columns={"id": [], "from": []}))
    with pytest.raises(ConfigError):
        validate_node_config(
            node(constraints=[{"type": "not_null", "columns": ["`fro`"]}], columns={"from": []})
        )
