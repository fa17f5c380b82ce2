"""All-or-nothing runs (SPEC §4 "Atomicity") and the dry run, on real Spark.

- a v2 whose DDL is valid but whose query fails at run time changes nothing (any format);
- a v2 whose evolving load fails (Delta, one commit) leaves the table as it was;
- a v2 whose load fails after its steps ran is undone: Delta RESTORE, Iceberg drop + rollback;
- `schema_evolution_dry_run` plans and reports the DDL and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.spark_contracts.core.evolution.steps import Rename, Step
from dbt.adapters.spark_contracts.core.recovery.intent import INTENT_PROPERTY, Intent
from tests.functional.evolution.test_evolution_matrix import rows_of, schema_of

FORMATS = ("delta", "iceberg", "parquet")

QUERY_FAILS = """
{{{{ config(materialized='incremental', file_format='{fmt}', schema_evolution={{}}) }}}}
{{% if var('v', 1) == 1 %}}
select 1 as id
{{% else %}}
select 2 as id, cast(raise_error('boom at run time') as string) as note
{{% endif %}}
"""

LOAD_FAILS = """
{{{{ config(materialized='incremental', file_format='{fmt}', incremental_strategy='merge',
           unique_key='id', schema_evolution={{}}) }}}}
{{% if var('v', 1) == 1 %}}
select 1 as id
{{% else %}}
-- two source rows for one target row: MERGE fails after ADD COLUMNS has run
select 1 as id, 'a' as note union all select 1 as id, 'b' as note
{{% endif %}}
"""

# A column removal (`allow_column_removal`), then a MERGE that fails: the removed column and its
# values must be back after the run (Delta: column mapping on from the creation, for DROP).
DROP_FAILS = """
{{{{ config(materialized='incremental', file_format='{fmt}', incremental_strategy='merge',
           unique_key='id', schema_evolution={{}}{props}) }}}}
{{% if var('v', 1) == 1 %}}
select 1 as id, 10 as gone
{{% else %}}
select 1 as id, 'a' as note union all select 1 as id, 'b' as note
{{% endif %}}
"""
DELTA_MAPPING = ", tblproperties={'delta.columnMapping.mode': 'name'}"

# A struct's field removed: a v2 whose MERGE fails (two source rows for one key), one that
# loads (`drop_field_*`), and one under a schema contract (its load is the contract's SELECT).
DROP_FIELD = """
{{{{ config(materialized='incremental', file_format='{fmt}', incremental_strategy='merge',
           unique_key='id', schema_evolution={{}}{props}{contract}) }}}}
{{% if var('v', 1) == 1 %}}
select 1 as id, named_struct('a', 1, 'b', 2) as s
{{% else %}}
{v2}
{{% endif %}}
"""
FIELD_FAILS = (
    "select 1 as id, named_struct('a', 5) as s union all select 1 as id, named_struct('a', 6) as s"
)
FIELD_LOADS = "select 2 as id, named_struct('a', 3) as s"
CONTRACT = ", schema_contract={'columns': 'evolve'}"
# a MERGE whose source has two rows for one target row fails so (Delta's, Spark's for Iceberg)
MERGE_CARDINALITY = ("DELTA_MULTIPLE_SOURCE_ROW", "MERGE_CARDINALITY_VIOLATION")

# A default makes the change multi-step on Delta (ADD COLUMNS, SET DEFAULT, UPDATE, then the load).
LOAD_FAILS_STEPS = """
{{ config(materialized='incremental', file_format='delta', incremental_strategy='merge',
           unique_key='id', schema_evolution=({'columns': {'note': {'default': "'n'"}}} if var('v', 1) != 1 else {})) }}
{% if var('v', 1) == 1 %}
select 1 as id
{% else %}
select 1 as id, 'a' as note union all select 1 as id, 'b' as note
{% endif %}
"""

DRY_RUN = """
{{{{ config(materialized='incremental', file_format='{fmt}', schema_evolution={{}}) }}}}
{{% if var('v', 1) == 1 %}}
select 1 as id
{{% else %}}
select 2 as id, 'x' as note
{{% endif %}}
"""

# Delta cannot ALTER a column to NOT NULL, and CTAS makes every column nullable: the deployed
# NOT NULL table is created directly, as a table made outside dbt would be.
NOT_NULL_RELAXED = """
{{ config(materialized='incremental', file_format='delta', schema_evolution={}) }}
select 2 as id
"""


def rel(project, name: str, fmt: str) -> str:
    prefix = "iceberg." if fmt == "iceberg" else ""
    return f"{prefix}{project.test_schema}.{name}"


class TestAtomicity:
    @pytest.fixture(scope="class")
    def models(self):
        files = {"not_null_relaxed.sql": NOT_NULL_RELAXED, "load_fails_steps.sql": LOAD_FAILS_STEPS}
        for fmt in FORMATS:
            files[f"query_fails_{fmt}.sql"] = QUERY_FAILS.format(fmt=fmt)
            files[f"dry_run_{fmt}.sql"] = DRY_RUN.format(fmt=fmt)
        # no table yet when the dry run runs: it is built (a dry run changes no existing table)
        files["dry_new_delta.sql"] = DRY_RUN.format(fmt="delta")
        for fmt in ("delta", "iceberg"):
            files[f"load_fails_{fmt}.sql"] = LOAD_FAILS.format(fmt=fmt)
            props = DELTA_MAPPING if fmt == "delta" else ""
            files[f"drop_fails_{fmt}.sql"] = DROP_FAILS.format(fmt=fmt, props=props)
            for name, v2, contract in (
                ("drop_field_fails", FIELD_FAILS, ""),
                ("drop_field", FIELD_LOADS, ""),
                ("drop_field_contract", FIELD_LOADS, CONTRACT),
            ):
                model = DROP_FIELD.format(fmt=fmt, props=props, contract=contract, v2=v2)
                files[f"{name}_{fmt}.sql"] = model
        return files

    @pytest.fixture(scope="class")
    def before(self, project):
        table = rel(project, "not_null_relaxed", "delta")
        project.run_sql(f"create table {table} (id int not null) using delta")
        project.run_sql(f"insert into {table} values (1)")
        run_dbt(["run", "--exclude", "not_null_relaxed", "dry_new_delta"])
        snapshot = {}
        for fmt in FORMATS:
            for name in (f"query_fails_{fmt}", f"dry_run_{fmt}"):
                r = rel(project, name, fmt)
                snapshot[name] = (schema_of(project, r), rows_of(project, r))
        for name, fmt in (
            ("load_fails_delta", "delta"),
            ("load_fails_iceberg", "iceberg"),
            ("load_fails_steps", "delta"),
            ("drop_fails_delta", "delta"),
            ("drop_fails_iceberg", "iceberg"),
            ("drop_field_fails_delta", "delta"),
            ("drop_field_fails_iceberg", "iceberg"),
        ):
            r = rel(project, name, fmt)
            snapshot[name] = (schema_of(project, r), rows_of(project, r))
        return snapshot

    @pytest.fixture(scope="class")
    def v2(self, project, before):
        report_path = Path(project.project_root) / "target/schema_changes.json"
        results, report = {}, {"models": {}}
        for args, expect in (
            (
                ["--vars", "{v: 2, allow_column_removal: true}", "--select", "query_fails_*"]
                + ["load_fails_*", "drop_fails_*", "drop_field_*"],
                False,
            ),
            (
                ["--vars", "{v: 2, schema_evolution_dry_run: true}", "--select", "dry_run_*"]
                + ["dry_new_delta"],
                True,
            ),
            (["--vars", "{v: 2}", "--select", "not_null_relaxed"], True),
        ):
            for r in run_dbt(["run", *args], expect_pass=expect):
                results[r.node.name] = r
            # the report belongs to one invocation: it is read after each
            this_run = json.loads(report_path.read_text())
            assert this_run["invocation_id"]
            assert not set(this_run["models"]) & set(report["models"]), this_run["models"].keys()
            report["models"].update(this_run["models"])
        return results, report

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_query_failing_at_run_time_changes_nothing(self, project, before, v2, fmt):
        results, _ = v2
        name = f"query_fails_{fmt}"
        assert str(results[name].status) == "error"
        assert "boom at run time" in results[name].message
        r = rel(project, name, fmt)
        assert (schema_of(project, r), rows_of(project, r)) == before[name]

    def test_evolving_load_failing_changes_nothing(self, project, before, v2):
        """Delta: the new column rides in the MERGE; the MERGE fails, so nothing was committed."""
        results, report = v2
        name = "load_fails_delta"
        assert str(results[name].status) == "error"
        assert "DELTA_MULTIPLE_SOURCE_ROW" in results[name].message, results[name].message
        r = rel(project, name, "delta")
        assert (schema_of(project, r), rows_of(project, r)) == before[name]
        entry = report["models"][f"model.test.{name}"]
        assert entry["write_path"] == "in_write" and entry["executed"] == [], entry

    @pytest.mark.parametrize(
        "name,fmt", [("load_fails_steps", "delta"), ("load_fails_iceberg", "iceberg")]
    )
    def test_load_failing_after_ddl_is_undone(self, project, before, v2, name, fmt):
        results, report = v2
        assert str(results[name].status) == "error"
        assert "undone" in results[name].message, results[name].message
        r = rel(project, name, fmt)
        assert (schema_of(project, r), rows_of(project, r)) == before[name]
        entry = report["models"][f"model.test.{name}"]
        assert entry["executed"], entry  # the DDL did run before the load failed ...
        assert entry["restored"] and "FAILED" not in entry["restored"]  # ... and was undone

    @pytest.mark.parametrize("fmt", ["delta", "iceberg"])
    def test_a_column_removal_is_undone_with_its_failed_load(self, project, before, v2, fmt):
        """A run removing a column whose load fails leaves the column with its values: the
        table is as before the run, schema and rows. Delta drops it first and its RESTORE
        brings it back; an Iceberg rollback keeps the schema (a dropped column would stay
        dropped), so there the removal is the run's last step, after the load, never sent
        here."""
        results, report = v2
        name = f"drop_fails_{fmt}"
        assert str(results[name].status) == "error"
        entry = report["models"][f"model.test.{name}"]
        dropped = [s for s in entry["executed"] if "drop columns" in s.lower()]
        assert bool(dropped) == (fmt == "delta"), entry
        r = rel(project, name, fmt)
        assert (schema_of(project, r), rows_of(project, r)) == before[name]

    @pytest.mark.parametrize("fmt", ["delta", "iceberg"])
    def test_a_struct_field_removal_is_undone_with_its_failed_load(self, project, before, v2, fmt):
        """As for a column: a run removing a struct's field whose load fails leaves the field
        with its values. On Iceberg the field's DROP goes after the load too (the load writes
        the field NULL, the table still having it), so it is never sent here; before, it went
        first and stayed dropped (an Iceberg rollback keeps the schema)."""
        results, report = v2
        name = f"drop_field_fails_{fmt}"
        assert str(results[name].status) == "error"
        # the MERGE's own failure (two source rows for one key), not a load the change broke
        message = results[name].message
        assert any(e in message for e in MERGE_CARDINALITY), message
        entry = report["models"][f"model.test.{name}"]
        dropped = [s for s in entry["executed"] if "drop columns" in s.lower()]
        assert bool(dropped) == (fmt == "delta"), entry
        r = rel(project, name, fmt)
        assert (schema_of(project, r), rows_of(project, r)) == before[name]

    @pytest.mark.parametrize("contract", ["", "_contract"])
    @pytest.mark.parametrize("fmt", ["delta", "iceberg"])
    def test_a_struct_field_removal_that_loads_drops_the_field(
        self, project, before, v2, fmt, contract
    ):
        """The run that removes a struct's field and loads: the field is gone from the table,
        the old row keeps its other fields, the new row is there (on Iceberg the DROP is the
        run's last statement, after the load that wrote the field NULL); with or without a
        schema contract (whose load is its own SELECT)."""
        results, report = v2
        name = f"drop_field{contract}_{fmt}"
        assert str(results[name].status) == "success", results[name].message
        r = rel(project, name, fmt)
        assert schema_of(project, r) == {"id": "int", "s": "struct<a:int>"}
        assert rows_of(project, r, "id, to_json(s)") == [(1, '{"a":1}'), (2, '{"a":3}')]
        entry = report["models"][f"model.test.{name}"]
        executed = entry["executed"]
        if fmt == "iceberg":
            assert "drop columns" in executed[-1].lower(), executed
        # schema_changes.json names the statements sent after the load
        assert bool(entry["after_load"]) == (fmt == "iceberg"), entry
        assert set(entry["after_load"]) <= set(entry["statements"]), entry

    @pytest.mark.parametrize("fmt", FORMATS)
    def test_dry_run_reports_ddl_and_changes_nothing(self, project, before, v2, fmt):
        results, report = v2
        name = f"dry_run_{fmt}"
        assert str(results[name].status) == "success"
        assert results[name].adapter_response.get("dry_run") is True
        r = rel(project, name, fmt)
        assert (schema_of(project, r), rows_of(project, r)) == before[name]
        entry = report["models"][f"model.test.{name}"]
        assert entry["dry_run"] is True
        assert [op["op"] for op in entry["plan"]["operations"]] == ["AddColumns"], entry["plan"]
        # the planned DDL is reported on every format; on Delta the load would carry it
        assert any("ADD COLUMNS" in s.upper() for s in entry["statements"]), entry
        if fmt == "delta":
            assert entry["write_path"] == "in_write", entry
        assert entry["executed"] == []

    def test_dry_run_builds_a_model_with_no_table_yet(self, project, before, v2):
        """The README's caveat: a dry run changes no existing table, and a model with no table
        yet is still built (its first build has no plan to dry-run; `before` excluded it)."""
        results, _ = v2
        assert str(results["dry_new_delta"].status) == "success"
        assert rows_of(project, rel(project, "dry_new_delta", "delta")) == [(2, "x")]

    def test_delta_not_null_relaxed(self, project, before, v2):
        results, report = v2
        assert str(results["not_null_relaxed"].status) == "success"
        with project.adapter.connection_named("__test"):
            schema = project.adapter.schema_json(
                f"select * from {rel(project, 'not_null_relaxed', 'delta')}"
            )
        assert schema["fields"][0]["nullable"] is True, schema
        entry = report["models"]["model.test.not_null_relaxed"]
        assert any("DROP NOT NULL" in s.upper() for s in entry["executed"]), entry
        assert rows_of(project, rel(project, "not_null_relaxed", "delta")) == [(1,), (2,)]


PARQUET_REWRITE = """
{{ config(materialized='incremental', file_format='parquet', schema_evolution={}) }}
{% if var('v', 1) == 1 %}
select 1 as id, cast(1 as int) as n
{% else %}
select 2 as id, cast(2 as bigint) as n
{% endif %}
"""


class TestParquetRewriteKilledBetweenRenames:
    """A parquet rewrite builds the new table beside the old one and swaps by two renames. A run
    killed between them leaves the old table under its backup name (with the run's intent); the
    next run puts it back under its name first, then runs as usual."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"pq_swap.sql": PARQUET_REWRITE}

    def intent_json(self, table: str) -> str:
        """The dead run's intent: its steps up to the rename to the backup (`kill -9` there)."""
        rename = f"ALTER TABLE {table} RENAME TO {table}__dbt_backup"
        swap = (Step(rename, Rename(f"{table}__dbt_backup", table)),)
        intent = Intent("dead-run", "model.test.pq_swap", table, "parquet", None, "tag", (), swap)
        return intent.to_json()

    def test_next_run_puts_the_old_table_back_then_runs(self, project):
        run_dbt(["run"])
        schema = project.test_schema
        table = f"{schema}.pq_swap"
        # the state `kill -9` leaves after `ALTER TABLE t RENAME TO t__dbt_backup`
        plain = self.intent_json(table)
        value = plain.replace("'", "\\'").replace("{", "{{").replace("}", "}}")
        project.run_sql(f"alter table {table} set tblproperties ('{INTENT_PROPERTY}' = '{value}')")
        project.run_sql(f"alter table {table} rename to {table}__dbt_backup")
        project.run_sql(f"create table {table}__dbt_rewrite (id int, n bigint) using parquet")

        results = run_dbt(["run", "--vars", "{v: 2, allow_full_refresh: true}"])

        assert any("dead-run" in r for r in results[0].adapter_response["repairs"])
        assert rows_of(project, table) == [(1, 1), (2, 2)]
        assert schema_of(project, table)["n"] == "bigint"
        names = {r[1] for r in project.run_sql(f"show tables in {schema}", fetch="all")}
        assert names == {"pq_swap", "dbt_schema_history"}, names  # no backup, no half-built copy
        history = project.run_sql(
            f"select event, detail from {schema}.dbt_schema_history order by event", fetch="all"
        )
        events = [r[0] for r in history]
        assert "repair" in events and "change" in events, history  # the repair is on record
        assert any("dead-run" in r[1] for r in history if r[0] == "repair"), history


class TestParquetRewriteKilledBetweenRenamesByAnEarlierVersion(
    TestParquetRewriteKilledBetweenRenames
):
    """The same, the intent left by a run of the version that recorded its statements as text:
    read back with the rewrite's inverses, and put back the same way."""

    def intent_json(self, table: str) -> str:
        intent = json.loads(
            Intent("dead-run", "model.test.pq_swap", table, "parquet", None, "tag").to_json()
        )
        del intent["steps"]
        return json.dumps(
            intent | {"statements": [f"ALTER TABLE {table} RENAME TO {table}__dbt_backup"]}
        )
