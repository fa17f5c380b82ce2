"""The schema contract before a relation is created or a view replaced
(`adapter_contracts.ContractMethods.contract_before_create`, behind the view materialization and
`spark_contracts_may_create`): a view that exists is checked against its `freeze` modes under its
own name, a table that exists is never read, a new relation gets its `tables` decision. A fake
Spark: no Spark."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import pytest

from dbt.adapters.spark_contracts.adapter_contracts import ContractGate, ContractMethods
from dbt.adapters.spark_contracts.core.contracts.contract import ContractMode, SchemaContract
from dbt.adapters.spark_contracts.core.contracts.decision import ContractViolation
from dbt.adapters.spark_contracts.core.schema.parse import parse_type
from dbt.adapters.spark_contracts.core.settings.config import EvolutionSettings, Policy

VIEW_NOW = parse_type("struct<id:bigint,name:string>")
MODEL = parse_type("struct<id:bigint,name:string,extra:int>")  # one column more


class Refused(Exception):
    pass


class FakeSpark:
    def __init__(self) -> None:
        self.read: List[str] = []

    def relation_schema(self, relation: str, describable: bool = True) -> Any:
        self.read.append(f"relation {relation}")
        return VIEW_NOW

    def schema(self, sql: str) -> Any:
        self.read.append("query")
        return MODEL


class Probe(ContractMethods):
    def __init__(self, contract: Optional[SchemaContract]) -> None:
        self.contract, self.spark, self.gated = contract, FakeSpark(), []

    def _contract_gate(self, relation: Any, model: Any, run_vars: Any) -> ContractGate:
        self.gated.append(str(relation))
        settings = EvolutionSettings(Policy(), "ignore", True, False)
        return ContractGate("model.p.v", str(relation), self.contract, settings, None)

    def _spark(self) -> Any:
        return self.spark

    def _refuse(self, spark: Any, gate: ContractGate, violations: Sequence[ContractViolation]):
        if violations:
            raise Refused(gate.relation, violations[0].to_dict())

    def _validate_column_settings(self, *args: Any) -> None:
        pass


class Rel:
    def __init__(self, name: str, is_view: bool) -> None:
        self.name, self.is_view = name, is_view

    def __str__(self) -> str:
        return self.name


FROZEN = SchemaContract(columns=ContractMode.FREEZE)


def test_a_view_that_exists_is_checked_under_its_own_name_and_refused():
    probe = Probe(FROZEN)
    with pytest.raises(Refused) as refused:
        probe.contract_before_create(Rel("db.v", True), Rel("DB.V", True), "select 1", {}, {})
    assert refused.value.args[0] == "DB.V"  # the name the catalog lists
    assert probe.spark.read == ["relation DB.V", "query"]


def test_a_view_that_keeps_its_columns_is_replaced():
    probe = Probe(SchemaContract(columns=ContractMode.EVOLVE))
    action = probe.contract_before_create(Rel("db.v", True), Rel("db.v", True), "q", {}, {})
    assert action == "create"


def test_a_view_without_a_contract_and_a_table_that_exists_read_nothing():
    assert Probe(None).contract_before_create(Rel("db.v", True), Rel("db.v", True), "q", {}, {})
    table = Probe(FROZEN)
    assert table.contract_before_create(Rel("db.t", True), Rel("db.t", False), "q", {}, {}) == (
        "create"
    )
    assert table.spark.read == []


def test_a_new_relation_gets_its_tables_decision():
    skipped = Probe(SchemaContract(tables=ContractMode.DISCARD_ROW))
    assert skipped.contract_before_create(Rel("db.n", False), None, "q", {}, {}) == "skip"
    assert skipped.gated == ["db.n"] and skipped.spark.read == ["query"]
    with pytest.raises(Refused):
        Probe(SchemaContract(tables=ContractMode.FREEZE)).contract_before_create(
            Rel("db.n", False), None, "q", {}, {}
        )
    created = Probe(SchemaContract())
    assert created.contract_before_create(Rel("db.n", False), None, "q", {}, {}) == "create"
