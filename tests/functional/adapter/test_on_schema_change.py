"""dbt's own on_schema_change suite, carried out by this adapter's planner (SPEC §3 "How §3 and
§4 meet"): ignore / fail / append_new_columns / sync_all_columns on Delta."""

from dbt.tests.adapter.incremental.test_incremental_on_schema_change import (
    BaseIncrementalOnSchemaChange,
)


class TestIncrementalOnSchemaChange(BaseIncrementalOnSchemaChange):
    pass
