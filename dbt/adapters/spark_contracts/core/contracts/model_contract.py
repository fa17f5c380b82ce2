"""dbt's `contract: {enforced: true}` compared on typed schemas: nested types field by field
(struct fields, array element, map key and value), ignoring size, precision and scale as dbt does."""

from __future__ import annotations

from dataclasses import dataclass

from dbt.adapters.spark_contracts.core.schema.types import Array, Map, SparkType, Struct, type_kind

HEADERS = ("column_name", "definition_type", "contract_type", "mismatch_reason")


@dataclass(frozen=True)
class Mismatch:
    column_name: str
    definition_type: str
    contract_type: str
    mismatch_reason: str

    def row(self) -> tuple[str, str, str, str]:
        return (self.column_name, self.definition_type, self.contract_type, self.mismatch_reason)


def _show(t: SparkType | None) -> str:
    return "" if t is None else t.simple_string().upper()


def _compare(path: str, definition: SparkType, contract: SparkType) -> list[Mismatch]:
    if isinstance(definition, Struct) and isinstance(contract, Struct):
        return _compare_fields(path, definition, contract)
    if isinstance(definition, Array) and isinstance(contract, Array):
        return _compare(f"{path}.element", definition.element, contract.element)
    if isinstance(definition, Map) and isinstance(contract, Map):
        return _compare(f"{path}.key", definition.key, contract.key) + _compare(
            f"{path}.value", definition.value, contract.value
        )
    # kinds only: decimal(10,2) and decimal(12,4), varchar(5) and varchar(9) are the same to dbt
    if type_kind(definition) != type_kind(contract):
        return [Mismatch(path, _show(definition), _show(contract), "data type mismatch")]
    return []


def _compare_fields(prefix: str, definition: Struct, contract: Struct) -> list[Mismatch]:
    mismatches: list[Mismatch] = []
    dot = f"{prefix}." if prefix else ""
    for field in definition.fields:
        other = contract.field(field.name)
        if other is None:
            mismatches.append(
                Mismatch(f"{dot}{field.name}", _show(field.type), "", "missing in contract")
            )
        else:
            mismatches += _compare(f"{dot}{field.name}", field.type, other.type)
    for field in contract.fields:
        if definition.field(field.name) is None:
            mismatches.append(
                Mismatch(f"{dot}{field.name}", "", _show(field.type), "missing in definition")
            )
    return mismatches


def compare_model_contract(definition: Struct, contract: Struct) -> tuple[Mismatch, ...]:
    """`definition`: the model SQL's output; `contract`: the yml columns' types. Names compare
    case-insensitively (Spark resolution)."""
    return tuple(_compare_fields("", definition, contract))


def mismatch_table(mismatches: tuple[Mismatch, ...]) -> str:
    """dbt's markdown table of contract mismatches."""
    rows = [HEADERS, *(m.row() for m in mismatches)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADERS))]

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    separator = "| " + " | ".join("-" * w for w in widths) + " |"
    return "\n".join([line(rows[0]), separator, *(line(r) for r in rows[1:])])
