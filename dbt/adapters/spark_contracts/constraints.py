"""dbt model constraints through dbt's own machinery (parse, `process_parsed_constraint` with its
`warn_unenforced` / `warn_unsupported` warnings, `render_*_constraint`), with the truth of the
model's table format; and the Iceberg build that declares NOT NULL columns.

dbt reads `CONSTRAINT_SUPPORT` from the adapter class, but on Spark the truth depends on the
model's `file_format`. Each format gets a rules class (never registered, never instantiated)
whose CONSTRAINT_SUPPORT is that format's: dbt's classmethods run unchanged on it, so the
warning a model gets names what its own format does."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple, Type

from dbt.adapters.base.impl import ConstraintSupport
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.impl import SparkAdapter
from dbt_common.contracts.constraints import ConstraintType
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.connection.spark_handle import answers
from dbt.adapters.spark_contracts.core.contracts.constraints import (
    DeclaredConstraint,
    ExplicitBuild,
    TableConstraints,
    constraint_support,
    explicit_build,
    not_null_catalog,
    table_constraints,
)
from dbt.adapters.spark_contracts.core.evolution.render import suffixed

logger = AdapterLogger("SparkContracts")
FORMATS = ("delta", "iceberg", "parquet")


def support_for(table_format: str) -> Dict[ConstraintType, ConstraintSupport]:
    """dbt's CONSTRAINT_SUPPORT mapping for one table format (custom: rendered as written)."""
    support = {
        ConstraintType(kind): ConstraintSupport(state)
        for kind, state in constraint_support(table_format).items()
    }
    return support


def _rules_class(table_format: str) -> Type[SparkAdapter]:
    support = support_for(table_format)
    name = f"spark_contracts ({table_format})"

    class Rules(SparkAdapter):
        CONSTRAINT_SUPPORT = support

        @classmethod
        def type(cls) -> str:  # the adapter name dbt's warnings print
            return name

    Rules.__name__ = Rules.__qualname__ = f"SparkContracts{table_format.title()}ConstraintRules"
    return Rules


_RULES: Mapping[str, Type[SparkAdapter]] = {fmt: _rules_class(fmt) for fmt in FORMATS}


def rules_for(table_format: str) -> Type[SparkAdapter]:
    fmt = (table_format or "").lower()
    return _RULES[fmt if fmt in _RULES else "parquet"]


def declared_constraints(
    model: Mapping[str, Any], table_format: str
) -> Tuple[DeclaredConstraint, ...]:
    """The model's constraints that its format keeps, processed by dbt (which warns about the
    unenforced and unsupported ones, unless the constraint says not to)."""
    rules = rules_for(table_format)
    kept: List[DeclaredConstraint] = []
    for column in (model.get("columns") or {}).values():
        for raw in column.get("constraints") or []:
            parsed = rules._parse_column_constraint(raw)
            rendered = rules.process_parsed_constraint(
                parsed, _text(rules.render_column_constraint)
            )
            if rendered is None:
                continue
            kept.append(_declared(parsed, (column["name"],), rendered, column_level=True))
    for raw in model.get("constraints") or []:
        parsed = rules._parse_model_constraint(raw)
        rendered = rules.process_parsed_constraint(parsed, _text(rules.render_model_constraint))
        if rendered is None:
            continue
        kept.append(_declared(parsed, tuple(parsed.columns), rendered, column_level=False))
    unique_id = model.get("unique_id", "model")
    for constraint in kept:
        if constraint.kind == ConstraintType.custom.value:
            logger.warning(
                f"{unique_id}: a `custom` constraint ({constraint.expression!r}) cannot be "
                "created with a Spark table; it is ignored"
            )
    return tuple(kept)


def _text(render: Any) -> Any:
    """dbt's renderer, but "" where it has no DDL text (a model-level not_null): only
    `process_parsed_constraint`'s None then means "not supported, left out"."""
    return lambda constraint: render(constraint) or ""


def _declared(
    parsed: Any, columns: Tuple[str, ...], rendered: str, column_level: bool
) -> DeclaredConstraint:
    return DeclaredConstraint(
        kind=parsed.type.value,
        columns=columns,
        expression=parsed.expression,
        name=parsed.name,
        rendered=rendered,
        column_level=column_level,
    )


def model_table_constraints(model: Mapping[str, Any], table_format: str) -> TableConstraints:
    return table_constraints(table_format, declared_constraints(model, table_format))


def build_constraints(
    model: Mapping[str, Any], file_format: str, select: Optional[str]
) -> Optional[TableConstraints]:
    """The constraints an enforced contract creates with the table, where the build has a
    table statement (`select`; dbt warns here about those `file_format` does not enforce)."""
    enforced = ((model.get("config") or {}).get("contract") or {}).get("enforced")
    if select is None or not enforced:
        return None
    return model_table_constraints(model, file_format)


class NotNullCatalogMissing(DbtRuntimeError):
    """An Iceberg build with NOT NULL columns where the Spark the connection reaches has no
    twin of the model's catalog that keeps them (`<catalog>_not_null`): without it the build
    would take two commits (the table replaced empty, then filled), so a reader could see it
    empty and a failure or a kill between them would leave it so. Refused before anything is
    written."""

    def __init__(self, relation: str, catalog: str) -> None:
        twin = not_null_catalog(catalog)
        super().__init__(
            f"{relation}: an Iceberg build with NOT NULL columns (an enforced contract's "
            f"not_null constraints) needs the catalog {twin}, which the Spark this connection "
            f"reaches does not have (or cannot read); nothing was changed. Add it to the "
            f"server's configuration as the {catalog} catalog's settings under "
            f"spark.sql.catalog.{twin} with "
            f"spark.sql.catalog.{twin}.use-nullable-query-schema=false (the embedded session "
            "and the servers this adapter starts add it). Without it the build would take two "
            "commits, and a reader, a failure or a killed run could leave the table empty."
        )
        self.relation, self.catalog = relation, catalog


def run_explicit_build(run: Any, build: ExplicitBuild) -> AdapterResponse:
    """Carry out an `ExplicitBuild` with `run(sql)`: the stage made and filled, then the table
    created or replaced from it in one commit through the catalog's twin; the stage dropped
    whatever happens (a failure leaves the old table, or no table, as it was; a kill leaves the
    stage, which the next build drops first)."""
    run(build.drop_stage)  # a leftover of a run that died
    try:
        run(build.create)
        run(build.load)
        run(build.publish)
    finally:
        run(build.drop_stage)
    run(build.refresh)
    return AdapterResponse(_message="OK")


def build_not_null(
    spark: Any,
    relation: str,
    select_sql: str,
    constraints: TableConstraints,
    clauses: str,
    exists: bool,
) -> AdapterResponse:
    """An Iceberg build with NOT NULL columns, all or nothing (core/contracts/constraints.py):
    one commit through the Iceberg catalog's twin that keeps NOT NULL columns (the executor
    checks first that the Spark the connection reaches has it: `require_not_null_catalog`)."""
    schema = constraints.schema(spark.schema(select_sql))
    stage = suffixed(relation, "__dbt_constraints")
    build = explicit_build(
        relation, stage, exists, schema, constraints.table_format, clauses, select_sql
    )
    return run_explicit_build(spark.run, build)


def require_not_null_catalog(spark: Any, relation: str) -> None:
    """`NotNullCatalogMissing` where the Spark `spark` reaches has no twin of `relation`'s
    catalog; one read. Checked before a build's first statement (run/execute.py)."""
    catalog = relation.split(".", 1)[0]
    if not has_catalog(spark, not_null_catalog(catalog)):
        raise NotNullCatalogMissing(relation, catalog)


def has_catalog(spark: Any, catalog: str) -> bool:
    """The Spark a connection reaches has a catalog of that name configured."""
    return answers(spark, f"show namespaces in {catalog}")
