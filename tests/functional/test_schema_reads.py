"""What one incremental run of an existing model sends to Spark, counted under every profile.

The adapter's calls are recorded where they leave the process, nothing is replaced: over thrift
every SQL statement the connection executes, over connect every ExecutePlan / AnalyzePlan /
Config RPC of the Spark Connect client, for the embedded session every `SparkSession.sql` /
`SparkSession.table` call and every table loaded from its catalog in the JVM (`load_table`). A call
made while the adapter reads a schema (the connection's `schema_json` / `relation_schema` /
`relation_schemas` / `table_with_properties`) counts as schema analysis; the others by their
statement: `show tblproperties` (properties), SET / RESET / Config (conf), everything else
(other).

The asserted figures are the schema analysis of one model's run: a read added back fails here.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Dict, List

import pytest
from dbt.adapters.factory import get_adapter_by_type
from dbt.tests.util import get_connection, run_dbt

from dbt.adapters.spark_contracts.connection import connections as spark_connections
from dbt.adapters.spark_contracts.connection import cursor as spark_cursor

MODEL = """
{{ config(materialized='incremental', file_format='FORMAT', unique_key='id', schema_evolution={}) }}
{% if var('v', 1) == 1 %}
select id, named_struct('a', id) as s from range(3)
{% else %}
select id, named_struct('a', id, 'b', 'x') as s, 'n' as note from range(3)
{% endif %}
"""

MODELS = {
    f"{fmt}_{change}.sql": MODEL.replace("FORMAT", fmt)
    for fmt in ("delta", "iceberg")
    for change in ("same", "changed")
}

# Schema analysis of one incremental run, per profile: (statements or RPCs, relations read).
#   thrift:  one temporary view holding the model's row and the deployed table's as struct
#            columns, described AS JSON (2: Spark refuses DESCRIBE ... AS JSON for v2 tables,
#            Delta's and Iceberg's, so the table is read through a view either way) = 2
#   connect: one AnalyzePlan each for the view and the table (`spark.table(name).schema`) = 2
#   session: `spark.table(name)` for the view, one catalog lookup (schema and properties) for
#            the table = 2
EXPECTED_SCHEMA_ANALYSIS = {"thrift": 2, "connect": 2, "session": 2}
# SHOW TBLPROPERTIES statements of the run: the embedded session reads the properties with the
# schema, in the table's catalog
EXPECTED_PROPERTIES = {"thrift": 1, "connect": 1, "session": 0}
# A run that changes the table in several steps (Iceberg's ALTER, then the load) reads the
# table once more when it holds its lease, before its first change: another run may have
# changed the schema since (run/unchanged.check_unchanged). The same read as the first one:
REREAD_SCHEMA = {"thrift": 2, "connect": 1, "session": 1}
REREAD_PROPERTIES = EXPECTED_PROPERTIES
MULTI_STEP = {"iceberg_changed"}  # Delta's changes here ride in the load's one commit


@dataclass(frozen=True)
class Sent:
    node: str  # the dbt connection's name: the model's unique id while the model runs
    kind: str  # schema / properties / conf / other
    text: str


def _statement(sql: str) -> str:
    """The statement without dbt's leading `/* {...} */` query comment, on one line."""
    sql = sql.strip()
    if sql.startswith("/*") and "*/" in sql:
        sql = sql[sql.index("*/") + 2 :]
    return " ".join(sql.split())


def _kind_of_sql(sql: str) -> str:
    words = _statement(sql).lower().split()
    if words[:2] == ["show", "tblproperties"]:
        return "properties"
    if words and words[0] in ("set", "reset"):
        return "conf"
    return "other"


def _connect_sql(request: Any) -> str:
    """The SQL text of an ExecutePlan request, or what the plan is when it carries none."""
    plan = request.plan
    if plan.HasField("command"):
        command = plan.command
        if command.HasField("sql_command"):
            sql = command.sql_command
            return sql.input.sql.query if sql.HasField("input") else sql.sql
        return command.WhichOneof("command_type") or "command"
    return plan.root.WhichOneof("rel_type") or "relation"


class Recorder:
    """Spies on the boundary of the profile's method; every call goes on unchanged."""

    def __init__(self, profile: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.profile = profile
        self.sent: List[Sent] = []
        self._state = threading.local()
        self._lock = threading.Lock()
        self._patch = monkeypatch
        self._install()

    # -- bookkeeping
    def _node(self) -> str:
        connection = get_adapter_by_type("spark_contracts").connections.get_if_exists()
        return str(connection.name) if connection is not None else ""

    def _record(self, kind: str, text: str) -> None:
        if getattr(self._state, "reading", 0) and kind != "properties":
            kind = "schema"
        with self._lock:
            self.sent.append(Sent(self._node(), kind, _statement(text)[:160]))

    def _reading(self, original: Callable[..., Any]) -> Callable[..., Any]:
        state = self._state

        def read(*args: Any, **kwargs: Any) -> Any:
            state.reading = getattr(state, "reading", 0) + 1
            try:
                return original(*args, **kwargs)
            finally:
                state.reading -= 1

        return read

    def _spy(self, owner: Any, name: str, describe: Callable[..., tuple]) -> None:
        original = getattr(owner, name)

        def spy(*args: Any, **kwargs: Any) -> Any:
            self._record(*describe(*args, **kwargs))
            return original(*args, **kwargs)

        self._patch.setattr(owner, name, spy)

    def _install(self) -> None:
        for wrapper in (
            spark_connections.ContractsPyhiveConnectionWrapper,
            spark_cursor.SparkSessionConnectionWrapper,
        ):
            for name in (
                "schema_json",
                "relation_schema",
                "relation_schemas",
                "table_with_properties",
            ):
                if hasattr(wrapper, name):
                    self._patch.setattr(wrapper, name, self._reading(getattr(wrapper, name)))
        if self.profile == "thrift":
            self._spy(
                spark_connections.ContractsPyhiveConnectionWrapper,
                "execute",
                lambda _self, sql, *a, **k: (_kind_of_sql(sql), sql),
            )
        elif self.profile == "connect":
            from pyspark.sql.connect.client.core import SparkConnectClient

            self._spy(
                SparkConnectClient,
                "_execute_and_fetch_as_iterator",
                lambda _self, req, *a, **k: (_kind_of_sql(_connect_sql(req)), _connect_sql(req)),
            )
            self._spy(SparkConnectClient, "_analyze", lambda _self, method, **k: ("other", method))
            self._spy(SparkConnectClient, "config", lambda _self, op: ("conf", str(op)[:60]))
        else:
            from pyspark.sql import SparkSession

            self._spy(SparkSession, "sql", lambda _self, sql, *a, **k: (_kind_of_sql(sql), sql))
            self._spy(SparkSession, "table", lambda _self, name: ("other", f"table {name}"))
            self._spy(spark_cursor, "load_table", lambda _s, name: ("other", f"load {name}"))

    def of(self, unique_id: str) -> List[Sent]:
        return [s for s in self.sent if s.node == unique_id]


def _report(profile: str, name: str, sent: List[Sent], seconds: float) -> str:
    kinds = Counter(s.kind for s in sent)
    lines = [f"{profile} {name}: {len(sent)} sent in {seconds:.1f}s, by kind {dict(kinds)}"]
    lines += [f"  [{s.kind}] {s.text}" for s in sent]
    return "\n".join(lines)


class TestSchemaReadsPerIncrementalRun:
    @pytest.fixture(scope="class")
    def models(self) -> Dict[str, str]:
        return MODELS

    @pytest.mark.parametrize("name", [n[:-4] for n in MODELS])
    def test_one_read_per_relation(
        self, project: Any, request: pytest.FixtureRequest, name: str
    ) -> None:
        profile = request.config.getoption("--profile")
        run_dbt(["run", "--select", name])  # creates the table
        recorder = Recorder(profile, request.getfixturevalue("monkeypatch"))
        v = 2 if name.endswith("changed") else 1
        started = time.monotonic()
        results = run_dbt(["run", "--select", name, "--vars", f"{{v: {v}}}"])
        seconds = time.monotonic() - started
        unique_id = f"model.test.{name}"
        sent = recorder.of(unique_id)
        report = _report(profile, name, sent, seconds)
        print(report)
        changes = results[0].adapter_response.get("schema_changes") or []
        assert bool(changes) == (v == 2), report
        reread = name in MULTI_STEP
        schema = [s for s in sent if s.kind == "schema"]
        expected = EXPECTED_SCHEMA_ANALYSIS[profile] + (REREAD_SCHEMA[profile] if reread else 0)
        assert len(schema) == expected, report
        properties = [s for s in sent if s.kind == "properties"]
        expected = EXPECTED_PROPERTIES[profile] + (REREAD_PROPERTIES[profile] if reread else 0)
        assert len(properties) == expected, report


CONTRACT_MODEL = """
{{ config(materialized='incremental', file_format='delta', unique_key='id',
          schema_contract=CONTRACT) }}
select id, cast(id as {{ 'bigint' if var('v', 1) == 1 else 'string' }}) as n from range(3)
"""


class TestContractViewOnlyWhereItFilters:
    """A contract whose SELECT passes the model's output through (`evolve`, the output as
    deployed: no row filter, no coerced column) loads from the model's view; one that
    filters (`data_type: discard_row`: a STRING that does not coerce into the deployed BIGINT)
    gets a view of its own (`..__contract`) for the load to read."""

    @pytest.fixture(scope="class")
    def models(self) -> Dict[str, str]:
        return {
            "passes.sql": CONTRACT_MODEL.replace("CONTRACT", "'evolve'").replace(
                "{{ 'bigint' if var('v', 1) == 1 else 'string' }}", "bigint"
            ),
            "filters.sql": CONTRACT_MODEL.replace("CONTRACT", "{'data_type': 'discard_row'}"),
        }

    def test_contract_view(self, project: Any, request: pytest.FixtureRequest) -> None:
        profile = request.config.getoption("--profile")
        run_dbt(["run"])
        recorder = Recorder(profile, request.getfixturevalue("monkeypatch"))
        run_dbt(["run", "--vars", "{v: 2}"])
        views = {
            name: [s.text for s in recorder.of(f"model.test.{name}") if "__contract" in s.text]
            for name in ("passes", "filters")
        }
        assert views["passes"] == [] and views["filters"] != [], views


DDL = "(a int not null, s struct<b: string not null, c: array<int>>, m map<string, int>)"
EXPECTED_FIELDS = [
    {"name": "a", "type": "integer", "nullable": False, "metadata": {}},
    {
        "name": "s",
        "type": {
            "type": "struct",
            "fields": [
                {"name": "b", "type": "string", "nullable": False, "metadata": {}},
                {
                    "name": "c",
                    "type": {"type": "array", "elementType": "integer", "containsNull": True},
                    "nullable": True,
                    "metadata": {},
                },
            ],
        },
        "nullable": True,
        "metadata": {},
    },
    {
        "name": "m",
        "type": {
            "type": "map",
            "keyType": "string",
            "valueType": "integer",
            "valueContainsNull": True,
        },
        "nullable": True,
        "metadata": {},
    },
]


class TestRelationSchemaIsTyped:
    """The one-statement reads keep nested types and nullability, for every table format and
    for a temporary view, whether or not the caller knew the relation was describable."""

    @pytest.mark.parametrize("fmt", ["delta", "iceberg"])
    @pytest.mark.parametrize("describable", [False, True])
    def test_table(self, project: Any, fmt: str, describable: bool) -> None:
        catalog = "iceberg." if fmt == "iceberg" else ""
        relation = f"{catalog}{project.test_schema}.typed_{fmt}_{int(describable)}"
        if fmt == "iceberg":
            project.run_sql(f"create namespace if not exists iceberg.{project.test_schema}")
        project.run_sql(f"create table {relation} {DDL} using {fmt}")
        with get_connection(project.adapter):
            schema = project.adapter.relation_schema_json(relation, describable)
            by_query = project.adapter.schema_json(f"select * from {relation}")
        assert schema == {"type": "struct", "fields": EXPECTED_FIELDS}
        assert by_query == schema

    def test_temporary_view(self, project: Any) -> None:
        with get_connection(project.adapter):
            project.adapter.execute(
                "create or replace temporary view typed_view as select 1 as a, "
                "named_struct('b', 'x', 'c', array(1, null)) as s, map('k', 1) as m"
            )
            schema = project.adapter.relation_schema_json("typed_view", True)
        fields = {f["name"]: f for f in schema["fields"]}
        assert fields["a"]["nullable"] is False
        assert fields["s"]["type"]["fields"][0]["nullable"] is False
        assert fields["s"]["type"]["fields"][1]["type"]["containsNull"] is True
        assert fields["m"]["type"]["valueContainsNull"] is False


class TestDeployedTableRead:
    """A deployed table's schema and properties in one read (one catalog lookup on the embedded
    session): the same schema as the schema read and the same properties as SHOW TBLPROPERTIES,
    for every format, under every profile, whatever the name's catalog."""

    @pytest.mark.parametrize("fmt", ["delta", "iceberg", "parquet"])
    def test_schema_and_properties(self, project: Any, fmt: str) -> None:
        from dbt.adapters.spark_contracts.connection.spark_handle import _ConnectionSpark, from_json

        catalog = "iceberg." if fmt == "iceberg" else ""
        relation = f"{catalog}{project.test_schema}.deployed_{fmt}"
        if fmt == "iceberg":
            project.run_sql(f"create namespace if not exists iceberg.{project.test_schema}")
        note = "[a, b=c], d"  # a value with the separators a listing could split on
        project.run_sql(
            f"create table {relation} {DDL} using {fmt} tblproperties ('x.note'='{note}')"
        )
        listed = dict(project.run_sql(f"show tblproperties {relation}", fetch="all"))
        with get_connection(project.adapter):
            schema, properties = _ConnectionSpark(project.adapter).deployed(
                relation, fmt == "parquet"
            )
            expected = from_json(project.adapter.relation_schema_json(relation, fmt == "parquet"))
        assert schema == expected
        if fmt != "parquet":  # a file-source table keeps no NOT NULL
            assert schema == from_json({"type": "struct", "fields": EXPECTED_FIELDS})
        assert properties == {str(k): str(v) for k, v in listed.items()}
        assert properties["x.note"] == note
        if fmt != "iceberg":  # the session catalog named: the same table
            with get_connection(project.adapter):
                named = _ConnectionSpark(project.adapter).deployed(
                    f"spark_catalog.{relation}", fmt == "parquet"
                )
            assert named == (schema, properties)

    @pytest.mark.parametrize("fmt", ["delta", "iceberg"])
    def test_an_intent_naming_a_url_survives_show_tblproperties(
        self, project: Any, fmt: str
    ) -> None:
        """SHOW TBLPROPERTIES redacts a value that matches Spark's redaction patterns (`url`,
        `token`, ...): the intent of a model or column so named is stored hex-encoded and reads
        back whole by either read."""
        from dbt.adapters.spark_contracts.connection.spark_handle import _ConnectionSpark
        from dbt.adapters.spark_contracts.core.evolution.steps import DropAdded, Step
        from dbt.adapters.spark_contracts.core.recovery.intent import (
            INTENT_PROPERTY,
            Intent,
            commit_tag,
            find_intent,
        )

        catalog = "iceberg." if fmt == "iceberg" else ""
        relation = f"{catalog}{project.test_schema}.page_urls"
        if fmt == "iceberg":
            project.run_sql(f"create namespace if not exists iceberg.{project.test_schema}")
        project.run_sql(f"create table {relation} (id int) using {fmt}")
        unique_id = "model.test.page_urls"
        intent = Intent(
            "inv", unique_id, relation, fmt, None, commit_tag("inv", unique_id),
            (("api_token",),),
            (Step("ALTER TABLE t ADD COLUMNS (api_token STRING)", DropAdded("t", (("api_token",),))),),
        )  # fmt: skip
        # run_sql formats its text with str.format: the JSON's braces doubled
        plain = intent.to_json().replace("'", "\\'").replace("{", "{{").replace("}", "}}")
        project.run_sql(f"alter table {relation} set tblproperties ('x.plain' = '{plain}')")
        project.run_sql(
            f"alter table {relation} set tblproperties "
            f"('{INTENT_PROPERTY}' = '{intent.to_property()}')"
        )
        listed = dict(project.run_sql(f"show tblproperties {relation}", fetch="all"))
        assert listed["x.plain"] != intent.to_json()  # why it is encoded: redacted
        assert find_intent(listed) == intent
        with get_connection(project.adapter):
            _, properties = _ConnectionSpark(project.adapter).deployed(relation, False)
        assert find_intent(properties) == intent
