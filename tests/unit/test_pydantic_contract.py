"""The Pydantic mapping (core/contracts/pydantic_contract.py, core/contracts/checks.py) and how the contract engine
uses it (core/contracts/enforce.py `Declared`), without Spark. Spark's side of the predicates is tested in
tests/functional/contracts/test_pydantic_contract.py."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import uuid
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from dbt.adapters.spark_contracts.core.contracts.checks import (
    ELEMENT,
    VALUE,
    Compare,
    Each,
    InField,
    Length,
    Matches,
    OneOf,
    Required,
    violated,
)
from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, resolve_contract
from dbt.adapters.spark_contracts.core.contracts.decision import (
    CREATE,
    FAIL,
    LOAD,
)
from dbt.adapters.spark_contracts.core.contracts.enforce import (
    decide,
)
from dbt.adapters.spark_contracts.core.contracts.load_select import (
    PENDING_KEPT,
    render_load_select,
)
from dbt.adapters.spark_contracts.core.contracts.pydantic_contract import (
    as_declared,
    contract_from_class,
    declared_contract,
    load_pydantic_contract,
)
from dbt.adapters.spark_contracts.core.evolution.plan import Policy
from dbt.adapters.spark_contracts.core.materialization.create_run import plan_create
from dbt.adapters.spark_contracts.core.materialization.run_plan import RunDecision, RunInputs
from dbt.adapters.spark_contracts.core.materialization.write_path import WritePath
from dbt.adapters.spark_contracts.core.schema.diff import SchemaDiff, diff_schemas
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.schema.types import (
    Array,
    Decimal,
    Map,
    Primitive,
    SparkType,
    Struct,
)
from dbt.adapters.spark_contracts.core.schema.types import (
    Field as SField,
)
from dbt.adapters.spark_contracts.core.settings.config import ConfigError, EvolutionSettings

M = "model.p.orders"


def contract_of(cls: type) -> Any:
    return contract_from_class(M, f"x:{cls.__name__}", cls)


def type_of(annotation: Any, **field: Any) -> SparkType:
    cls = create_model("T", v=(annotation, Field(**field)))
    column = contract_of(cls).columns.field("v")
    assert column is not None
    return column.type


class Status(str, enum.Enum):
    NEW = "new"
    PAID = "paid"


class Inner(BaseModel):
    a: int
    b: Optional[str] = None


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (bool, Primitive("boolean")),
        (int, Primitive("bigint")),
        (float, Primitive("double")),
        (str, Primitive("string")),
        (bytes, Primitive("binary")),
        (dt.date, Primitive("date")),
        (dt.datetime, Primitive("timestamp")),
        (uuid.UUID, Primitive("string")),
        (decimal.Decimal, Decimal(38, 18)),
        (Status, Primitive("string")),
        (Literal[1, 2], Primitive("bigint")),
        (Literal["a"], Primitive("string")),
        (Optional[int], Primitive("bigint")),
        (int | None, Primitive("bigint")),
        (list[str], Array(Primitive("string"))),
        (set[int], Array(Primitive("bigint"))),
        (tuple[float, ...], Array(Primitive("double"))),
        (dict[str, int], Map(Primitive("string"), Primitive("bigint"))),
        (
            list[Optional[Inner]],
            Array(Struct((SField("a", Primitive("bigint")), SField("b", Primitive("string"))))),
        ),
        (Annotated[int, Field(ge=0)], Primitive("bigint")),
    ],
)
def test_annotation_to_spark_type(annotation: Any, expected: SparkType) -> None:
    assert type_of(annotation) == expected


def test_decimal_digits_and_places() -> None:
    assert type_of(decimal.Decimal, max_digits=10, decimal_places=2) == Decimal(10, 2)
    assert type_of(decimal.Decimal, decimal_places=4) == Decimal(38, 4)


class Address(BaseModel):
    city: str
    zip: str = Field(max_length=5, pattern=r"^\d+$")


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int = Field(ge=1)
    status: Literal["new", "paid"]
    qty: Optional[int] = Field(default=None, ge=0, le=100)
    address: Optional[Address] = None
    tags: list[Annotated[str, Field(max_length=8)]] = Field(default=[], max_length=3)
    scores: dict[str, Annotated[float, Field(gt=0)]] = {}
    renamed: Optional[str] = Field(default=None, alias="Renamed", min_length=2)


def test_class_to_columns_rules_and_required() -> None:
    c = contract_of(Order)
    assert c.columns.names == ("id", "status", "qty", "address", "tags", "scores", "Renamed")
    assert all(f.nullable for f in c.columns.fields)  # NULLs are checked as rules
    assert c.required == ("id", "status")
    rules = {r.column: r.rules for r in c.rules}
    assert rules["id"] == (Required(), Compare(">=", "1", "ge=1"))
    assert rules["status"] == (Required(), OneOf(("'new'", "'paid'"), "one of ['new', 'paid']"))
    assert rules["qty"] == (Compare(">=", "0", "ge=0"), Compare("<=", "100", "le=100"))
    assert rules["address"] == (
        InField("city", (Required(),)),
        InField(
            "zip",
            (
                Required(),
                Length("<=", 5, "text", "max_length=5"),
                Matches("'^\\\\d+$'", "pattern='^\\\\d+$'"),
            ),
        ),
    )
    assert rules["tags"] == (
        Required(),
        Length("<=", 3, "collection", "max_length=3"),
        Each(ELEMENT, (Required(), Length("<=", 8, "text", "max_length=8"))),
    )
    assert rules["scores"] == (
        Required(),
        Each(VALUE, (Required(), Compare(">", "0", "gt=0"))),
    )
    assert rules["Renamed"] == (Length(">=", 2, "text", "min_length=2"),)
    assert c.rules_of("ADDRESS") is not None
    described = c.rules_of("address").describe()  # type: ignore[union-attr]
    assert (
        described
        == "city: required (not Optional), zip: required (not Optional), zip: max_length=5, zip: pattern='^\\\\d+$'"
    )


@pytest.mark.parametrize(
    ("extra", "columns"),
    [
        ("forbid", ContractMode.FREEZE),
        ("ignore", ContractMode.DISCARD_VALUE),
        ("allow", ContractMode.EVOLVE),
        (None, ContractMode.DISCARD_VALUE),  # Pydantic's default is ignore
    ],
)
def test_extra_maps_to_columns_mode_and_data_type_freezes(
    extra: str | None, columns: ContractMode
) -> None:
    config = ConfigDict(extra=extra) if extra else ConfigDict()  # type: ignore[typeddict-item]
    cls = create_model("E", __config__=config, v=(int, ...))
    base = contract_of(cls).base_contract()
    assert (base.tables, base.columns, base.data_type) == (
        ContractMode.EVOLVE,
        columns,
        ContractMode.FREEZE,
    )


def test_schema_contract_overrides_the_class_entity_by_entity() -> None:
    base = contract_of(Order).base_contract()
    assert resolve_contract(M, None, None, base) == base
    over = resolve_contract(M, {"data_type": "discard_row", "quarantine": True}, None, base)
    assert over is not None
    assert (over.columns, over.data_type, over.quarantine) == (
        ContractMode.FREEZE,
        ContractMode.DISCARD_ROW,
        True,
    )
    run = resolve_contract(M, {"data_type": "discard_row"}, "evolve", base)
    assert run is not None and run.columns is ContractMode.EVOLVE


# ------------------------------------------------------------------ what fails, and how


class WithTime(BaseModel):
    id: int
    opened: dt.time


class WithUnion(BaseModel):
    nested: Optional[Inner] = None
    v: Union[int, str]


class WithAny(BaseModel):
    v: Any


class WithValidator(BaseModel):
    v: int

    @field_validator("v")
    @classmethod
    def positive(cls, value: int) -> int:
        return value


class WithModelValidator(BaseModel):
    v: int

    @model_validator(mode="after")
    def check(self) -> WithModelValidator:
        return self


class DeepBad(BaseModel):
    inner: list[WithTime]


class Digits(BaseModel):
    d: decimal.Decimal = Field(max_digits=5)


class LengthOnInt(BaseModel):
    n: int = Field(max_length=3)


class Recursive(BaseModel):
    child: Optional[Recursive] = None


@pytest.mark.parametrize(
    ("cls", "field", "why"),
    [
        (WithTime, "opened", "no Spark type"),
        (WithUnion, "v", "union"),
        (WithAny, "v", "no Spark type"),
        (WithValidator, "v", "field validator"),
        (WithModelValidator, "WithModelValidator", "model validator"),
        (DeepBad, "inner.element.opened", "no Spark type"),
        (Digits, "d", "decimal_places"),
        (LengthOnInt, "n", "length"),
        (Recursive, "child", "recursive"),
    ],
)
def test_unmappable_names_model_and_field(cls: type, field: str, why: str) -> None:
    with pytest.raises(ConfigError) as raised:
        contract_of(cls)
    message = str(raised.value)
    assert message.startswith(f"{M}: `pydantic_contract`"), message
    assert f"field `{field}`" in message and why in message, message


def test_import_from_the_project_root(tmp_path: Any) -> None:
    package = tmp_path / "pc_unit_contracts"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "orders.py").write_text(
        "from pydantic import BaseModel\nclass Order(BaseModel):\n    id: int\nNOT_A_MODEL = 1\n"
    )
    loaded = load_pydantic_contract(M, "pc_unit_contracts.orders:Order", str(tmp_path))
    assert loaded.columns.names == ("id",)
    declared, base = declared_contract(M, "pc_unit_contracts.orders:Order", str(tmp_path))
    assert declared is not None and base is not None and declared.required == ("id",)
    assert declared_contract(M, None, str(tmp_path)) == (None, None)
    for spec, why in [
        ("pc_unit_contracts.orders:Missing", "has no 'Missing'"),
        ("pc_unit_contracts.orders:NOT_A_MODEL", "not a Pydantic v2 BaseModel"),
        ("pc_unit_contracts.nope:Order", "importing module 'pc_unit_contracts.nope' failed"),
        ("pc_unit_contracts.orders", "'package.module:ClassName'"),
        (42, "'package.module:ClassName'"),
    ]:
        with pytest.raises(ConfigError) as raised:
            load_pydantic_contract(M, spec, str(tmp_path))
        assert str(raised.value).startswith(f"{M}: `pydantic_contract`") and why in str(
            raised.value
        )


# ------------------------------------------------------------------ predicates


def test_predicates_render_as_expected() -> None:
    assert violated("`v`", ()) is None
    assert violated("`v`", (Required(),)) == "coalesce(`v` IS NULL, false)"
    rules = (Compare(">=", "0", ""), Length("<=", 5, "text", ""))
    assert violated("`v`", rules) == (
        "coalesce((`v` IS NOT NULL AND NOT ((`v` >= 0) AND (char_length(`v`) <= 5))), false)"
    )
    nested = (InField("zip", (Matches("'^[0-9]+$'", ""),)), Each(ELEMENT, (Required(),)))
    assert violated("`a`", nested) == (
        "coalesce((`a` IS NOT NULL AND ((`a`.`zip` IS NOT NULL AND NOT "
        "((regexp_like(`a`.`zip`, '^[0-9]+$')))))), false) OR "
        "coalesce((`a` IS NOT NULL AND exists(`a`, c0 -> coalesce(c0 IS NULL, false))), false)"
    )


def test_each_checks_the_elements_keys_or_values_of_a_collection():
    keys = Each("key", (Length("<=", 2, "text", "max_length=2"),))
    assert violated("`m`", (keys,)) == (
        "coalesce((`m` IS NOT NULL AND exists(map_keys(`m`), c0 -> coalesce((c0 IS NOT NULL "
        "AND NOT ((char_length(c0) <= 2))), false))), false)"
    )
    with pytest.raises(ValueError, match="unknown collection part"):
        Each("field", ())


leaf_rules = st.one_of(
    st.builds(
        Compare, st.sampled_from(("<", "<=", ">", ">=")), st.integers().map(str), st.just("")
    ),
    st.builds(
        Length, st.sampled_from(("<=", ">=")), st.integers(0, 9), st.just("text"), st.just("")
    ),
    st.builds(Matches, st.just("'^a'"), st.just("")),
    st.builds(
        OneOf, st.lists(st.integers().map(str), min_size=1, max_size=3).map(tuple), st.just("")
    ),
    st.just(Required()),
)
rules = st.recursive(
    st.lists(leaf_rules, max_size=3).map(tuple),
    lambda inner: st.lists(
        st.one_of(
            leaf_rules,
            st.builds(InField, st.sampled_from(("a", "b`c")), inner),
            st.builds(Each, st.sampled_from((ELEMENT, "key", VALUE)), inner),
        ),
        max_size=3,
    ).map(tuple),
    max_leaves=8,
)


def _balanced(sql: str) -> bool:
    depth, quoted = 0, None
    for char in sql:
        if quoted:
            quoted = None if char == quoted else quoted
        elif char in "'`":
            quoted = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0 and quoted is None


@given(rules)
@settings(max_examples=200, deadline=None)
def test_predicates_are_never_null_and_well_formed(generated: tuple[Any, ...]) -> None:
    sql = violated("`v`", generated)
    if sql is None:
        return
    assert _balanced(sql), sql
    # every disjunct is wrapped: the predicate is never NULL, whatever the value
    depth, starts = 0, [0]
    for i, char in enumerate(sql):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and sql.startswith(" OR ", i):
            starts.append(i + 4)
    assert all(sql.startswith("coalesce(", s) for s in starts), sql


# ------------------------------------------------ random classes: types round-trip the parser

PRIMS = {
    bool: "boolean",
    int: "bigint",
    float: "double",
    str: "string",
    bytes: "binary",
    dt.date: "date",
    dt.datetime: "timestamp",
}


def _annotations(depth: int) -> st.SearchStrategy[tuple[Any, SparkType]]:
    prims = st.sampled_from(list(PRIMS.items())).map(lambda kv: (kv[0], Primitive(kv[1])))
    if depth == 0:
        return prims
    inner = _annotations(depth - 1)
    return st.one_of(
        prims,
        inner.map(lambda a: (Optional[a[0]], a[1])),
        inner.map(lambda a: (list[a[0]], Array(a[1]))),  # type: ignore[valid-type]
        inner.map(lambda a: (dict[str, a[0]], Map(Primitive("string"), a[1]))),  # type: ignore[valid-type]
        st.lists(inner, min_size=1, max_size=3).map(_model),
    )


_counter = iter(range(10**9))


def _model(fields: list[tuple[Any, SparkType]]) -> tuple[Any, SparkType]:
    cls = create_model(
        f"N{next(_counter)}", **{f"f{i}": (a, ...) for i, (a, _) in enumerate(fields)}
    )
    return cls, Struct(tuple(SField(f"f{i}", t) for i, (_, t) in enumerate(fields)))


@given(st.lists(_annotations(3), min_size=1, max_size=4))
@settings(max_examples=100, deadline=None)
def test_random_classes_map_field_by_field_and_round_trip(
    fields: list[tuple[Any, SparkType]],
) -> None:
    cls, expected = _model(fields)
    columns = contract_of(cls).columns
    assert columns == expected
    assert parse_type(columns.to_sql()) == columns  # the DDL text parses back to the same type


# ------------------------------------------------------------------ the engine with Declared


def compiled(*fields: tuple[str, SparkType]) -> Struct:
    return Struct(tuple(SField(n, t) for n, t in fields))


STR, INT, BIG = Primitive("string"), Primitive("int"), Primitive("bigint")


class Small(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int = Field(ge=1)
    qty: Optional[int] = Field(default=None, le=100)


def _decide(base_override: Any, deployed: Struct | None, out: Struct) -> Any:
    declared, base = declared_contract(M, None, None)
    c = contract_of(Small)
    declared, base = as_declared(c), c.base_contract()
    contract = resolve_contract(M, base_override, None, base)
    assert contract is not None
    diff = diff_schemas(deployed, out) if deployed is not None else SchemaDiff()
    return decide(contract, deployed, out, diff, "delta", declared)


def test_new_table_is_checked_against_the_class() -> None:
    out = compiled(("id", INT), ("qty", STR))
    decision = _decide(None, None, out)
    assert decision.table_action == CREATE
    assert decision.target == compiled(("id", BIG), ("qty", BIG))  # declared types
    assert [c.handling for c in decision.value_checks] == ["freeze"]  # qty STRING into BIGINT
    assert [r.column for r in decision.rule_checks] == ["id", "qty"]
    sql = render_load_select(decision, "src", None, out, "r")
    assert "raise_error" in sql.select and "le=100" in sql.select
    assert (
        sql.violation_sample_sql is not None
        and "values break the contract" in sql.violation_sample_sql
    )


def test_extra_forbid_and_missing_required_fail() -> None:
    extra = _decide(None, None, compiled(("id", INT), ("coupon", STR)))
    assert extra.table_action == FAIL
    assert [(v.schema_entity, v.column) for v in extra.violations] == [("columns", "coupon")]
    missing = _decide(None, None, compiled(("qty", INT)))
    assert [(v.schema_entity, v.column) for v in missing.violations] == [("data_type", "id")]
    # data_type evolve validates nothing (dlt): neither required fields nor rules
    lax = _decide({"data_type": "evolve"}, None, compiled(("qty", INT)))
    assert lax.table_action == CREATE and lax.rule_checks == ()


def test_declared_columns_the_table_lacks_are_added_not_contract_breaches() -> None:
    deployed = compiled(("id", BIG))
    decision = _decide(None, deployed, compiled(("id", BIG), ("qty", INT)))
    assert decision.table_action == LOAD and decision.violations == ()
    assert [c.describe() for c in decision.evolve_diff] == ["column added `qty` BIGINT"]


def test_discard_modes_render_filters_and_nulls() -> None:
    out = compiled(("id", INT), ("qty", INT))
    rows = render_load_select(
        _decide({"data_type": "discard_row"}, None, out), "src", None, out, "r"
    )
    assert "WHERE NOT (" in rows.select and rows.discard_metrics[0][0] == "rows_discarded"
    values = render_load_select(
        _decide({"data_type": "discard_value"}, None, out), "src", None, out, "r"
    )
    # qty is Optional: nulled; id is required: NULL is no repair, so its row is dropped
    assert "CASE WHEN coalesce((CAST(`qty` AS BIGINT) IS NOT NULL" in values.select
    assert "WHERE NOT (coalesce(CAST(`id` AS BIGINT) IS NULL" in values.select


def _creating(
    override: Any, out: Struct, quarantine: bool = False, dry_run: bool = False
) -> RunDecision | None:
    c = contract_of(Small)
    if override is not None and quarantine:
        override = {**override, "quarantine": True}
    contract = resolve_contract(M, override, None, c.base_contract())
    inputs = RunInputs(
        relation="s.orders",
        view="orders__dbt_tmp",
        invocation_id="0123456789abcdef",
        table_format="delta",
        strategy="merge",  # ignored: the load is the table's CREATE
        deployed=Struct(()),
        properties={},
        compiled=out,
        settings=EvolutionSettings(Policy(), "ignore", True, dry_run),
        contract=contract,
        declared=as_declared(c),
    )
    return plan_create(inputs)


def test_a_creating_run_that_can_discard_is_planned_as_a_run() -> None:
    out = compiled(("id", INT), ("qty", INT))
    # nothing discards (freeze fails the CREATE itself), or a violation: no run planned
    assert _creating(None, out) is None
    assert _creating({"data_type": "discard_row"}, compiled(("qty", INT))) is None
    assert _creating({"data_type": "discard_row"}, out, dry_run=True) is None
    counted = _creating({"data_type": "discard_row"}, out)
    assert counted is not None and counted.violation is None
    assert counted.plan.is_empty and counted.write.path is WritePath.NO_CHANGE
    # staged once and counted there (a CTAS's observed metrics never reach the session)
    assert counted.stage == "s.orders__dbt_stage_0123456789ab" and not counted.quarantine_pending
    assert counted.load is not None and counted.load.source == counted.stage
    assert counted.load.discard_count_sql is not None
    # with the quarantine: every row once into the pending table, the CREATE reads the kept
    quarantined = _creating({"data_type": "discard_row"}, out, quarantine=True)
    assert quarantined is not None and quarantined.quarantine_pending
    assert quarantined.stage == "s.orders__quarantine__pending_0123456789ab"
    assert quarantined.load is not None
    assert quarantined.load.select.endswith(f"WHERE {PENDING_KEPT}")
    assert quarantined.load.pending_from("v") is not None
    values = _creating({"data_type": "discard_value"}, out)
    assert values is not None and values.load is not None
    assert [name for name, _ in values.load.discard_metrics] == [
        "rows_discarded",
        "values_discarded",
    ]


def test_node_validation_loads_only_what_a_node_sets(tmp_path: Any) -> None:
    """The one node validation (parse and run) imports the class a node names, nothing else."""
    from dbt.adapters.spark_contracts.core.settings.validate import NodeConfig, validate_node_config

    def node(config: dict[str, Any]) -> NodeConfig:
        return NodeConfig("model.p.parsed", config, {}, project_root=str(tmp_path))

    assert validate_node_config(node({})).declared is None  # nothing imported
    with pytest.raises(ConfigError) as raised:
        validate_node_config(node({"pydantic_contract": "pc_parse_absent.orders:Order"}))
    assert str(raised.value).startswith("model.p.parsed: `pydantic_contract`")


def test_a_length_rule_names_what_it_measures():
    """`Length` is a comparison of a string's or a collection's length; anything else is refused
    (it would otherwise compare the value itself)."""
    assert Length("<=", 5, "text", "").holds("x") == "char_length(x) <= 5"
    assert Length(">=", 2, "collection", "").holds("x") == "size(x) >= 2"
    for of, n in ((None, 5), ("bytes", 5), ("text", 2.5)):
        with pytest.raises(ValueError):
            Length("<=", n, of, "")  # type: ignore[arg-type]
