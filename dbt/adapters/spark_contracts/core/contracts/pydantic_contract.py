"""A Pydantic v2 class as a model's contract (dlt's mapping): its fields become the expected
columns (`types.Struct`), its field constraints `checks.ColumnRules`, its `extra` setting the
`columns` mode; `data_type` (what happens to a value that fails validation) defaults to freeze.

Spark-free. The only impure step is importing the class named by the `pydantic_contract` config
(`package.module:ClassName`): the module is imported from the dbt project root, which is added
to the end of `sys.path` (installed packages of the same name win), so a project keeps its
contracts beside its models, e.g. `contracts/orders.py` -> `contracts.orders:Order`.

Mapping (annotation -> Spark type): bool BOOLEAN, int BIGINT, float DOUBLE, str STRING, bytes
BINARY, date DATE, datetime TIMESTAMP, Decimal DECIMAL(max_digits, decimal_places) (38,18 when
unconstrained), UUID STRING, a str/int Enum STRING/BIGINT (values checked), Literal[...] the
literals' type (values checked), nested BaseModel STRUCT, list/set/frozenset/tuple[X, ...]
ARRAY<X>, dict[K, V] MAP<K, V>, Optional[X] / X | None a nullable X (any other field is
required: a NULL breaks it). Anything else (Any, unions of types, time, custom classes,
validator functions) has no Spark equivalent and is an error naming the model and the field.
A field's constraints become SQL rules in `pydantic_constraints.py`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import importlib
import sys
import threading
import types as pytypes
import typing
import uuid
from dataclasses import dataclass
from typing import Any, Literal, Union

from dbt.adapters.spark_contracts.core.contracts.checks import (
    COLLECTION,
    ELEMENT,
    KEY,
    TEXT,
    VALUE,
    ColumnRules,
    Each,
    InField,
    Matches,
    Required,
    Rule,
)
from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract
from dbt.adapters.spark_contracts.core.contracts.decision import Declared
from dbt.adapters.spark_contracts.core.contracts.pydantic_constraints import (
    Unmappable,
    decimal_type,
    field_constraints,
    general_metadata,
    one_of,
)
from dbt.adapters.spark_contracts.core.schema.types import (
    Array,
    Field,
    Map,
    Primitive,
    SparkType,
    Struct,
    sql_string,
)
from dbt.adapters.spark_contracts.core.settings.config import ConfigError

CONFIG_KEY = "pydantic_contract"
# dlt: extra=forbid -> freeze, ignore -> discard_value, allow -> evolve (ignore is Pydantic's default)
EXTRA_TO_COLUMNS = {
    "forbid": ContractMode.FREEZE,
    "ignore": ContractMode.DISCARD_VALUE,
    "allow": ContractMode.EVOLVE,
}
_SYS_PATH_LOCK = threading.Lock()
_PRIMITIVES: dict[Any, str] = {
    bool: "boolean",
    int: "bigint",
    float: "double",
    str: "string",
    bytes: "binary",
    dt.date: "date",
    dt.datetime: "timestamp",
    uuid.UUID: "string",
}


@dataclass(frozen=True)
class PydanticContract:
    """What a model's Pydantic class declares, in the contract engine's terms."""

    spec: str
    columns: Struct  # every field nullable: NULLs of required fields are rule violations
    rules: tuple[ColumnRules, ...]
    required: tuple[str, ...]  # fields without a default: the model must output them
    extra: str

    def base_contract(self) -> SchemaContract:
        """dlt's modes for a Pydantic model: columns from `extra`, data_type freeze."""
        return SchemaContract(columns=EXTRA_TO_COLUMNS[self.extra], data_type=ContractMode.FREEZE)

    def rules_of(self, column: str) -> ColumnRules | None:
        return next((r for r in self.rules if r.column.lower() == column.lower()), None)


# ------------------------------------------------------------------------------ import


def parse_spec(model: str, spec: Any) -> tuple[str, str]:
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise ConfigError(
            f"{model}: `{CONFIG_KEY}` must be a string 'package.module:ClassName'; got {spec!r}"
        )
    module, name = (part.strip() for part in spec.split(":"))
    if not module or not name.isidentifier():
        raise ConfigError(
            f"{model}: `{CONFIG_KEY}` must be a string 'package.module:ClassName'; got {spec!r}"
        )
    return module, name


def import_class(model: str, spec: Any, project_root: str | None) -> type:
    """The class `spec` names, its module imported with the dbt project root on `sys.path`."""
    module_name, class_name = parse_spec(model, spec)
    if project_root:
        with _SYS_PATH_LOCK:
            if project_root not in sys.path:
                sys.path.append(project_root)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(
            f"{model}: `{CONFIG_KEY}` {spec!r}: importing module {module_name!r} failed "
            f"({type(exc).__name__}: {exc}); the module is imported from the dbt project root "
            f"({project_root}) or the installed packages"
        ) from exc
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ConfigError(
            f"{model}: `{CONFIG_KEY}` {spec!r}: module {module_name!r} has no {class_name!r}"
        )
    return _as_model_class(model, spec, cls)


def _as_model_class(model: str, spec: str, cls: Any) -> type:
    from pydantic import BaseModel

    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        raise ConfigError(
            f"{model}: `{CONFIG_KEY}` {spec!r} is not a Pydantic v2 BaseModel subclass "
            f"(got {cls!r})"
        )
    return cls


def load_pydantic_contract(
    model: str, spec: Any, project_root: str | None = None
) -> PydanticContract:
    """The contract a model's `pydantic_contract` config declares; ConfigError names the model,
    the field and why (import failure, an annotation with no Spark type, a Python validator)."""
    return contract_from_class(model, str(spec), import_class(model, spec, project_root))


def contract_from_class(model: str, spec: str, cls: type) -> PydanticContract:
    _as_model_class(model, spec, cls)
    try:
        fields, rules, required = _model_fields(cls, "", ())
    except Unmappable as exc:
        raise ConfigError(
            f"{model}: `{CONFIG_KEY}` {spec!r}: field `{exc.path}` {exc.what}; mappable: bool, "
            "int, float, str, bytes, date, datetime, Decimal, UUID, str/int Enum, Literal, "
            "nested BaseModel, list/set/tuple[X, ...], dict[K, V], Optional[X]"
        ) from exc
    extra = cls.model_config.get("extra") or "ignore"  # type: ignore[attr-defined]
    column_rules = tuple(ColumnRules(f.name, r) for f, r in zip(fields, rules, strict=True) if r)
    return PydanticContract(spec, Struct(tuple(fields)), column_rules, required, str(extra))


# ------------------------------------------------------------------------------ mapping


def _model_fields(
    cls: type, prefix: str, seen: tuple[type, ...]
) -> tuple[list[Field], list[tuple[Rule, ...]], tuple[str, ...]]:
    if cls in seen:
        raise Unmappable(prefix.rstrip(".") or cls.__name__, "is a recursive model")
    decorators = cls.__pydantic_decorators__  # type: ignore[attr-defined]
    validated = [
        *(d.cls_var_name for d in decorators.model_validators.values()),
        *(d.cls_var_name for d in decorators.root_validators.values()),
    ]
    if validated:
        where = prefix.rstrip(".") or cls.__name__
        raise Unmappable(where, f"has model validator(s) {validated}, which cannot run in SQL")
    field_validated = {
        name for d in decorators.field_validators.values() for name in d.info.fields
    } | {name for d in decorators.validators.values() for name in d.info.fields}
    fields: list[Field] = []
    rules: list[tuple[Rule, ...]] = []
    required: list[str] = []
    for name, info in cls.model_fields.items():  # type: ignore[attr-defined]
        column = info.alias or name
        path = prefix + column
        if name in field_validated or "*" in field_validated:
            raise Unmappable(path, "has a field validator, which cannot run in SQL")
        spark_type, nullable, field_rules = _annotation(
            info.annotation, list(info.metadata), path, (*seen, cls)
        )
        if not nullable:
            field_rules = (Required(), *field_rules)
        fields.append(Field(column, spark_type, True))
        rules.append(field_rules)
        if info.is_required():
            required.append(column)
    return fields, rules, tuple(required)


def _strip_annotated(annotation: Any, metadata: list[Any]) -> tuple[Any, list[Any]]:
    while typing.get_origin(annotation) is typing.Annotated:
        base, *extra = typing.get_args(annotation)
        annotation, metadata = base, [*metadata, *extra]
    return annotation, metadata


def _annotation(
    annotation: Any, metadata: list[Any], path: str, seen: tuple[type, ...]
) -> tuple[SparkType, bool, tuple[Rule, ...]]:
    """(Spark type, nullable, rules) of one annotation with its constraint metadata."""
    annotation, metadata = _strip_annotated(annotation, metadata)
    origin = typing.get_origin(annotation)
    if origin is Union or origin is pytypes.UnionType:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            raise Unmappable(path, f"is a union {annotation!r}; only Optional[X] maps")
        spark_type, _, rules = _annotation(members[0], metadata, path, seen)
        return spark_type, True, rules
    if annotation is None or annotation is type(None):
        raise Unmappable(path, "is None only")
    spark_type, rules = _typed(annotation, metadata, path, seen)
    return spark_type, False, rules


def _nested(
    annotation: Any, path: str, seen: tuple[type, ...]
) -> tuple[SparkType, tuple[Rule, ...]]:
    spark_type, nullable, rules = _annotation(annotation, [], path, seen)
    return spark_type, rules if nullable else (Required(), *rules)


def _typed(
    annotation: Any, metadata: list[Any], path: str, seen: tuple[type, ...]
) -> tuple[SparkType, tuple[Rule, ...]]:
    from pydantic import BaseModel

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    general = general_metadata(metadata)
    if origin is Literal:
        return _literal(args, path), (*field_constraints(metadata, path, "value"), one_of(args))
    if origin in (list, set, frozenset, tuple) or annotation in (list, set, frozenset, tuple):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise Unmappable(path, f"is {annotation!r}; only tuple[X, ...] maps (to an array)")
        if not args:
            raise Unmappable(path, f"is {annotation!r} without an element type")
        element, element_rules = _nested(args[0], f"{path}.element", seen)
        rules = field_constraints(metadata, path, COLLECTION)
        if element_rules:
            rules = (*rules, Each(ELEMENT, element_rules))
        return Array(element), rules
    if origin is dict or annotation is dict:
        if len(args) != 2:
            raise Unmappable(path, f"is {annotation!r} without key and value types")
        key, key_rules = _nested(args[0], f"{path}.key", seen)
        value, value_rules = _nested(args[1], f"{path}.value", seen)
        key_rules = tuple(r for r in key_rules if not isinstance(r, Required))  # never NULL
        rules = field_constraints(metadata, path, COLLECTION)
        rules += (Each(KEY, key_rules),) if key_rules else ()
        rules += (Each(VALUE, value_rules),) if value_rules else ()
        return Map(key, value), rules
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        fields, field_rules, _ = _model_fields(annotation, f"{path}.", seen)
        nested = tuple(InField(f.name, r) for f, r in zip(fields, field_rules, strict=True) if r)
        return Struct(tuple(fields)), (*field_constraints(metadata, path, "value"), *nested)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = tuple(m.value for m in annotation)
        return _literal(values, path), (one_of(values),)
    if annotation is decimal.Decimal:
        return decimal_type(general, path), field_constraints(metadata, path, "value")
    if annotation in _PRIMITIVES:
        of = TEXT if annotation is str else "value"
        rules = field_constraints(metadata, path, of)
        if "pattern" in general:
            if annotation is not str:
                raise Unmappable(path, "has a pattern on a non-string type")
            pattern = str(general["pattern"])
            rules += (Matches(sql_string(pattern), f"pattern={pattern!r}"),)
        return Primitive(_PRIMITIVES[annotation]), rules
    raise Unmappable(path, f"is {annotation!r}, which has no Spark type")


def _literal(values: tuple[Any, ...], path: str) -> SparkType:
    kinds = {bool if isinstance(v, bool) else type(v) for v in values}
    if len(kinds) != 1 or next(iter(kinds)) not in (str, int, bool):
        raise Unmappable(path, f"has literals {values!r}; all must be str, all int or all bool")
    return Primitive(_PRIMITIVES[next(iter(kinds))])


def as_declared(contract: PydanticContract) -> Declared:
    """The engine's view of the class: declared columns, rules and required fields."""
    return Declared(
        contract.columns, contract.rules, contract.required, f"{CONFIG_KEY} {contract.spec!r}"
    )


def declared_contract(
    model: str, spec: Any, project_root: str | None
) -> tuple[Declared | None, SchemaContract | None]:
    """(declared columns and rules, the modes the class implies) of a model's `pydantic_contract`
    config; (None, None) when the model sets none."""
    if spec is None:
        return None, None
    contract = load_pydantic_contract(model, spec, project_root)
    return as_declared(contract), contract.base_contract()
