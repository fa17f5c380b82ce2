"""What `variant_columns: native` keeps of a value that does not coerce into its deployed type:
the value itself as a VARIANT, or, for struct fields, an object of the rejected leaves. Pure."""

from __future__ import annotations

from dbt.adapters.spark_contracts.core.contracts.checked_cast import checked_leaf
from dbt.adapters.spark_contracts.core.contracts.decision import (
    VARIANT,
    ContractDecision,
    _key,
)
from dbt.adapters.spark_contracts.core.schema.types import (
    Field,
    is_nested,
    quote_identifier,
    sql_string,
    through_structs,
)


def native_variant_value(decision: ContractDecision, ref: str, source: Field) -> str:
    """The VARIANT that `variant_columns: native` keeps of a column whose value does not coerce.

    A top-level value is kept as it is (`CAST(... AS VARIANT)`; a struct, array or map through
    `to_variant_object`). A rejected struct field is kept at its path inside an object,
    `{"field": value}` (`variant_get(s__v, '$.field', 'string')` reads it back): only the leaves
    that do not coerce carry their value, the other checked leaves are NULL. A field under an
    array or map keeps the whole column."""
    checks = [
        c
        for c in decision.value_checks
        if _key(c.path)[0] == source.name.lower() and c.handling == VARIANT
    ]
    whole = f"to_variant_object({ref})" if is_nested(source.type) else f"CAST({ref} AS VARIANT)"
    tree: dict[str, object] = {}
    for check in checks:
        reached = through_structs(source.type, check.path[1:])
        if len(check.path) == 1 or reached is None or reached[1]:  # not a struct field's leaf
            return whole
        leaf = ref + "".join(f".{quote_identifier(segment)}" for segment in check.path[1:])
        bad = checked_leaf(leaf, check.compiled_type, check.deployed_type).bad
        node = tree
        for segment in check.path[1:-1]:
            child = node.setdefault(segment, {})
            assert isinstance(child, dict)
            node = child
        node[check.path[-1]] = f"CASE WHEN {' OR '.join(bad)} THEN {leaf} END" if bad else "NULL"
    return f"to_variant_object({_named_struct(tree)})"


def _named_struct(tree: dict[str, object]) -> str:
    parts = ", ".join(
        f"{sql_string(name)}, {_named_struct(value) if isinstance(value, dict) else value}"
        for name, value in tree.items()
    )
    return f"named_struct({parts})"
