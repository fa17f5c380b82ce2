"""The run path's promises on real Spark (embedded session, threads: 4 from conftest):

- eight evolving models at once, each with its own commit tag (no SQL conf leaks across threads),
  under every `--profile` (session, thrift, connect);
- an incremental run with no schema change makes at most five Spark calls naming the model
  (dbt-spark makes three: create view, describe, merge);
- a failing multi-step run does not restore over another writer's commit: it names it instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.spark_contracts import run as runs
from dbt.adapters.spark_contracts.connection import cursor as spark_cursor
from dbt.adapters.spark_contracts.connection import session as embedded
from tests.functional.evolution.test_evolution_matrix import rows_of, schema_of
from tests.functional.probes import probe_model

# Session-only classes say why; TestEightModelsAtOnce runs under every --profile (threads 4).
PARALLEL = {
    f"par_{i}.sql": probe_model(
        f"file_format='{fmt}', {strategy} schema_evolution={{}}",
        f"select id, cast(id as int) as n from range({i + 1})",
        f"select id, cast(id as bigint) as n, 'm{i}' as note, named_struct('k', id) as s "
        f"from range({i + 1}, {i + 3})",
    )
    for i, (fmt, strategy) in enumerate(
        [
            ("delta", "unique_key='id',"),
            ("delta", "incremental_strategy='append',"),
            ("delta", "unique_key='id',"),
            ("delta", "incremental_strategy='append',"),
            ("iceberg", "unique_key='id',"),
            ("iceberg", "incremental_strategy='append',"),
            ("delta", "unique_key='id',"),
            ("delta", "incremental_strategy='append',"),
        ]
    )
}


class TestEightModelsAtOnce:
    @pytest.fixture(scope="class")
    def models(self):
        return PARALLEL

    def test_eight_evolving_models_threads_4(self, project):
        run_dbt(["run"])
        results = run_dbt(["run", "--vars", "{v: 2}"])
        assert len(results) == 8 and all(str(r.status) == "success" for r in results)
        formats = ["delta", "delta", "delta", "delta", "iceberg", "iceberg", "delta", "delta"]
        for i, fmt in enumerate(formats):
            prefix = "iceberg." if fmt == "iceberg" else ""
            rel = f"{prefix}{project.test_schema}.par_{i}"
            schema = schema_of(project, rel)
            assert (schema["n"], schema["note"], schema["s"]) == (
                "bigint",
                "string",
                "struct<k:bigint>",
            ), (i, schema)
            ids = [r[0] for r in rows_of(project, rel, "id")]
            assert ids == list(range(i + 3)), (i, ids)
            # the load commit carries this model's tag, not another thread's
            if fmt == "delta":
                last = project.run_sql(f"describe history {rel} limit 1", fetch="all")[0]
                tag = last[13]
            else:
                tag = project.run_sql(
                    f"select summary['dbt-spark-contracts'] from {rel}.snapshots "
                    "order by committed_at desc limit 1",
                    fetch="one",
                )[0]
            assert (tag or "").endswith(f"model.test.par_{i}"), (i, tag)
        report = json.loads((Path(project.project_root) / "target/schema_changes.json").read_text())
        assert sorted(report["models"]) == sorted(f"model.test.par_{i}" for i in range(8))


COUNTED = "{{ config(materialized='incremental', file_format='delta', unique_key='id', schema_evolution={}) }}\nselect id from range(3)\n"


@pytest.mark.profile("session")  # counts the embedded cursor's calls (SparkSessionCursor)
class TestFewRoundTrips:
    @pytest.fixture(scope="class")
    def models(self):
        return {"counted_model.sql": COUNTED}

    def test_no_change_run_makes_at_most_five_spark_calls(self, project, monkeypatch):
        run_dbt(["run"])
        calls: list[str] = []
        execute, schema_json = (
            spark_cursor.SparkSessionCursor.execute,
            spark_cursor.SparkSessionCursor.schema_json,
        )

        def counting_execute(self, sql, *args):
            calls.append(sql)
            return execute(self, sql, *args)

        def counting_schema(self, sql):
            calls.append(sql)
            return schema_json(self, sql)

        monkeypatch.setattr(spark_cursor.SparkSessionCursor, "execute", counting_execute)
        monkeypatch.setattr(spark_cursor.SparkSessionCursor, "schema_json", counting_schema)
        relation_schema = spark_cursor.SparkSessionCursor.relation_schema

        def counting_relation(self, relation):
            calls.append(f"relation {relation}")
            return relation_schema(self, relation)

        monkeypatch.setattr(spark_cursor.SparkSessionCursor, "relation_schema", counting_relation)
        run_dbt(["run"])
        mine = [c for c in calls if "counted_model" in c.lower()]
        assert any("merge into" in c.lower() for c in mine), mine
        assert len(mine) <= 5, "\n---\n".join(mine)


FOREIGN = """
{{ config(materialized='incremental', file_format='delta', unique_key='id',
          schema_evolution=({'columns': {'note': {'default': "'n'"}}} if var('v', 1) != 1 else {})) }}
{% if var('v', 1) == 1 %}
select 1 as id
{% else %}
-- two source rows for one key: the MERGE fails after the multi-step changes ran
select 1 as id, 'a' as note union all select 1 as id, 'b' as note
{% endif %}
"""


FOREIGN_ICEBERG = """
{{ config(materialized='incremental', file_format='iceberg', unique_key='id', schema_evolution={}) }}
{% if var('v', 1) == 1 %}
select 1 as id
{% else %}
select 1 as id, 'a' as note union all select 1 as id, 'b' as note
{% endif %}
"""


@pytest.mark.profile("session")  # the other writer is a py4j session in this process
class TestForeignCommitIsKept:
    @pytest.fixture(scope="class")
    def models(self):
        return {"foreign_delta.sql": FOREIGN, "foreign_iceberg.sql": FOREIGN_ICEBERG}

    @pytest.mark.parametrize("fmt", ["delta", "iceberg"])
    def test_failed_run_does_not_restore_over_another_writer(self, project, monkeypatch, fmt):
        name = f"foreign_{fmt}"
        run_dbt(["run", "--select", name])
        prefix = "iceberg." if fmt == "iceberg" else ""
        table = f"{prefix}{project.test_schema}.{name}"
        begin = runs.Runner._begin_steps

        def then_another_writer(self, run):
            begin(self, run)
            other = embedded.get_session(project.adapter.config.credentials.embedded_config())
            other = other.newSession()
            other.conf.set(runs.DELTA_USER_METADATA, "streaming-job")
            other.conf.set(runs.ICEBERG_SNAPSHOT_TAG, "streaming-job")
            other.sql(f"insert into {table} (id) values (99)")

        monkeypatch.setattr(runs.Runner, "_begin_steps", then_another_writer)
        results = run_dbt(["run", "--select", name, "--vars", "{v: 2}"], expect_pass=False)
        message = results[0].message
        assert "another writer committed" in message and "streaming-job" in message, message
        assert 99 in [r[0] for r in rows_of(project, table, "id")]


class TestTheTagEndsWithTheNode:
    """dbt ends every node with `post_model_hook` (in a `finally`): the node's commit tag leaves
    the thread's session there, on real Spark, whatever the node's materialization did."""

    def test_post_model_hook_clears_the_sessions_tag(self, project):
        adapter = project.adapter
        with adapter.connection_named("tag_probe"):
            spark = adapter._spark()
            adapter._tags.set(spark, "dbt-spark-contracts:probe:model.test.x")
            assert (
                spark.get_conf(runs.DELTA_USER_METADATA) == "dbt-spark-contracts:probe:model.test.x"
            )
            adapter.post_model_hook({}, None)
            assert not spark.get_conf(runs.DELTA_USER_METADATA)
            assert not spark.get_conf(runs.ICEBERG_SNAPSHOT_TAG)
