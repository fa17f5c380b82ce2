"""Every feature once per table format, a project and two `dbt run`s per format: CI's share of
the suites over the wire (`make cluster-ci` runs each format once on the cluster: Delta's over
connect, Iceberg's and Parquet's over thrift; `make cluster-test` every format over both, and
the whole evolution/contract suites).

Per format: schema evolution (a new column, and int -> bigint where the format widens in place),
a `columns: freeze` contract that stops a run and leaves its table as it was, `discard_row` with
quarantine, a dbt model contract (`contract: {enforced: true}`) checked on an incremental run, and
the model's own data tests as gates on the load (`data_tests: discard_row`, issue 42), their
failing rows quarantined with the test's name.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest
from dbt.tests.util import run_dbt

pytestmark = pytest.mark.profile("session", "thrift", "connect")


EVOLVING = """
{{{{ config(materialized='incremental', file_format='{fmt}', incremental_strategy='append',
          schema_evolution={{}}) }}}}
{{% if var('v', 1) == 1 %}}
select id, cast(id as {first_n}) as n from range(3)
{{% else %}}
select id, cast(id as bigint) as n, 'x' as note from range(3, 5)
{{% endif %}}
"""

FROZEN = """
{{{{ config(materialized='incremental', file_format='{fmt}', incremental_strategy='append',
          schema_contract={{'columns': 'freeze'}}) }}}}
{{% if var('v', 1) == 1 %}}
select id from range(2)
{{% else %}}
select id, 'new' as extra from range(2, 4)
{{% endif %}}
"""

DISCARDING = """
{{{{ config(materialized='incremental', file_format='{fmt}', incremental_strategy='append',
          schema_contract={{'data_type': 'discard_row', 'quarantine': true}}) }}}}
{{% if var('v', 1) == 1 %}}
select id, cast(id as bigint) as n from range(1)
{{% else %}}
select id, if(id % 5 = 0, 'bad', cast(id as string)) as n from range(1, 11)
{{% endif %}}
"""

ENFORCED = """
{{{{ config(materialized='incremental', file_format='{fmt}', incremental_strategy='append',
          contract={{'enforced': true}}, on_schema_change='append_new_columns') }}}}
{{% if var('v', 1) == 1 %}}
select 1 as id, named_struct('a', 1, 'b', 'x') as s
{{% else %}}
select 2 as id, named_struct('a', 2, 'b', 3) as s
{{% endif %}}
"""


# `not_null(name)` and `accepted_values(status)` gate the load: ids 4 and 8 carry status 'z',
# ids 5 and 10 a NULL name, the 6 others load
GATED = """
{{{{ config(materialized='incremental', file_format='{fmt}', incremental_strategy='append',
          schema_contract={{'data_tests': 'discard_row', 'quarantine': true}}) }}}}
{{% if var('v', 1) == 1 %}}
select id, 'x' as name, 'a' as status from range(1)
{{% else %}}
select id, if(id % 5 = 0, cast(null as string), 'x') as name,
       if(id % 4 = 0, 'z', 'a') as status
from range(1, 11)
{{% endif %}}
"""


KINDS = ("evolving", "frozen", "discarding", "enforced", "gated")


def _enforced_yml(formats: Tuple[str, ...]) -> str:
    return "\n".join(
        ["version: 2", "models:"]
        + [
            line
            for fmt in formats
            for line in (
                f"  - name: enforced_{fmt}",
                "    columns:",
                "      - name: id",
                "        data_type: int",
                "      - name: s",
                "        data_type: struct<a:int,b:string>",
                f"  - name: gated_{fmt}",
                "    columns:",
                "      - name: name",
                "        data_tests: [not_null]",
                "      - name: status",
                "        data_tests:",
                "          - accepted_values:",
                "              values: ['a', 'b']",
            )
        ]
    )


def _models(formats: Tuple[str, ...]) -> Dict[str, str]:
    models = {"schema.yml": _enforced_yml(formats)}
    for fmt in formats:
        # parquet cannot widen a column in place; its evolution here adds a column only
        first_n = "bigint" if fmt == "parquet" else "int"
        models[f"evolving_{fmt}.sql"] = EVOLVING.format(fmt=fmt, first_n=first_n)
        models[f"frozen_{fmt}.sql"] = FROZEN.format(fmt=fmt)
        models[f"discarding_{fmt}.sql"] = DISCARDING.format(fmt=fmt)
        models[f"enforced_{fmt}.sql"] = ENFORCED.format(fmt=fmt)
        models[f"gated_{fmt}.sql"] = GATED.format(fmt=fmt)
    return models


def _table(project: Any, fmt: str, name: str) -> str:
    prefix = "iceberg." if fmt == "iceberg" else ""
    return f"{prefix}{project.test_schema}.{name}"


def _rows(project: Any, sql: str) -> List[tuple]:
    return [tuple(r) for r in project.run_sql(sql, fetch="all")]


def _columns(project: Any, relation: str) -> Dict[str, str]:
    rows = project.run_sql(f"describe table {relation}", fetch="all")
    columns: Dict[str, str] = {}
    for row in rows:
        name = str(row[0]).strip()
        if not name or name.startswith("#"):
            break
        columns[name] = str(row[1]).strip().lower()
    return columns


class FeatureTour:
    """The tour over the formats `FORMATS` (a class per format: xdist spreads them, and
    `make cluster-ci`'s Connect pass takes Delta's, its Thrift pass Iceberg's and Parquet's)."""

    FORMATS: Tuple[str, ...] = ()

    @pytest.fixture(scope="class")
    def models(self):
        return _models(self.FORMATS)

    def test_every_feature_once_per_format(self, project):
        FORMATS = self.FORMATS
        assert FORMATS, "a tour names its formats"
        first = run_dbt(["run"])
        assert all(r.status == "success" for r in first), [(r.node.name, r.message) for r in first]
        expected = {f"{kind}_{fmt}" for fmt in FORMATS for kind in KINDS}
        assert {r.node.name for r in first} == expected, [r.node.name for r in first]

        second = run_dbt(["run", "--vars", "{v: 2}"], expect_pass=False)
        status = {r.node.name: str(r.status) for r in second}
        for fmt in FORMATS:
            assert status[f"frozen_{fmt}"] == "error", status
            assert status[f"enforced_{fmt}"] == "error", status
            assert status[f"evolving_{fmt}"] == "success", status
            assert status[f"discarding_{fmt}"] == "success", status
            assert status[f"gated_{fmt}"] == "success", status
        messages = {r.node.name: str(r.message) for r in second}
        for fmt in FORMATS:
            assert "extra" in messages[f"frozen_{fmt}"], messages[f"frozen_{fmt}"]

        for fmt in FORMATS:
            evolving = _table(project, fmt, f"evolving_{fmt}")
            assert _columns(project, evolving) == {"id": "bigint", "n": "bigint", "note": "string"}
            assert _rows(project, f"select id, n, note from {evolving} order by id") == [
                (0, 0, None),
                (1, 1, None),
                (2, 2, None),
                (3, 3, "x"),
                (4, 4, "x"),
            ]
            # the frozen model's run failed before writing: rows and columns as after run 1
            frozen = _table(project, fmt, f"frozen_{fmt}")
            assert _columns(project, frozen) == {"id": "bigint"}
            assert _rows(project, f"select id from {frozen} order by id") == [(0,), (1,)]
            # the model contract stopped the incremental run (s.b became an int): nothing loaded
            enforced = _table(project, fmt, f"enforced_{fmt}")
            assert _rows(project, f"select id from {enforced}") == [(1,)]
            # discard_row: ids 5 and 10 carry 'bad'; the 8 others loaded, the 2 bad quarantined
            discarding = _table(project, fmt, f"discarding_{fmt}")
            assert _rows(project, f"select id from {discarding} order by id") == [
                (i,) for i in range(0, 10) if i != 5
            ]
            quarantine = _table(project, fmt, f"discarding_{fmt}__quarantine")
            assert sorted(r[0] for r in _rows(project, f"select id from {quarantine}")) == [5, 10]
            # the data tests as gates: counted per test, the failing rows quarantined with the
            # names of the tests they failed, the others loaded
            gated = {r.node.name: r for r in second}[f"gated_{fmt}"].adapter_response
            assert gated["rows_discarded"] == 4, gated
            counts = {c["reason"]: (c["action"], c["rows"]) for c in gated["data_tests"] or ()}
            assert counts == {
                "not_null(name)": ("discard_row", 2),
                "accepted_values(status)": ("discard_row", 2),
            }, counts
            table = _table(project, fmt, f"gated_{fmt}")
            assert _rows(project, f"select id from {table} order by id") == [
                (i,) for i in (0, 1, 2, 3, 6, 7, 9)
            ]
            sql = f"select id, _contract_reason from {table}__quarantine"
            assert {r[0]: set(str(r[1]).split("; ")) for r in _rows(project, sql)} == {
                4: {"accepted_values(status)"},
                5: {"not_null(name)"},
                8: {"accepted_values(status)"},
                10: {"not_null(name)"},
            }


class TestFeatureTourDelta(FeatureTour):
    FORMATS = ("delta",)


class TestFeatureTourIceberg(FeatureTour):
    FORMATS = ("iceberg",)


class TestFeatureTourParquet(FeatureTour):
    FORMATS = ("parquet",)
