"""`dbt docs generate` on real Spark (session profile, Delta by default): dbt's official docs,
persist_docs and current_timestamp suites, and what the catalog shows for Delta and Iceberg
tables and views (comments, column order, types, owner, stats)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from dbt.tests.adapter.basic import expected_catalog
from dbt.tests.adapter.basic.test_docs_generate import BaseDocsGenerate, BaseDocsGenReferences
from dbt.tests.adapter.persist_docs.test_persist_docs import (
    BasePersistDocs,
    BasePersistDocsAllColumnsMissing,
    BasePersistDocsColumnMissing,
    BasePersistDocsCommentOnQuotedColumn,
    BasePersistDocsQuotedColumnCaseSensitive,
    BasePersistDocsQuotedDescriptionNotAppliedOnMismatch,
)
from dbt.tests.adapter.utils.test_current_timestamp import BaseCurrentTimestampNaive
from dbt.tests.util import run_dbt


def _spark_user(project: Any) -> str:
    """The owner Spark records for what this session creates (`current_user()`)."""
    return project.run_sql("select current_user()", fetch="one")[0]


# ---- dbt's docs generate suites ---------------------------------------------------------------
# The expected catalogs differ from dbt's Postgres defaults only in what Spark reports:
# its type names (`bigint`: seeds load integers as bigint; `string`; `timestamp`), its relation
# types (`table` / `view`), the owner (the Spark user), and no stats (neither Delta's DESCRIBE nor
# a view has any; these models set no schema_contract, so none of the adapter's stats either).


class TestDocsGenerate(BaseDocsGenerate):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project):
        return expected_catalog.base_expected_catalog(
            project,
            role=_spark_user(project),
            id_type="bigint",
            text_type="string",
            time_type="timestamp",
            view_type="view",
            table_type="table",
            model_stats=expected_catalog.no_stats(),
        )


class TestDocsGenReferences(BaseDocsGenReferences):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project):
        # dbt's own expectation (indexes from 1), unlike dbt-databricks' 0-based copy of it
        return expected_catalog.expected_references_catalog(
            project,
            role=_spark_user(project),
            id_type="bigint",
            text_type="string",
            time_type="timestamp",
            bigint_type="bigint",
            view_type="view",
            table_type="table",
            model_stats=expected_catalog.no_stats(),
        )


# ---- dbt's persist_docs suites ----------------------------------------------------------------


class TestPersistDocs(BasePersistDocs):
    pass


class TestPersistDocsColumnMissing(BasePersistDocsColumnMissing):
    pass


class TestPersistDocsAllColumnsMissing(BasePersistDocsAllColumnsMissing):
    pass


class TestPersistDocsQuotedColumnCaseSensitive(BasePersistDocsQuotedColumnCaseSensitive):
    pass


class TestPersistDocsQuotedDescriptionNotAppliedOnMismatch(
    BasePersistDocsQuotedDescriptionNotAppliedOnMismatch
):
    pass


class TestPersistDocsCommentOnQuotedColumn(BasePersistDocsCommentOnQuotedColumn):
    pass


# ---- dbt's current_timestamp suite ------------------------------------------------------------
# Naive, not Aware: Spark's TIMESTAMP values come back as datetimes without a zone (here in the
# session time zone, UTC); dbt says to use one of the two.


class TestCurrentTimestamp(BaseCurrentTimestampNaive):
    pass


# ---- what the catalog shows for Delta and Iceberg tables and views ----------------------------

CATALOG_SCHEMA_YML = """
version: 2
models:
  - name: delta_docs
    description: "Delta table comment"
    config:
      schema_contract: {data_type: freeze}
    columns:
      - name: zeta
        description: "zeta's comment"
      - name: alpha
        description: "alpha's comment"
  - name: iceberg_docs
    description: "Iceberg table comment"
    columns:
      - name: zeta
        description: "iceberg zeta's comment"
  - name: view_docs
    description: "View comment"
    columns:
      - name: alpha
        description: "view alpha's comment"
"""

# Columns deliberately out of alphabetical order: the catalog numbers them in the table's order.
DELTA_DOCS_SQL = """
{{ config(materialized='table') }}
select 1 as zeta, 'a' as alpha, named_struct('x', 1, 'y', 'b') as nested
"""

ICEBERG_DOCS_SQL = """
{{ config(materialized='table', file_format='iceberg') }}
select 1 as zeta, 'a' as alpha union all select 2 as zeta, 'b' as alpha
"""

VIEW_DOCS_SQL = """
{{ config(materialized='view') }}
select cast(1 as bigint) as zeta, 'a' as alpha
"""


class TestCatalogShowsDocs:
    @pytest.fixture(scope="class")
    def models(self) -> Dict[str, str]:
        return {
            "schema.yml": CATALOG_SCHEMA_YML,
            "delta_docs.sql": DELTA_DOCS_SQL,
            "iceberg_docs.sql": ICEBERG_DOCS_SQL,
            "view_docs.sql": VIEW_DOCS_SQL,
        }

    @pytest.fixture(scope="class")
    def project_config_update(self) -> Dict[str, Any]:
        return {"models": {"test": {"+persist_docs": {"relation": True, "columns": True}}}}

    @pytest.fixture(scope="class")
    def catalog(self, project: Any) -> Dict[str, Any]:
        assert len(run_dbt(["run"])) == 3
        run_dbt(["docs", "generate"])
        catalog = json.loads((Path(project.project_root) / "target" / "catalog.json").read_text())
        assert not catalog["errors"]
        return catalog["nodes"]

    @staticmethod
    def _columns(node: Dict[str, Any]) -> Dict[str, Any]:
        return {
            name: (col["index"], col["type"], col["comment"])
            for name, col in node["columns"].items()
        }

    def test_delta_table(self, project: Any, catalog: Dict[str, Any]) -> None:
        node = catalog["model.test.delta_docs"]
        assert node["metadata"] == {
            "type": "table",
            "schema": project.test_schema,
            "name": "delta_docs",
            "database": None,
            "comment": "Delta table comment",
            "owner": _spark_user(project),
        }
        assert self._columns(node) == {
            "zeta": (1, "int", "zeta's comment"),
            "alpha": (2, "string", "alpha's comment"),
            "nested": (3, "struct<x:int,y:string>", None),
        }
        # Delta's DESCRIBE shows no size statistics; the adapter's contract summary stays
        stats = node["stats"]
        assert set(stats) == {"schema_contract", "has_stats"}, stats
        assert json.loads(stats["schema_contract"]["value"])["data_type"] == "freeze"
        assert stats["has_stats"]["value"] is True

    def test_iceberg_table(self, project: Any, catalog: Dict[str, Any]) -> None:
        node = catalog["model.test.iceberg_docs"]
        assert node["metadata"] == {
            "type": "table",
            "schema": project.test_schema,
            "name": "iceberg_docs",
            "database": "iceberg",
            "comment": "Iceberg table comment",
            "owner": _spark_user(project),
        }
        # Iceberg's metadata columns (_spec_id, _file, ...) are not the table's columns
        assert self._columns(node) == {
            "zeta": (1, "int", "iceberg zeta's comment"),
            "alpha": (2, "string", None),
        }
        stats = node["stats"]
        assert stats["rows"]["value"] == 2, stats
        assert stats["bytes"]["value"] > 0, stats
        assert stats["has_stats"]["value"] is True

    def test_view(self, project: Any, catalog: Dict[str, Any]) -> None:
        node = catalog["model.test.view_docs"]
        assert node["metadata"] == {
            "type": "view",
            "schema": project.test_schema,
            "name": "view_docs",
            "database": None,
            "comment": "View comment",
            "owner": _spark_user(project),
        }
        assert self._columns(node) == {
            "zeta": (1, "bigint", None),
            "alpha": (2, "string", "view alpha's comment"),
        }
        assert set(node["stats"]) == {"has_stats"}
        assert node["stats"]["has_stats"]["value"] is False
