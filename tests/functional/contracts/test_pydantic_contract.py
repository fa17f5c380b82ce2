"""`pydantic_contract` on real Spark: a Pydantic class in the test project (`contracts/orders.py`)
is the model's contract. Its fields are the expected columns, its constraints are checked in the
load query under the data_type mode (freeze fails, discard_row drops and quarantines,
discard_value nulls), its `extra='forbid'` freezes the columns; on incremental runs and on the
run that creates the table; the model's query is still evaluated once per run; a bad class
fails `dbt parse` naming the model and the field."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Annotated, Literal, Optional

import pytest
from dbt.tests.fixtures.project import write_project_files
from dbt.tests.util import run_dbt
from pydantic import BaseModel, Field, ValidationError

from dbt.adapters.spark_contracts.core.contracts.pydantic_contract import contract_from_class
from dbt.adapters.spark_contracts.core.schema.types import quote_identifier, sql_string
from tests.functional.evolution.test_evolution_matrix import rows_of, schema_of
from tests.functional.probes import ROWS, versioned_model

ORDERS_PY = """
from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field


class Address(BaseModel):
    city: str
    zip: str = Field(max_length=5, pattern=r"^[0-9]+$")


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int = Field(ge=1)
    status: Literal["new", "paid", "shipped"]
    qty: Optional[int] = Field(default=None, ge=0, le=100)
    note: Optional[str] = Field(default=None, max_length=10)
    address: Optional[Address] = None
    tags: list[Annotated[str, Field(max_length=8)]] = []
"""

COLUMNS = "as t(id, status, qty, note, address, tags)"
VALID_V1 = (
    "select * from values "
    "(1, 'new', 1, 'first', named_struct('city', 'Oslo', 'zip', '0150'), array('a')), "
    f"(2, 'paid', cast(null as int), cast(null as string), named_struct('city', 'Rome', 'zip', '00100'), array('b', 'c')) {COLUMNS}"
)
# id 3 valid; 4 qty above le=100 (Optional); 5 status not a literal (required); 6 address.zip
# breaks the pattern (address Optional); 7 a tag longer than 8 (tags required)
MIXED_V2 = (
    "select * from values "
    "(3, 'shipped', 7, 'ok', named_struct('city', 'Oslo', 'zip', '0150'), array('x')), "
    "(4, 'new', 500, 'big', named_struct('city', 'Oslo', 'zip', '0150'), array('x')), "
    "(5, 'lost', 1, 'gone', named_struct('city', 'Oslo', 'zip', '0150'), array('x')), "
    "(6, 'paid', 2, 'zip', named_struct('city', 'Bergen', 'zip', 'ab'), array('x')), "
    f"(7, 'new', 3, 'tag', named_struct('city', 'Oslo', 'zip', '0150'), array('far_too_long')) {COLUMNS}"
)
ONE_BAD_QTY = (
    "select * from values "
    "(3, 'shipped', 7, 'ok', named_struct('city', 'Oslo', 'zip', '0150'), array('x')), "
    f"(4, 'new', 500, 'big', named_struct('city', 'Oslo', 'zip', '0150'), array('x')) {COLUMNS}"
)
EXTRA_COLUMN = (
    "select *, 'SAVE10' as coupon from values "
    f"(3, 'shipped', 7, 'ok', named_struct('city', 'Oslo', 'zip', '0150'), array('x')) {COLUMNS}"
)


def model(
    config: str, v1: str, v2: str, materialized: str = "incremental", package: str = "contracts"
) -> str:
    settings = f"materialized='{materialized}', pydantic_contract='{package}.orders:Order'"
    settings += f", {config}" if config else ""
    return versioned_model(settings, v1, v2)


PROBE = (
    f"select cast(probe_eval(id) as bigint) + 1 as id, if(id % 10 = 0, 'lost', 'new') as status,"
    " cast(id % 50 as int) as qty, cast(null as string) as note,"
    " cast(null as struct<city:string,zip:string>) as address, array('p') as tags"
    f" from range({ROWS})"
)
VALID_ONE = (
    "select cast(1000 as bigint) as id, 'new' as status, 1 as qty, cast(null as string) as note,"
    " cast(null as struct<city:string,zip:string>) as address, array('p') as tags"
)

MODELS = {
    "p_freeze.sql": model("file_format='delta', unique_key='id'", VALID_V1, ONE_BAD_QTY),
    "p_discard_row.sql": model(
        "file_format='delta', schema_contract={'data_type': 'discard_row', 'quarantine': true}",
        VALID_V1,
        MIXED_V2,
    ),
    "p_discard_value.sql": model(
        "file_format='delta', unique_key='id', schema_contract={'data_type': 'discard_value'}",
        VALID_V1,
        MIXED_V2,
    ),
    "p_discard_row_iceberg.sql": model(
        "file_format='iceberg', schema_contract={'data_type': 'discard_row'}", VALID_V1, MIXED_V2
    ),
    "p_extra.sql": model("file_format='delta'", VALID_V1, EXTRA_COLUMN),
    "p_first_freeze.sql": model("file_format='delta'", ONE_BAD_QTY, ONE_BAD_QTY),
    "p_first_extra.sql": model("file_format='delta'", EXTRA_COLUMN, EXTRA_COLUMN),
    "p_first_discard_value.sql": model(
        "file_format='delta', schema_contract={'data_type': 'discard_value'}", MIXED_V2, MIXED_V2
    ),
    "p_table_discard_row.sql": model(
        "file_format='delta', schema_contract={'data_type': 'discard_row'}",
        MIXED_V2,
        MIXED_V2,
        materialized="table",
    ),
    "p_eval_discard_row.sql": model(
        "file_format='delta', schema_contract={'data_type': 'discard_row', 'quarantine': true}",
        VALID_ONE,
        PROBE,
    ),
    "p_eval_discard_value.sql": model(
        "file_format='delta', schema_contract={'data_type': 'discard_value'}", VALID_ONE, PROBE
    ),
}


def write_contracts(project_root, orders_py: str, package: str = "contracts") -> None:
    """The class lives in the project; each test project its own package name, as Python
    imports a module once per process."""
    write_project_files(project_root, package, {"__init__.py": "", "orders.py": orders_py})


def by_name(results) -> dict:
    return {r.node.name: r for r in results}


class PydanticProject:
    @pytest.fixture(scope="class")
    def project_files(self, project_root, models):
        write_project_files(project_root, "models", models)
        write_contracts(project_root, ORDERS_PY)


class TestPydanticContract(PydanticProject):
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    def table(self, project, name: str) -> str:
        prefix = "iceberg." if name.endswith("iceberg") else ""
        return f"{prefix}{project.test_schema}.{name}"

    def test_contract(self, project):
        first = by_name(run_dbt(["run", "--exclude", "p_eval_*"], expect_pass=False))
        # the run that creates the table checks the class too
        assert str(first["p_first_freeze"].status) == "error"
        message = first["p_first_freeze"].message
        assert "qty" in message and "le=100" in message, message
        assert str(first["p_first_extra"].status) == "error"
        assert "coupon" in first["p_first_extra"].message
        for name in ("p_first_freeze", "p_first_extra"):
            assert project.adapter.get_relation(None, project.test_schema, name) is None, name
        assert [r[0] for r in rows_of(project, self.table(project, "p_first_discard_value"))] == [
            3,
            4,
            6,
        ]
        assert [r[0] for r in rows_of(project, self.table(project, "p_table_discard_row"))] == [3]
        # declared types, not the query's (int literals -> BIGINT, Literal -> STRING)
        schema = schema_of(project, self.table(project, "p_freeze"))
        assert schema == {
            "id": "bigint",
            "status": "string",
            "qty": "bigint",
            "note": "string",
            "address": "struct<city:string,zip:string>",
            "tags": "array<string>",
        }, schema

        results = by_name(
            run_dbt(
                ["run", "--vars", "{v: 2}", "--select", "p_freeze p_discard_* p_extra"],
                expect_pass=False,
            )
        )
        # freeze: the run fails naming the column and the rule; the table is unchanged
        assert str(results["p_freeze"].status) == "error"
        message = results["p_freeze"].message
        assert "column: qty" in message and "le=100" in message and "'500'" in message, message
        assert [r[0] for r in rows_of(project, self.table(project, "p_freeze"))] == [1, 2]
        # extra='forbid' -> columns freeze: a new column fails the run, the table is unchanged
        assert str(results["p_extra"].status) == "error"
        assert "coupon" in results["p_extra"].message
        assert "coupon" not in schema_of(project, self.table(project, "p_extra"))
        assert [r[0] for r in rows_of(project, self.table(project, "p_extra"))] == [1, 2]

        # discard_row: rows 4..7 dropped, counted, quarantined with their reasons
        for name in ("p_discard_row", "p_discard_row_iceberg"):
            assert str(results[name].status) == "success", results[name].message
            assert results[name].adapter_response["rows_discarded"] == 4
            assert [r[0] for r in rows_of(project, self.table(project, name))] == [1, 2, 3]
        quarantine = project.run_sql(
            f"select id, _contract_reason from {project.test_schema}.p_discard_row__quarantine "
            "order by id",
            fetch="all",
        )
        assert [r[0] for r in quarantine] == [4, 5, 6, 7]
        reasons = {r[0]: r[1] for r in quarantine}
        assert "`qty`" in reasons[4] and "le=100" in reasons[4], reasons
        assert "`status`" in reasons[5] and "one of" in reasons[5], reasons
        assert "address" in reasons[6] and "zip: pattern" in reasons[6], reasons
        assert "tags" in reasons[7] and "element: max_length=8" in reasons[7], reasons

        # discard_value: bad values of Optional fields nulled (4: qty, 6: address); a bad
        # required field (5: status, 7: tags) cannot be NULL, so its row is dropped
        response = results["p_discard_value"].adapter_response
        assert (response["rows_discarded"], response["values_discarded"]) == (2, 2), response
        rows = rows_of(project, self.table(project, "p_discard_value"), "id, qty, address.zip")
        assert rows == [
            (1, 1, "0150"),
            (2, None, "00100"),
            (3, 7, "0150"),
            (4, None, "0150"),
            (6, 2, None),
        ], rows
        report = json.loads((Path(project.project_root) / "target/schema_changes.json").read_text())
        entry = report["models"]["model.test.p_discard_value"]
        assert {c["column"] for c in entry["contract"]["rule_checks"]} == {
            "id",
            "status",
            "qty",
            "note",
            "address",
            "tags",
        }


class TestPydanticOneEvaluation(PydanticProject):
    pytestmark = pytest.mark.profile("session")

    @pytest.fixture(scope="class")
    def models(self):
        return {k: v for k, v in MODELS.items() if k.startswith("p_eval_")}

    @pytest.mark.parametrize("name", ["p_eval_discard_row", "p_eval_discard_value"])
    def test_model_query_runs_once(self, project, evaluations, name):
        run_dbt(["run", "--select", name])
        before = evaluations()
        results = run_dbt(["run", "--select", name, "--vars", "{v: 2}"])
        assert evaluations() - before == ROWS, (name, evaluations() - before)
        response = results[0].adapter_response
        if name == "p_eval_discard_row":
            assert response["rows_discarded"] == ROWS // 10
        else:  # status is required: its bad rows are dropped even under discard_value
            assert (response["rows_discarded"], response["values_discarded"]) == (ROWS // 10, 0)
        assert len(rows_of(project, f"{project.test_schema}.{name}")) == 1 + ROWS - ROWS // 10


UNIMPORTABLE = "import no_such_module_anywhere\n"
UNMAPPABLE = """
import datetime
from pydantic import BaseModel


class Order(BaseModel):
    id: int
    opened_at: datetime.time
"""


class TestParseFailsOnImportError:
    @pytest.fixture(scope="class")
    def project_files(self, project_root):
        orders = model("", "select 1 as id", "", package="bad_import")
        write_project_files(project_root, "models", {"orders.sql": orders})
        write_contracts(project_root, UNIMPORTABLE, "bad_import")

    def test_parse_names_model_and_module(self, project):
        with pytest.raises(Exception) as raised:
            run_dbt(["parse"])
        message = str(raised.value)
        assert "model.test.orders" in message and "no_such_module_anywhere" in message, message


class TestParseFailsOnUnmappableField:
    @pytest.fixture(scope="class")
    def project_files(self, project_root):
        orders = model("", "select 1 as id", "", package="unmappable")
        write_project_files(project_root, "models", {"orders.sql": orders})
        write_contracts(project_root, UNMAPPABLE, "unmappable")

    def test_parse_names_model_and_field(self, project):
        with pytest.raises(Exception) as raised:
            run_dbt(["parse"])
        message = str(raised.value)
        assert "model.test.orders" in message and "`opened_at`" in message, message
        assert "no Spark type" in message, message


# ------------------------------------------ Spark evaluates the predicates as Pydantic validates


class Point(BaseModel):
    x: int = Field(ge=0)
    label: Optional[str] = Field(default=None, max_length=2)


class Probe(BaseModel):
    n: Optional[int] = Field(default=None, ge=-5, lt=7, multiple_of=2)
    s: Optional[str] = Field(default=None, min_length=2, max_length=4, pattern=r"^[a-c]+")
    lit: Optional[Literal["x", "y"]] = None
    xs: Optional[list[Annotated[int, Field(gt=0)]]] = Field(default=None, max_length=2)
    d: Optional[dict[str, Annotated[float, Field(le=1.5)]]] = None
    p: Optional[Point] = None
    req: str = "r"  # required (not Optional): a NULL breaks it


def _value(rng: random.Random, column: str):
    if column != "req" and rng.random() < 0.15:
        return None
    if column == "n":
        return rng.randint(-8, 9)
    if column in ("s", "req"):
        if column == "req" and rng.random() < 0.2:
            return None
        return "".join(rng.choice("abcz") for _ in range(rng.randint(0, 6)))
    if column == "lit":
        return rng.choice(["x", "y", "z", "X"])
    if column == "xs":
        return [rng.randint(-1, 2) for _ in range(rng.randint(0, 3))]
    if column == "d":
        return {f"k{i}": rng.choice([0.5, 1.5, 2.0, -1.0]) for i in range(rng.randint(0, 2))}
    label = rng.choice([None, "a", "ab", "abc"])
    return {"x": rng.randint(-1, 2) if rng.random() < 0.9 else None, "label": label}


def _sql(value, spark_type: str) -> str:
    if value is None:
        return f"CAST(NULL AS {spark_type})"
    if isinstance(value, str):
        return sql_string(value)
    if isinstance(value, int):
        return f"CAST({value} AS BIGINT)"
    if isinstance(value, float):
        return f"CAST({value!r} AS DOUBLE)"
    if isinstance(value, list):
        return f"CAST(array({', '.join(_sql(v, 'BIGINT') for v in value)}) AS {spark_type})"
    if "x" in value:
        return (
            f"CAST(named_struct('x', {_sql(value['x'], 'BIGINT')}, 'label', "
            f"{_sql(value['label'], 'STRING')}) AS {spark_type})"
        )
    pairs = ", ".join(f"{sql_string(k)}, {_sql(v, 'DOUBLE')}" for k, v in value.items())
    return f"CAST(map({pairs}) AS {spark_type})"


class TestPredicatesAgreeWithPydantic:
    def test_spark_rejects_exactly_what_pydantic_rejects(self, project):
        contract = contract_from_class("model.test.probe", "probe:Probe", Probe)
        columns = contract.columns
        rng = random.Random(20261123)
        records = [{c: _value(rng, c) for c in columns.names} for _ in range(300)]
        rows = " UNION ALL ".join(
            "SELECT "
            + ", ".join(
                [f"{i} AS i"]
                + [
                    f"{_sql(r[f.name], f.type.to_sql())} AS {quote_identifier(f.name)}"
                    for f in columns.fields
                ]
            )
            for i, r in enumerate(records)
        )
        checks = [(r.column, r.violated(quote_identifier(r.column))) for r in contract.rules]
        select = ", ".join(f"{sql} AS {quote_identifier(c + '_bad')}" for c, sql in checks)
        result = project.run_sql(f"SELECT i, {select} FROM ({rows}) ORDER BY i", fetch="all")
        disagreements = []
        for row in result:
            record = records[row[0]]
            for (column, _), spark_bad in zip(checks, row[1:], strict=True):
                try:
                    Probe.model_validate({column: record[column]})
                    pydantic_bad = False
                except ValidationError:
                    pydantic_bad = True
                assert spark_bad is not None, (column, record[column])  # never NULL
                if bool(spark_bad) != pydantic_bad:
                    disagreements.append((column, record[column], spark_bad, pydantic_bad))
        assert not disagreements, disagreements[:10]
        # the sample exercises both outcomes of every column's rules
        for index, (column, _) in enumerate(checks, start=1):
            assert {bool(row[index]) for row in result} == {True, False}, column
