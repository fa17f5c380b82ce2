"""dbt's own incremental-predicates suite, as dbt-spark runs it (merge with `incremental_predicates`
and with the older `predicates`, Delta), plus Iceberg, and a merge with predicates and no
`unique_key`: dbt-spark joins `FALSE`, so such a merge only inserts (6bd3192 restored that after
the typed load had dropped it)."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.incremental.test_incremental_predicates import BaseIncrementalPredicates
from dbt.tests.util import run_dbt


def merge_config(fmt: str, key: str = "+incremental_predicates") -> dict:
    return {
        "models": {
            key: ["dbt_internal_dest.id != 2"],
            "+incremental_strategy": "merge",
            "+file_format": fmt,
        }
    }


class TestIncrementalPredicatesMergeDelta(BaseIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return merge_config("delta")


class TestPredicatesMergeDelta(BaseIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return merge_config("delta", "+predicates")


NO_KEY = (
    "{{ config(materialized='incremental', incremental_strategy='merge', file_format='FMT', "
    "incremental_predicates=['DBT_INTERNAL_DEST.id > 0']) }}\n"
    "{% if not is_incremental() %}select 1 as id, 'a' as msg union all select 2 as id, 'b' as msg"
    "{% else %}select 1 as id, 'a' as msg union all select 3 as id, 'c' as msg{% endif %}\n"
)


class TestMergeWithPredicatesAndNoKeyOnlyInserts:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"no_key_{fmt}.sql": NO_KEY.replace("FMT", fmt) for fmt in ("delta", "iceberg")}

    @pytest.mark.parametrize("fmt", ["delta", "iceberg"])
    def test_every_row_is_inserted(self, project, fmt):
        name = f"no_key_{fmt}"
        run_dbt(["run", "--select", name])
        run_dbt(["run", "--select", name])
        catalog = "iceberg." if fmt == "iceberg" else ""
        rows = project.run_sql(
            f"select id, msg from {catalog}{project.test_schema}.{name} order by id, msg",
            fetch="all",
        )
        assert [tuple(r) for r in rows] == [(1, "a"), (1, "a"), (2, "b"), (3, "c")]
