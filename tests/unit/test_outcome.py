"""Console lines, the run summary and the dry run's plan file (pure)."""

from __future__ import annotations

from dbt.adapters.spark_contracts.core.evolution.operations import (
    AddColumns,
    AlterColumnType,
    Backfill,
    NewColumn,
    SetColumnDefault,
)
from dbt.adapters.spark_contracts.core.report.outcome import (
    catalog_stats,
    change_counts,
    outcome_line,
    plan_markdown,
    run_summary,
)
from dbt.adapters.spark_contracts.core.schema.types import Primitive

INT, BIGINT, STRING = Primitive("int"), Primitive("bigint"), Primitive("string")
OPS = (
    AddColumns(
        (NewColumn(("note",), STRING), NewColumn(("c",), STRING), NewColumn(("s", "z"), INT))
    ),
    AlterColumnType(("n",), INT, BIGINT),
    SetColumnDefault("c", "'n'"),
    Backfill("c", "'n'"),
)


def test_change_counts_name_every_kind_of_change():
    assert change_counts(OPS) == [
        "+2 columns",
        "+1 struct field",
        "1 widened",
        "1 with a default",
        "1 backfilled",
    ]
    assert change_counts(()) == []


def test_outcome_line_says_changes_discards_quarantine_and_repairs():
    line = outcome_line("orders", OPS[:2], 5, 2, 5, "db.orders__quarantine", ["restored to 3"])
    assert line == (
        "orders: +2 columns, +1 struct field, 1 widened, 5 rows discarded (5 quarantined in "
        "db.orders__quarantine), 2 values discarded, 1 repair: restored to 3"
    )
    assert outcome_line("orders", (), 0, 0, None, "q", []) is None


def test_run_summary_counts_over_models():
    entries = {
        "a": {
            "applied": [{"op": "AddColumns"}],
            "rows_discarded": 3,
            "quarantined": 3,
            "loaded": True,
        },
        "b": {"applied": [], "values_discarded": 1, "repairs": ["x"], "loaded": True},
        "c": {"applied": [], "loaded": True},
        "undone": {"applied": [], "rows_discarded": 7, "loaded": False},
    }
    assert run_summary(entries) == (
        "dbt-spark-contracts: 1 model changed schema, 3 rows discarded (3 quarantined), "
        "1 value discarded, 1 table repaired (target/schema_changes.json)"
    )
    assert run_summary({"c": {"applied": []}}) is None


def test_run_summary_names_planned_and_blocked_models_in_order():
    entries = {
        "a": {"dry_run": True},
        "b": {"dry_run": True, "plan": {"blocked": [{"change": "x"}]}},
        "c": {"loaded": True, "values_discarded": 2},
    }
    assert run_summary(entries) == (
        "dbt-spark-contracts: 2 models planned (dry run, nothing changed), 1 model blocked, "
        "2 values discarded (target/schema_changes.json)"
    )


def test_plan_markdown_shows_safe_and_blocked_changes_with_the_way_to_allow_them():
    entries = {
        "model.p.orders": {
            "relation": "db.orders",
            "table_format": "delta",
            "mode": "schema_evolution (strategy alter_and_backfill)",
            "write_path": "multi_step",
            "dry_run": True,
            "diff": [
                {"change": "ColumnAdded", "path": "note", "description": "new column note STRING"},
                {"change": "ColumnRemoved", "path": "old", "description": "column old removed"},
            ],
            "plan": {
                "operations": [{"op": "AddColumns", "description": "add columns note STRING"}],
                "blocked": [
                    {
                        "change": "column old removed",
                        "path": "old",
                        "reason": "dropping a column loses data",
                        "permitted_by": "allow_column_removal",
                    }
                ],
            },
            "statements": [],
        }
    }
    text = plan_markdown("inv-1", entries)
    assert "1 model planned, 1 blocked" in text
    assert "| new column note STRING | `note` | safe: planned |" in text
    assert "**blocked**: dropping a column loses data" in text
    assert "--vars '{allow_column_removal: true}'" in text


def test_a_change_the_settings_leave_is_not_called_planned():
    entry = {
        "relation": "db.t",
        "diff": [{"change": "ColumnAdded", "path": "x", "description": "column added `x`"}],
        "plan": {"operations": [], "blocked": []},
        "statements": [],
    }
    text = plan_markdown("inv", {"model.p.t": entry})
    assert "no change planned" in text and "safe" not in text, text


def test_the_plan_file_marks_the_statements_sent_after_the_load():
    drop = "ALTER TABLE db.t DROP COLUMNS (`s`.`b`)"
    entry = {
        "relation": "db.t",
        "diff": [{"change": "FieldRemoved", "path": "s.b", "description": "field s.b removed"}],
        "plan": {"operations": [{"op": "DropColumns", "description": "drop columns s.b"}]},
        "statements": ["ALTER TABLE db.t ALTER COLUMN `s`.`b` DROP NOT NULL", drop],
        "after_load": [drop],
    }
    text = plan_markdown("inv", {"model.p.t": entry})
    assert "DROP NOT NULL;\n" in text and f"{drop};  -- after the load\n" in text, text


def test_catalog_stats_show_the_resolved_contract_and_leave_bad_or_absent_settings_out():
    stats = catalog_stats("model.p.m", {"data_type": "discard_row"}, {"strategy": "full_refresh"})
    assert stats["stats:schema_contract:include"] is True
    assert '"data_type": "discard_row"' in stats["stats:schema_contract:value"]
    assert '"tables": "evolve"' in stats["stats:schema_contract:value"]
    assert stats["stats:schema_evolution:value"] == '{"strategy": "full_refresh"}'
    bad = catalog_stats("model.p.m", {"columns": "fly"}, None)
    assert (
        bad["stats:schema_contract:label"] is None and bad["stats:schema_evolution:include"] is None
    )
