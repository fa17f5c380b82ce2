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


def run_explicit_build(run: Any, build: ExplicitBuild, restore: Any) -> AdapterResponse:
    """Carry out an `ExplicitBuild` with `run(sql)`; undo what a failing step left.

    With `publish` (the catalog's twin): the stage made and filled, then the table created or
    replaced from it in one commit; the stage dropped whatever happens (a failure leaves the
    old table, or no table, as it was). Without it, first build: a failing INSERT drops the new
    table; rebuild: a failing INSERT into the stage drops the stage (the old table was not
    touched), a failure after the REPLACE calls `restore()` (the old snapshot back)."""
    if build.publish is not None:
        run(build.drop_stage)  # a leftover of a run that died
        try:
            run(build.create)
            run(build.load)
            run(build.publish)
        finally:
            run(build.drop_stage)
        run(build.refresh)
        return AdapterResponse(_message="OK")
    if build.stage is None:
        _create_and_load(run, build, build.drop_relation)
        return AdapterResponse(_message="OK")
    run(build.drop_stage)  # a leftover of a run that died
    _create_and_load(run, build, build.drop_stage)
    try:
        assert build.replace is not None and build.fill is not None
        run(build.replace)
        run(build.fill)
    except BaseException:
        restore()
        raise
    finally:
        run(build.drop_stage)
    return AdapterResponse(_message="OK")


def _create_and_load(run: Any, build: ExplicitBuild, drop: str) -> None:
    """The table (or stage) created, then filled; a failing fill `drop`s what was created."""
    run(build.create)
    try:
        run(build.load)
    except BaseException:
        run(drop)
        raise


def build_not_null(
    spark: Any,
    relation: str,
    select_sql: str,
    constraints: TableConstraints,
    clauses: str,
    exists: bool,
    log: Any,
) -> AdapterResponse:
    """An Iceberg build with NOT NULL columns, all or nothing (core/contracts/constraints.py):
    one commit through the Iceberg catalog's twin that keeps NOT NULL columns, where the Spark
    the connection reaches has it; else two, with a warning (`log.current_version` gives the
    snapshot a failed fill goes back to)."""
    schema = constraints.schema(spark.schema(select_sql))
    stage = suffixed(relation, "__dbt_constraints")
    catalog = relation.split(".", 1)[0]
    twin = has_catalog(spark, not_null_catalog(catalog))
    build = explicit_build(
        relation, stage, exists, schema, constraints.table_format, clauses, select_sql, twin
    )
    if not twin:
        logger.warning(
            f"{relation}: the Spark this connection reaches has no catalog "
            f"{not_null_catalog(catalog)} (the {catalog} catalog's settings with "
            "use-nullable-query-schema=false, which the adapter's own session and servers "
            "add), so this NOT NULL build takes two commits: a reader can see the table "
            "empty between them"
        )
    snapshot = log.current_version(relation, "iceberg") if exists and not twin else None

    def restore() -> None:
        if snapshot is not None:
            spark.run(build.restore_sql(snapshot))

    return run_explicit_build(spark.run, build, restore)


def has_catalog(spark: Any, catalog: str) -> bool:
    """The Spark a connection reaches has a catalog of that name configured."""
    return answers(spark, f"show namespaces in {catalog}")
