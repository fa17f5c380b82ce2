"""Checked casts for a contract's load: which Spark type pairs `try_cast` takes, the leaf that
casts a value and reports whether it did not coerce (a NULL that was no NULL, or a fraction that
would be cut), and the fast answer for text that cannot be a number. Pure: rendering."""

from __future__ import annotations

from dbt.adapters.spark_contracts.core.contracts.enforce import safe_cast
from dbt.adapters.spark_contracts.core.schema.coerce import Built, coerce
from dbt.adapters.spark_contracts.core.schema.types import Primitive, SparkType, as_nullable

_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")
_TEXT = ("string", "char", "varchar")
_CASTS = {  # try_cast pairs Spark 4 accepts (probed); anything casts to string
    **{k: {*_NUMERIC, "boolean", "timestamp"} for k in _NUMERIC},
    "boolean": {*_NUMERIC, "boolean"},
    "date": {"date", "timestamp", "timestamp_ntz"},
    "timestamp": {*_NUMERIC, "date", "timestamp", "timestamp_ntz"},
    "timestamp_ntz": {"date", "timestamp", "timestamp_ntz"},
    "binary": {"binary"},
    **{k: {*_NUMERIC, "boolean", "date", "timestamp", "timestamp_ntz", "binary"} for k in _TEXT},
}


def _kind(t: SparkType) -> str:
    return t.name if isinstance(t, Primitive) else type(t).__name__.lower()


def castable(source: SparkType, target: SparkType) -> bool:
    if _kind(target) in _TEXT:
        return True
    return _kind(target) in _CASTS.get(_kind(source), set())


def _lossy(source: SparkType, target: SparkType) -> bool:
    """Fractional into integral/decimal: try_cast truncates, so compare the result as well."""
    fractional = _kind(source) in ("float", "double", "decimal")
    return fractional and _kind(target) in (*_NUMERIC[:4], "decimal")


def _same(source: SparkType, target: SparkType) -> bool:
    """Equal up to nullability and comments (field names compared as spelled)."""
    return as_nullable(source).simple_string() == as_nullable(target).simple_string()


def checked_coerce(expr: str, source: SparkType, target: SparkType) -> Built:
    """`expr` (compiled type `source`) as the deployed/target type, recursing by field name."""
    return coerce(expr, source, target, checked_leaf, _same)


# A text value whose first character is printable ASCII (0x21-0x7E) but no digit, sign or point
# can never be an integral or decimal number: Spark trims only blanks and control characters
# (<= 0x20, and DEL 0x7F for integral targets) and then needs a sign, a digit or a point (probed
# on Spark 4.1, ANSI on and off: tests/functional/contracts/test_not_a_number.py). `try_cast`
# finds that out by throwing and catching an exception, some 6 microseconds a value: 1 M such
# values cost seconds per reading. `ascii()` reads the first character only and answers NULL at
# once (any collation; a pattern would not take every collation); every other value goes to
# `try_cast`.
_NUMBER_TARGETS = ("tinyint", "smallint", "int", "bigint", "decimal")


def not_a_number(expr: str) -> str:
    """True where text `expr` starts with a character that rules a number out."""
    first = f"ascii({expr})"
    return (
        f"({first} BETWEEN 33 AND 126 AND {first} NOT IN (43, 45, 46) "
        f"AND {first} NOT BETWEEN 48 AND 57)"
    )


def try_cast_sql(expr: str, source: SparkType, target: SparkType) -> str:
    """`try_cast(expr AS target)`, answered without an exception where a text value's first
    character rules a number out (`not_a_number`); the same result for every value."""
    attempt = f"try_cast({expr} AS {target.to_sql()})"
    if _kind(source) in _TEXT and _kind(target) in _NUMBER_TARGETS:
        return f"CASE WHEN {not_a_number(expr)} THEN NULL ELSE {attempt} END"
    return attempt


def checked_leaf(expr: str, source: SparkType, target: SparkType) -> Built:
    target_sql = target.to_sql()
    if safe_cast(source, target):
        return Built(f"CAST({expr} AS {target_sql})")
    if not castable(source, target):
        return Built(f"CAST(NULL AS {target_sql})", (f"{expr} IS NOT NULL",))
    attempt = try_cast_sql(expr, source, target)
    if _lossy(source, target):
        bad = f"({expr} IS NOT NULL AND ({attempt} IS NULL OR {attempt} <> {expr}))"
        return Built(f"IF({attempt} = {expr}, {attempt}, NULL)", (bad,))
    return Built(attempt, (f"({expr} IS NOT NULL AND {attempt} IS NULL)",))
