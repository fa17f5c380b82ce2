"""Schema-change operations and the `Plan` that orders them: frozen data, rendered by `render.py`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from dbt.adapters.spark_contracts.core.evolution.change_policy import Cost, OnChange, Verdict
from dbt.adapters.spark_contracts.core.schema.diff import Change, Path
from dbt.adapters.spark_contracts.core.schema.types import SparkType, Struct


def _dotted(path: Path) -> str:
    return ".".join(path)


@dataclass(frozen=True)
class NewColumn:
    """A column or nested field to add; nested fields carry their position (`first`/`after`)."""

    path: Path
    type: SparkType
    comment: str | None = None
    default: str | None = None
    first: bool = False
    after: str | None = None


@dataclass(frozen=True)
class AddColumns:
    columns: tuple[NewColumn, ...]

    def describe(self) -> str:
        added = ", ".join(f"{_dotted(c.path)} {c.type.to_sql()}" for c in self.columns)
        return f"add columns {added}"


@dataclass(frozen=True)
class SetColumnDefault:
    column: str
    expr: str

    def describe(self) -> str:
        return f"set default of {self.column} to {self.expr}"


@dataclass(frozen=True)
class Backfill:
    column: str
    expr: str

    def describe(self) -> str:
        return f"backfill existing rows: {self.column} = {self.expr}"


@dataclass(frozen=True)
class AddNotNullCheck:
    column: str
    constraint: str

    def describe(self) -> str:
        return f"add CHECK constraint {self.constraint} ({self.column} IS NOT NULL)"


@dataclass(frozen=True)
class AlterColumnType:
    """Metadata-only widening of a column or nested leaf."""

    path: Path
    new_type: SparkType
    old_type: SparkType

    def describe(self) -> str:
        return f"widen {_dotted(self.path)}: {self.old_type.to_sql()} -> {self.new_type.to_sql()}"


@dataclass(frozen=True)
class DropNotNull:
    path: Path

    def describe(self) -> str:
        return f"drop NOT NULL on {_dotted(self.path)}"


@dataclass(frozen=True)
class EnableTableFeature:
    property: str
    value: str
    irreversible: bool
    note: str

    def describe(self) -> str:
        warning = " (irreversible)" if self.irreversible else ""
        return f"set table property {self.property}={self.value}{warning}: {self.note}"


@dataclass(frozen=True)
class DropColumns:
    paths: tuple[Path, ...]

    def describe(self) -> str:
        return "drop columns " + ", ".join(_dotted(p) for p in self.paths)


@dataclass(frozen=True)
class ColumnCast:
    """How one column of a rewritten table is built: from `source` (None: new) into `target`.

    `fill` is the value of a new column in existing rows, `default` the column default to keep.
    """

    name: str
    source: SparkType | None
    target: SparkType
    fill: str | None = None
    default: str | None = None


@dataclass(frozen=True)
class Rewrite:
    """Row-keeping rebuild; `in_place`: atomic CREATE OR REPLACE, else build beside and swap."""

    target_schema: Struct
    casts: tuple[ColumnCast, ...]
    in_place: bool
    table_properties: tuple[tuple[str, str], ...] = ()
    reason: str = ""

    def describe(self) -> str:
        how = "atomic CREATE OR REPLACE TABLE AS SELECT" if self.in_place else "build beside, swap"
        return f"rewrite the table keeping its rows ({how}): {self.reason}"


@dataclass(frozen=True)
class FullRefresh:
    """Rebuild from the model's SQL, as dbt's --full-refresh does."""

    reason: str

    def describe(self) -> str:
        return f"full refresh: {self.reason}"


Operation = (
    AddColumns
    | SetColumnDefault
    | Backfill
    | AddNotNullCheck
    | AlterColumnType
    | DropNotNull
    | EnableTableFeature
    | DropColumns
    | Rewrite
    | FullRefresh
)

# the order a plan runs its operations in
_PHASE = {
    EnableTableFeature: 0,
    DropColumns: 1,
    AddColumns: 2,
    SetColumnDefault: 3,
    Backfill: 4,
    AddNotNullCheck: 5,
    AlterColumnType: 6,
    DropNotNull: 7,
}


def merge_ops(ops: list[Operation]) -> tuple[Operation, ...]:
    """Order by phase, one ADD COLUMNS and one DROP COLUMNS, each table feature once."""
    features = list(dict.fromkeys(op for op in ops if isinstance(op, EnableTableFeature)))
    added = tuple(c for op in ops if isinstance(op, AddColumns) for c in op.columns)
    dropped = tuple(p for op in ops if isinstance(op, DropColumns) for p in op.paths)
    rest = [op for op in ops if not isinstance(op, (EnableTableFeature, AddColumns, DropColumns))]
    merged: list[Operation] = [*features, *rest]
    if added:
        merged.append(AddColumns(added))
    if dropped:
        merged.append(DropColumns(dropped))
    return tuple(sorted(merged, key=lambda op: _PHASE[type(op)]))


@dataclass(frozen=True)
class BlockedChange:
    """An unsafe change without its permission; `permitted_by` names the run var (or None);
    `verdict`: the change policy's (core/evolution/change_policy.py), where it decided."""

    change: Change
    reason: str
    permitted_by: str | None
    verdict: Verdict | None = None

    def describe(self) -> str:
        text = f"{self.change.describe()}: {self.reason}"
        if self.verdict is not None:
            text += f"; a {self.verdict.change_class.value} change, blocked by "
            text += f"{self.verdict.decided_by}; permit with {self.verdict.permits()}"
        elif self.permitted_by:
            text += f"; permit with --vars '{{{self.permitted_by}: true}}'"
        return text


@dataclass(frozen=True)
class Judged:
    """One planned change and the change policy's verdict on it."""

    change: Change
    verdict: Verdict

    def describe(self) -> str:
        v = self.verdict
        return (
            f"{self.change.describe()}: {v.change_class.value}, {v.action.value} "
            f"({v.decided_by}); cost: {v.cost_text()}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "change": self.change.describe(),
            "path": self.change.dotted,
            **self.verdict.to_dict(),
        }


@dataclass(frozen=True)
class Plan:
    """Ordered operations for one table; when `blocked` is non-empty nothing may run."""

    table_format: str
    operations: tuple[Operation, ...] = ()
    blocked: tuple[BlockedChange, ...] = ()
    notes: tuple[str, ...] = ()
    judged: tuple[Judged, ...] = ()  # every change the policy judged (schema_evolution)

    @property
    def ignored(self) -> tuple[Judged, ...]:
        """Changes `ignore` keeps out of the table: the load writes what fits."""
        return tuple(j for j in self.judged if j.verdict.action is OnChange.IGNORE)

    @property
    def warnings(self) -> tuple[str, ...]:
        """One line per change applied under `warn` (the adapter names the model)."""
        return tuple(j.describe() for j in self.judged if j.verdict.action is OnChange.WARN)

    @property
    def is_blocked(self) -> bool:
        return bool(self.blocked)

    @property
    def is_empty(self) -> bool:
        return not self.operations and not self.blocked

    @property
    def executable(self) -> bool:
        return not self.blocked

    @property
    def rewrites_data(self) -> bool:
        return any(isinstance(op, (Rewrite, FullRefresh, Backfill)) for op in self.operations)

    @property
    def rewrites_files(self) -> bool:
        """A change judged (applied or blocked) costs a rewrite of the table's data files."""
        verdicts = [j.verdict for j in self.judged]
        verdicts += [b.verdict for b in self.blocked if b.verdict is not None]
        return any(v.cost is Cost.REWRITE for v in verdicts)

    def with_data_files(self, files: int) -> Plan:
        """The plan whose rewrite costs name the table's `files` data files."""

        def counted(v: Verdict) -> Verdict:
            return replace(v, files=files) if v.cost is Cost.REWRITE else v

        judged = tuple(replace(j, verdict=counted(j.verdict)) for j in self.judged)
        blocked = tuple(
            replace(b, verdict=counted(b.verdict)) if b.verdict is not None else b
            for b in self.blocked
        )
        return replace(self, judged=judged, blocked=blocked)

    @property
    def full_refresh(self) -> FullRefresh | None:
        return next((op for op in self.operations if isinstance(op, FullRefresh)), None)

    def summary(self) -> str:
        if self.is_empty and not self.notes and not self.ignored:
            return f"no schema change ({self.table_format})"
        lines = [f"schema change plan ({self.table_format}):"]
        lines += [f"  - {op.describe()}" for op in self.operations]
        if self.blocked:
            lines.append("blocked, nothing will change:")
            lines += [f"  - {b.describe()}" for b in self.blocked]
        if self.ignored:
            lines.append("ignored, the table keeps its schema there:")
            lines += [f"  - {j.describe()}" for j in self.ignored]
        lines += [f"warning: {w}" for w in self.warnings]
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for run results and `target/schema_changes.json`."""
        return {
            "table_format": self.table_format,
            "operations": [
                {"op": type(op).__name__, "description": op.describe()} for op in self.operations
            ],
            "blocked": [
                {
                    "change": b.change.describe(),
                    "path": b.change.dotted,
                    "reason": b.reason,
                    "permitted_by": b.permitted_by,
                    **(b.verdict.to_dict() if b.verdict is not None else {}),
                }
                for b in self.blocked
            ],
            "changes": [j.to_dict() for j in self.judged],
            "notes": list(self.notes),
            "rewrites_data": self.rewrites_data,
        }
