"""Value-level validity rules of a declared column, rendered as Spark SQL predicates (pure).

A declared contract (a Pydantic class, see `pydantic_contract.py`) says more than a column's type:
bounds, lengths, patterns, allowed literals, required (non-NULL) values, also inside structs,
arrays and maps. Each rule here is a typed value; `violated` renders the rules of one column as
one SQL boolean that is true when a value breaks any of them and never NULL. The load SELECT
(`enforce.render_load_select`) evaluates it in Spark, next to the type coercion, under the
contract's `data_type` mode: nothing is checked row by row in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

COMPARISONS = ("<", "<=", ">", ">=")
# Spark's size() of a NULL collection is -1 (legacy) or NULL; lengths are only checked on values.
TEXT, COLLECTION = "text", "collection"
# the part of a collection an `Each` rule checks, and the SQL array of those parts
ELEMENT, KEY, VALUE = "element", "key", "value"
_PARTS = {ELEMENT: "{}", KEY: "map_keys({})", VALUE: "map_values({})"}


@dataclass(frozen=True)
class Compare:
    """The value must be `op` the bound (a rendered SQL literal): `ge=0` is `Compare('>=', '0')`.
    `of`: the value's length is compared instead, a string's (`char_length`, TEXT) or an array's
    or map's (`size`, COLLECTION); see `Length`."""

    op: str
    bound: str
    label: str
    of: str | None = None

    def __post_init__(self) -> None:
        if self.op not in COMPARISONS:
            raise ValueError(f"unknown comparison {self.op!r}; expected one of {COMPARISONS}")
        if self.of not in (None, TEXT, COLLECTION):
            raise ValueError(f"unknown length of {self.of!r}; expected {TEXT} or {COLLECTION}")

    def holds(self, expr: str) -> str:
        if self.of is not None:
            expr = f"char_length({expr})" if self.of == TEXT else f"size({expr})"
        return f"{expr} {self.op} {self.bound}"


def Length(op: str, n: int, of: str, label: str) -> Compare:
    """Length of a string (`of` TEXT) or of an array or map (COLLECTION) `op` `n`."""
    if of not in (TEXT, COLLECTION) or int(n) != n:
        raise ValueError(f"bad length rule {op!r} {n!r} {of!r}; `of` is {TEXT} or {COLLECTION}")
    return Compare(op, str(int(n)), label, of)


@dataclass(frozen=True)
class Matches:
    """The string contains a match of the (Java) regular expression (Pydantic's search rule)."""

    pattern_sql: str
    label: str

    def holds(self, expr: str) -> str:
        return f"regexp_like({expr}, {self.pattern_sql})"


@dataclass(frozen=True)
class OneOf:
    """The value is one of the rendered literals (`Literal[...]`, an Enum's values)."""

    literals: tuple[str, ...]
    label: str

    def holds(self, expr: str) -> str:
        return f"{expr} IN ({', '.join(self.literals)})"


@dataclass(frozen=True)
class MultipleOf:
    divisor: str
    label: str

    def holds(self, expr: str) -> str:
        return f"{expr} % {self.divisor} = 0"


@dataclass(frozen=True)
class Required:
    """The value is not NULL (a field that is not `Optional`)."""

    label: str = "required (not Optional)"


@dataclass(frozen=True)
class InField:
    """Rules of a struct field (checked only when the struct itself is not NULL)."""

    name: str
    rules: tuple[Rule, ...]


@dataclass(frozen=True)
class Each:
    """Rules every `part` of a collection obeys: an array's elements, a map's keys or values."""

    part: str
    rules: tuple[Rule, ...]

    def __post_init__(self) -> None:
        if self.part not in _PARTS:
            raise ValueError(f"unknown collection part {self.part!r}; expected one of {_PARTS}")

    def parts(self, expr: str) -> str:
        """The array of those parts of the collection `expr`."""
        return _PARTS[self.part].format(expr)


Leaf = Compare | Matches | OneOf | MultipleOf
Rule = Leaf | Required | InField | Each


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _violated(expr: str, rules: tuple[Rule, ...], depth: int) -> list[str]:
    """Disjuncts, each true (or NULL, wrapped later) when `expr` breaks a rule."""
    out: list[str] = []
    leaves = [r for r in rules if isinstance(r, Leaf)]
    if any(isinstance(r, Required) for r in rules):
        out.append(f"{expr} IS NULL")
    if leaves:
        holds = " AND ".join(f"({r.holds(expr)})" for r in leaves)
        out.append(f"({expr} IS NOT NULL AND NOT ({holds}))")
    for rule in rules:
        if isinstance(rule, InField):
            inner = _violated(f"{expr}.{_quote(rule.name)}", rule.rules, depth)
            if inner:
                out.append(f"({expr} IS NOT NULL AND ({' OR '.join(inner)}))")
        elif isinstance(rule, Each):
            var = f"c{depth}"
            inner = _violated(var, rule.rules, depth + 1)
            if not inner:
                continue
            collection = rule.parts(expr)
            lambda_body = " OR ".join(f"coalesce({p}, false)" for p in inner)
            out.append(f"({expr} IS NOT NULL AND exists({collection}, {var} -> {lambda_body}))")
    return out


def violated(expr: str, rules: tuple[Rule, ...]) -> str | None:
    """One SQL boolean, never NULL: `expr` breaks at least one rule. None when there are none."""
    parts = _violated(expr, rules, 0)
    if not parts:
        return None
    return " OR ".join(f"coalesce({p}, false)" for p in parts)


def describe(rules: tuple[Rule, ...], prefix: str = "") -> list[str]:
    """Readable rules, with nested paths (`address.zip: max_length=5`)."""
    out: list[str] = []
    for rule in rules:
        if isinstance(rule, InField):
            out += describe(rule.rules, f"{prefix}{rule.name}.")
        elif isinstance(rule, Each):
            out += describe(rule.rules, f"{prefix}{rule.part}.")
        else:
            out.append(f"{prefix.rstrip('.')}{': ' if prefix else ''}{rule.label}")
    return out


def top_level_required(rules: tuple[Rule, ...]) -> bool:
    return any(isinstance(r, Required) for r in rules)


@dataclass(frozen=True)
class ColumnRules:
    """The validity rules of one top-level column of a declared contract."""

    column: str
    rules: tuple[Rule, ...]

    def violated(self, expr: str) -> str | None:
        return violated(expr, self.rules)

    def describe(self) -> str:
        return ", ".join(describe(self.rules))

    @property
    def nulling_repairs(self) -> bool:
        """Setting the column to NULL makes the value valid (false when the column is required)."""
        return not top_level_required(self.rules)
