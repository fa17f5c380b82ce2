"""dbt model constraints (`constraints:` under an enforced contract) as each table format can hold
them, decided without Spark.

What each format does with a constraint type (dbt's ConstraintSupport values):

| type                              | delta        | iceberg       | parquet (file sources) |
|-----------------------------------|--------------|---------------|------------------------|
| not_null                          | enforced     | enforced      | not supported          |
| check                             | enforced     | not supported | not supported          |
| primary_key, foreign_key, unique  | not enforced | not enforced  | not enforced           |

Delta holds `not_null` and `check` as CHECK constraints set in the CREATE [OR REPLACE] TABLE ... AS
SELECT itself (`delta.constraints.<name>` table properties: one commit, checked against the
initial rows). Iceberg holds NOT NULL in the schema (required columns), so its build declares
the columns. Informational constraints are recorded as `dbt.constraints.<name>` table properties.

Why Iceberg builds the way it does (probed on Spark 4.1.1 + Iceberg 1.12.0):
- CREATE [OR REPLACE] TABLE ... AS SELECT stores every column nullable (the catalog's
  `use-nullable-query-schema` defaults to true; changing it would change every Iceberg CTAS),
  a column list cannot be combined with AS SELECT, and ALTER COLUMN ... SET NOT NULL is refused
  on a nullable column. So the columns are declared: a stage table is created with the NOT
  NULL columns and the query loaded into it (the query runs once; Spark's write checks each
  row, NOT_NULL_ASSERT_VIOLATION, so a violating row fails there, the table untouched).
- Then one CREATE [OR REPLACE] TABLE ... AS SELECT from the stage through the catalog's twin
  `<catalog>_not_null` (the same catalog with `use-nullable-query-schema=false`, which keeps the
  stage's NOT NULL columns): one commit. Undoing a REPLACE would not be enough:
  `set_current_snapshot` brings the old rows back but keeps the new schema and properties
  (`rollback_to_snapshot` refuses: after a REPLACE the old snapshot is no ancestor). So a Spark
  without the twin is refused (constraints.NotNullCatalogMissing). Its cost: the rows are
  written twice.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dbt.adapters.spark_contracts.core.evolution.capabilities import drop_sql, row_of
from dbt.adapters.spark_contracts.core.evolution.render import tblproperties_clause
from dbt.adapters.spark_contracts.core.schema.types import (
    Field,
    Struct,
    as_nullable,
    quote_identifier,
)

ENFORCED = "enforced"
NOT_ENFORCED = "not_enforced"
NOT_SUPPORTED = "not_supported"
INFORMATIONAL = ("primary_key", "foreign_key", "unique")
DELTA_CONSTRAINT_PREFIX = "delta.constraints."
INFORMATIONAL_PREFIX = "dbt.constraints."

_SUPPORT: dict[str, dict[str, str]] = {
    "delta": {"not_null": ENFORCED, "check": ENFORCED},
    "iceberg": {"not_null": ENFORCED, "check": NOT_SUPPORTED},
    "parquet": {"not_null": NOT_SUPPORTED, "check": NOT_SUPPORTED},
}


def constraint_support(table_format: str) -> dict[str, str]:
    """dbt's CONSTRAINT_SUPPORT for tables of `table_format` (any file source is `parquet`)."""
    fmt = table_format.lower() if table_format.lower() in _SUPPORT else "parquet"
    return {**_SUPPORT[fmt], **dict.fromkeys(INFORMATIONAL, NOT_ENFORCED)}


def _identifier(text: str) -> str:
    """`text` as a constraint-name part: lower-case word characters; a name that had others
    also gets a hash of itself, so `a b` and `a_b` never share a constraint name."""
    lowered = text.lower()
    safe = re.sub(r"\W", "_", lowered)
    return safe if safe == lowered else f"{safe}_{_short_hash(lowered)}"


def not_null_constraint_name(column: str) -> str:
    """The CHECK constraint that holds NOT NULL for `column` (first builds and new columns)."""
    return _identifier(column) + "_not_null"


def not_null_expression(column: str) -> str:
    return f"{quote_identifier(column)} IS NOT NULL"


def enforced_not_null_columns(properties: Mapping[str, str]) -> frozenset[str]:
    """Lower-case names of the columns a Delta table's CHECK constraints keep NOT NULL."""
    found = set()
    pattern = re.compile(r"^\(?\s*`?((?:[^`]|``)+?)`?\s+is\s+not\s+null\s*\)?$", re.IGNORECASE)
    for key, value in properties.items():
        if key.lower().startswith(DELTA_CONSTRAINT_PREFIX):
            match = pattern.match(value.strip())
            if match:
                found.add(match.group(1).replace("``", "`").lower())
    return frozenset(found)


@dataclass(frozen=True)
class DeclaredConstraint:
    """One constraint of the model, as dbt parsed it and kept it (not `not_supported`)."""

    kind: str  # a dbt ConstraintType value
    columns: tuple[str, ...]  # the column of a column-level constraint, or `columns:`
    expression: str | None = None
    name: str | None = None
    rendered: str = ""  # dbt's own DDL text for it
    column_level: bool = False


@dataclass(frozen=True)
class TableConstraints:
    """What one build creates with its table; built by `table_constraints`."""

    table_format: str
    not_null: tuple[str, ...] = ()
    checks: tuple[tuple[str, str], ...] = ()  # (name, expression)
    informational: tuple[tuple[str, str], ...] = ()  # (name, text)

    @property
    def explicit_schema(self) -> bool:
        """The build must declare its columns (Iceberg NOT NULL): CREATE + INSERT, not CTAS."""
        return row_of(self.table_format).not_null_needs_create and bool(self.not_null)

    def properties(self) -> tuple[tuple[str, str], ...]:
        props: list[tuple[str, str]] = []
        if row_of(self.table_format).constraints_as_properties:
            props += [
                (DELTA_CONSTRAINT_PREFIX + not_null_constraint_name(c), not_null_expression(c))
                for c in self.not_null
            ]
            props += [(DELTA_CONSTRAINT_PREFIX + name, expr) for name, expr in self.checks]
        props += [(INFORMATIONAL_PREFIX + name, text) for name, text in self.informational]
        return tuple(props)

    def tblproperties_clause(self, configured: Mapping[str, object] | None) -> str:
        """TBLPROPERTIES of the model's `tblproperties` config plus the constraints."""
        merged = {str(k): str(v) for k, v in (configured or {}).items()}
        merged.update(self.properties())
        return tblproperties_clause(merged)

    def schema(self, analysed: Struct) -> Struct:
        """The table's columns: the query's (nullable, as a CTAS stores them) but NOT NULL
        where declared."""
        declared = {c.lower() for c in self.not_null}
        return Struct(
            tuple(
                Field(f.name, as_nullable(f.type), f.name.lower() not in declared, f.comment)
                for f in analysed.fields
            )
        )


def _short_hash(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()[:8]


def _check_name(constraint: DeclaredConstraint) -> str:
    if constraint.name:
        return constraint.name
    scope = "_".join(_identifier(c) for c in constraint.columns) if constraint.column_level else ""
    base = f"{scope}_check" if scope else "check"
    return f"{base}_{_short_hash(constraint.expression or '')}"


def _informational(constraint: DeclaredConstraint) -> tuple[str, str]:
    columns = ", ".join(constraint.columns)
    if constraint.column_level:
        text = f"{columns} {constraint.rendered}".strip()
    else:
        text = constraint.rendered
    name = constraint.name or "_".join(
        [*(_identifier(c) for c in constraint.columns), constraint.kind]
    )
    return name, text


def table_constraints(
    table_format: str, declared: tuple[DeclaredConstraint, ...]
) -> TableConstraints:
    """The constraints a table of `table_format` gets from what dbt kept of the model's."""
    support = constraint_support(table_format)
    fmt = table_format.lower()
    not_null: list[str] = []
    checks: dict[str, str] = {}  # name -> expression; the first of a name is kept
    informational: dict[str, str] = {}  # name -> text
    for constraint in declared:
        state = support.get(constraint.kind, NOT_SUPPORTED)
        if state == NOT_SUPPORTED:
            continue
        if constraint.kind == "not_null":
            not_null += [c for c in constraint.columns if c.lower() not in map(str.lower, not_null)]
        elif constraint.kind == "check" and constraint.expression:
            checks.setdefault(_check_name(constraint), constraint.expression)
        elif constraint.kind in INFORMATIONAL:
            informational.setdefault(*_informational(constraint))
    return TableConstraints(
        fmt if fmt in _SUPPORT else "parquet",
        tuple(not_null),
        tuple(checks.items()),
        tuple(informational.items()),
    )


def column_definitions(schema: Struct) -> str:
    """`(a INT NOT NULL, b STRING, ...)` for CREATE TABLE."""
    parts = []
    for f in schema.fields:
        text = f"{quote_identifier(f.name)} {f.type.to_sql()}"
        if not f.nullable:
            text += " NOT NULL"
        parts.append(text)
    return "(" + ", ".join(parts) + ")"


# The Iceberg catalog's twin that keeps a query's NOT NULL columns in CREATE / REPLACE TABLE AS
# SELECT (Iceberg's `use-nullable-query-schema=false`; the session adds it, connection/session.py)
NOT_NULL_CATALOG_SUFFIX = "_not_null"


def not_null_catalog(catalog: str) -> str:
    return catalog + NOT_NULL_CATALOG_SUFFIX


@dataclass(frozen=True)
class ExplicitBuild:
    """A build that declares its columns (Iceberg NOT NULL): statements in order. The query
    loads a stage table with the NOT NULL columns, so a violating row fails there, before the
    table is touched. Then `publish`: one CREATE (OR REPLACE) TABLE AS SELECT from the stage
    through the catalog's twin that keeps the stage's NOT NULL columns, one commit, so a reader
    sees the old table or the new one and a failure (or a kill) leaves the old one whole. A
    Spark without the twin is refused before anything is written
    (constraints.NotNullCatalogMissing): without it the build would take two commits."""

    relation: str
    stage: str
    create: str
    load: str
    publish: str

    @property
    def drop_stage(self) -> str:
        return drop_sql(self.stage, "iceberg")

    @property
    def refresh(self) -> str:
        """The table read again by the catalog the model's other statements use."""
        return f"REFRESH TABLE {self.relation}"


def explicit_build(
    relation: str,
    stage: str,
    exists: bool,
    schema: Struct,
    using: str,
    clauses: str,
    select_sql: str,
) -> ExplicitBuild:
    """CREATE the stage (columns) + INSERT the query into it (the query runs once), then one
    CREATE (OR REPLACE) TABLE AS SELECT from the stage through the catalog's twin."""
    columns = column_definitions(schema)
    catalog, ident = relation.split(".", 1)
    verb = "CREATE OR REPLACE TABLE" if exists else "CREATE TABLE"
    target = f"{not_null_catalog(catalog)}.{ident}"
    publish = f"{verb} {target} USING {using} {clauses}".rstrip()
    return ExplicitBuild(
        relation,
        stage,
        create=f"CREATE TABLE {stage} {columns} USING {using}",
        load=f"INSERT INTO {stage} {select_sql}",
        publish=f"{publish} AS SELECT * FROM {stage}",
    )


def declared_not_null(model: Mapping[str, Any]) -> tuple[str, ...]:
    """Columns the model declares NOT NULL (column constraints or model-level constraints)."""
    names = [
        name
        for name, column in (model.get("columns") or {}).items()
        for constraint in column.get("constraints") or []
        if constraint.get("type") == "not_null"
    ]
    for constraint in model.get("constraints") or []:
        if constraint.get("type") == "not_null":
            names.extend(constraint.get("columns") or [])
    return tuple(names)
