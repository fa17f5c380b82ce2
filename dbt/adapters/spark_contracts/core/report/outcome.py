"""What a run did, in words: the console line per model, the run's summary line, and the
reviewable plan of a dry run (`target/schema_plan.md`). Pure: reads plans and report entries."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from dbt.adapters.spark_contracts.core.contracts.contract import resolve_contract
from dbt.adapters.spark_contracts.core.evolution.operations import (
    AddColumns,
    AlterColumnType,
    Backfill,
    DropColumns,
    DropNotNull,
    FullRefresh,
    Operation,
    Rewrite,
    SetColumnDefault,
)
from dbt.adapters.spark_contracts.core.evolution.steps import AFTER_LOAD_MARK
from dbt.adapters.spark_contracts.core.schema.types import sql_string
from dbt.adapters.spark_contracts.core.settings.config import ConfigError


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def change_counts(operations: Iterable[Operation]) -> list[str]:
    """`+2 columns`, `+1 struct field`, `1 widened`, ... for the operations of a plan."""
    columns = fields = widened = dropped = defaults = backfills = relaxed = 0
    rewritten = False
    for op in operations:
        if isinstance(op, AddColumns):
            top = sum(1 for c in op.columns if len(c.path) == 1)
            columns, fields = columns + top, fields + len(op.columns) - top
        elif isinstance(op, AlterColumnType):
            widened += 1
        elif isinstance(op, DropColumns):
            dropped += len(op.paths)
        elif isinstance(op, SetColumnDefault):
            defaults += 1
        elif isinstance(op, Backfill):
            backfills += 1
        elif isinstance(op, DropNotNull):
            relaxed += 1
        elif isinstance(op, (Rewrite, FullRefresh)):
            rewritten = True
    parts = []
    if columns:
        parts.append(f"+{_plural(columns, 'column')}")
    if fields:
        parts.append(f"+{_plural(fields, 'struct field')}")
    parts += [
        f"{n} {word}"
        for n, word in (
            (widened, "widened"),
            (dropped, "dropped"),
            (defaults, "with a default"),
            (backfills, "backfilled"),
            (relaxed, "made nullable"),
        )
        if n
    ]
    if rewritten:
        parts.append("table rewritten")
    return parts


def outcome_line(
    name: str,
    operations: Iterable[Operation],
    rows_discarded: int | None,
    values_discarded: int | None,
    quarantined: int | None,
    quarantine_table: str,
    repairs: Iterable[str],
) -> str | None:
    """One console line for a model's run; None when there is nothing beyond dbt's own line."""
    parts = change_counts(operations)
    if rows_discarded:
        text = f"{_plural(rows_discarded, 'row')} discarded"
        if quarantined:
            text += f" ({quarantined} quarantined in {quarantine_table})"
        parts.append(text)
    if values_discarded:
        parts.append(f"{_plural(values_discarded, 'value')} discarded")
    repaired = list(repairs)
    if repaired:
        parts.append(f"{_plural(len(repaired), 'repair')}: " + "; ".join(repaired))
    return f"{name}: " + ", ".join(parts) if parts else None


def run_summary(entries: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The last line of a run: how many models changed schema, rows discarded, repairs."""
    loaded = [e for e in entries.values() if e.get("loaded")]  # undone runs discarded nothing
    changed = [e for e in loaded if e.get("applied")]
    rows = sum(int(e.get("rows_discarded") or 0) for e in loaded)
    values = sum(int(e.get("values_discarded") or 0) for e in loaded)
    quarantined = sum(int(e.get("quarantined") or 0) for e in loaded)
    repairs = sum(len(e.get("repairs") or ()) for e in entries.values())
    planned = [e for e in entries.values() if e.get("dry_run")]
    blocked = [e for e in entries.values() if (e.get("plan") or {}).get("blocked")]
    counts = (
        (len(changed), "model", "changed schema"),
        (len(planned), "model", "planned (dry run, nothing changed)"),
        (len(blocked), "model", "blocked"),
        (rows, "row", f"discarded ({quarantined} quarantined)"),
        (values, "value", "discarded"),
        (repairs, "table", "repaired"),
    )
    parts = [f"{_plural(n, noun)} {what}" for n, noun, what in counts if n]
    if not parts:
        return None
    return "dbt-spark-contracts: " + ", ".join(parts) + " (target/schema_changes.json)"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def plan_markdown(invocation_id: str, entries: Mapping[str, Mapping[str, Any]]) -> str:
    """`target/schema_plan.md`: per model of a dry run, the diff, whether each change is safe or
    gated, the statements that would run, and how to allow what is blocked."""
    blocked_models = [m for m, e in entries.items() if (e.get("plan") or {}).get("blocked")]
    lines = [
        "# Schema change plan",
        "",
        f"dbt invocation `{invocation_id}`: {_plural(len(entries), 'model')} planned, "
        f"{len(blocked_models)} blocked. Nothing was changed (dry run).",
    ]
    for unique_id, entry in sorted(entries.items()):
        plan = entry.get("plan") or {}
        blocked = {b["path"]: b for b in plan.get("blocked", ())}
        lines += ["", f"## `{unique_id}` → `{entry.get('relation')}`", ""]
        lines.append(
            f"{entry.get('table_format')}, {entry.get('mode')}, "
            f"write path: {entry.get('write_path')}"
        )
        diff = entry.get("diff") or []
        if not diff:
            lines += ["", "No schema change."]
            continue
        lines += ["", "| change | column | verdict |", "| --- | --- | --- |"]
        for change in diff:
            gate = blocked.get(change["path"])
            if gate is None and not plan.get("operations"):
                verdict = "no change planned (the model's settings leave it)"
            elif gate is None:
                verdict = "safe: planned"
            else:
                verdict = f"**blocked**: {gate['reason']}"
                if gate.get("permitted_by"):
                    verdict += f" (allow with `--vars '{{{gate['permitted_by']}: true}}'`)"
            lines.append(
                f"| {_cell(change['description'])} | `{change['path']}` | {_cell(verdict)} |"
            )
        statements = entry.get("statements") or []
        if statements:
            last = set(entry.get("after_load") or ())
            marked = [f"{s.strip()};{AFTER_LOAD_MARK * (s in last)}" for s in statements]
            lines += ["", "```sql", *marked, "```"]
        elif not blocked and entry.get("write_path") == "in_write":
            lines += ["", "No DDL: the changes ride in the load's one commit."]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------ the schema history

HISTORY_TABLE = "dbt_schema_history"
HISTORY_COLUMNS = (
    ("model", "STRING"),
    ("relation", "STRING"),
    ("invocation_id", "STRING"),
    ("recorded_at", "TIMESTAMP"),
    ("event", "STRING"),  # change | discard | repair
    ("column_path", "STRING"),
    ("before_type", "STRING"),
    ("after_type", "STRING"),
    ("rows_discarded", "BIGINT"),
    ("values_discarded", "BIGINT"),
    ("detail", "STRING"),
)


def history_relation(relation: str) -> str:
    """The history table beside `relation`, in the same catalog and schema."""
    if relation.endswith("`") and "`.`" in relation:
        return relation[: relation.rfind("`.`") + 1] + f".`{HISTORY_TABLE}`"
    return relation.rsplit(".", 1)[0] + f".{HISTORY_TABLE}"


def history_ddl(table: str, using: str) -> str:
    columns = ", ".join(f"{name} {kind}" for name, kind in HISTORY_COLUMNS)
    return f"CREATE TABLE IF NOT EXISTS {table} ({columns}) USING {using}"


def history_insert_rows(table: str, rows: Iterable[str]) -> str:
    """One INSERT of `history_rows` (of one run or of many)."""
    return f"INSERT INTO {table} VALUES {', '.join(rows)}"


def history_rows(
    model: str,
    relation: str,
    invocation_id: str,
    operations: Iterable[Operation],
    rows_discarded: int | None,
    values_discarded: int | None,
    repairs: Iterable[str],
) -> tuple[str, ...]:
    """The VALUES tuples of one run's history: a row per applied change, one for the discards,
    one per repair (empty when the run has nothing to record)."""
    rows: list[tuple[str, str | None, str | None, str | None, int | None, int | None, str]] = []
    for op in operations:
        if isinstance(op, AddColumns):
            for c in op.columns:
                path, after = ".".join(c.path), c.type.to_sql()
                rows.append(("change", path, None, after, None, None, f"add {path} {after}"))
        elif isinstance(op, AlterColumnType):
            path = ".".join(op.path)
            before, after = op.old_type.to_sql(), op.new_type.to_sql()
            rows.append(("change", path, before, after, None, None, op.describe()))
        else:
            rows.append(("change", None, None, None, None, None, op.describe()))
    if rows_discarded or values_discarded:
        counts = (rows_discarded or 0, values_discarded or 0)
        rows.append(("discard", None, None, None, *counts, "schema_contract discards"))
    rows += [("repair", None, None, None, None, None, text) for text in repairs]

    def literal(value: Any) -> str:
        if value is None:
            return "NULL"
        return str(value) if isinstance(value, int) else sql_string(str(value))

    head = f"{sql_string(model)}, {sql_string(relation)}, {sql_string(invocation_id)}, now()"
    return tuple(f"({head}, {', '.join(literal(v) for v in row)})" for row in rows)


# ------------------------------------------------------------------- dbt docs catalog stats

_CATALOG_STATS = {
    "schema_contract": (
        "Schema contract",
        "tables / columns / data_type modes and quarantine, resolved through dbt's config "
        "hierarchy (run vars may override per run)",
    ),
    "schema_evolution": ("Schema evolution", "the model's schema_evolution config"),
}


def catalog_stats(unique_id: str, schema_contract: Any, schema_evolution: Any) -> dict[str, Any]:
    """A model's resolved contract and evolution settings as `stats:<id>:<part>` catalog columns
    (every key present; None where a model sets nothing, which dbt leaves out)."""
    stats: dict[str, Any] = {
        f"stats:{k}:{part}": None
        for k in _CATALOG_STATS
        for part in ("label", "value", "description", "include")
    }
    values: dict[str, str] = {}
    try:
        contract = resolve_contract(unique_id, schema_contract, None)
    except ConfigError:
        contract = None  # `dbt run` names the bad value; the docs show only what is valid
    if contract is not None:
        values["schema_contract"] = json.dumps(contract.to_dict(), sort_keys=True)
    if schema_evolution is not None:
        values["schema_evolution"] = json.dumps(schema_evolution, sort_keys=True, default=str)
    for key, value in values.items():
        label, description = _CATALOG_STATS[key]
        stats[f"stats:{key}:label"] = label
        stats[f"stats:{key}:value"] = value
        stats[f"stats:{key}:description"] = description
        stats[f"stats:{key}:include"] = True
    return stats
