"""Hypothesis strategies generating random (nested) Spark types and table schemas."""

from __future__ import annotations

from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.schema.types import (
    PRIMITIVE_NAMES,
    Array,
    Char,
    Decimal,
    Field,
    Map,
    Primitive,
    SparkType,
    Struct,
    Varchar,
)

simple_names = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
weird_names = st.text(alphabet="abcXYZ_09 `:,<>'\"é.-", min_size=1, max_size=8).filter(
    lambda n: n.strip() == n and n.strip()
)
any_names = st.one_of(simple_names, weird_names)

primitives = st.sampled_from(sorted(PRIMITIVE_NAMES)).map(Primitive)
decimals = st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: Decimal(p, s)))
leaves: st.SearchStrategy[SparkType] = st.one_of(
    primitives,
    decimals,
    st.integers(1, 300).map(Char),
    st.integers(1, 300).map(Varchar),
)


def structs(
    children: st.SearchStrategy[SparkType],
    names: st.SearchStrategy[str] = any_names,
    nullability: bool = True,
    comments: bool = True,
    min_size: int = 0,
    max_size: int = 5,
) -> st.SearchStrategy[Struct]:
    nullable = st.booleans() if nullability else st.just(True)
    comment = st.none() | st.text(max_size=6) if comments else st.none()
    fields = st.builds(Field, names, children, nullable, comment)
    unique = st.lists(
        fields, min_size=min_size, max_size=max_size, unique_by=lambda f: f.name.lower()
    )
    return unique.map(lambda fs: Struct(tuple(fs)))


def spark_types(
    names: st.SearchStrategy[str] = any_names,
    nullability: bool = True,
    comments: bool = True,
    collection_nulls: bool = True,
) -> st.SearchStrategy[SparkType]:
    """Random nested types; `collection_nulls` also varies containsNull/valueContainsNull."""
    contains = st.booleans() if collection_nulls else st.just(True)

    def extend(children: st.SearchStrategy[SparkType]) -> st.SearchStrategy[SparkType]:
        return st.one_of(
            st.builds(Array, children, contains),
            st.builds(Map, leaves, children, contains),
            structs(children, names, nullability, comments),
        )

    return st.recursive(leaves, extend, max_leaves=10)


def table_schemas(**kwargs: bool) -> st.SearchStrategy[Struct]:
    """Top-level schemas: 1-6 uniquely named columns of random nested types."""
    children = spark_types(names=simple_names, **kwargs)
    return structs(children, simple_names, min_size=1, max_size=6, comments=False)
