"""The quarantine half of a run's steps: the table made ready, the discarded rows inserted (from
a stage, or as the load collected them), the table evolved when it refuses them, and a journaled
run's commit on it (core/intent.py). The `Runner` is one; `Restorer` puts tables back."""

from typing import List

from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.core.intent import JOURNAL_RUN_PROPERTY, QUARANTINE_SCHEMA_TAG
from dbt.adapters.spark_contracts.core.load_select import RUN_ID_COLUMN
from dbt.adapters.spark_contracts.core.quarantine import evolve_quarantine, plan_quarantine
from dbt.adapters.spark_contracts.core.render import suffixed
from dbt.adapters.spark_contracts.core.types import sql_string
from dbt.adapters.spark_contracts.model_run import (
    DELTA_USER_METADATA,
    ModelRun,
    RunOutcome,
    _quarantine_format,
)
from dbt.adapters.spark_contracts.restore import Restorer
from dbt.adapters.spark_contracts.run_errors import QuarantineMismatch


class QuarantineSteps(Restorer):
    """Writes a run's discarded rows; `out` is the run's outcome (the `Runner` sets it)."""

    out: RunOutcome

    def _ready_quarantine(self, run: ModelRun, select: str) -> None:
        """The quarantine table, created shaped like `select`'s rows (nothing is read: `where
        false`) unless dbt's cache holds it; an existing one is evolved only when an insert
        into it fails (`_insert_quarantined`): nothing is read on the usual run."""
        if run.quarantine_format is None:
            self.spark.run(
                f"create table if not exists {run.quarantine_table} using "
                f"{_quarantine_format(run)} as select * from ({select}) where false"
            )

    def _insert_quarantined(self, run: ModelRun, sql: str) -> None:
        """`sql`, an insert into the quarantine. If Spark refuses it and the table lacks
        what the model now outputs, the table is given it (core/quarantine.py) and the insert
        runs again; a type it could not store raises `QuarantineMismatch`."""
        try:
            self.spark.run(sql)
            return
        except DbtDatabaseError:
            statements = self._quarantine_evolution(run)
            if not statements:
                raise  # the table fits (or was created from these rows): another failure
        if run.journaled:  # these commits are not the journal's: a kill after them is a kill
            self.spark.set_conf(DELTA_USER_METADATA, f"{run.commit_tag}{QUARANTINE_SCHEMA_TAG}")
        try:
            for statement in statements:
                self.spark.run(statement)
        finally:
            if run.journaled:
                self.spark.set_conf(DELTA_USER_METADATA, run.commit_tag)
        self.spark.run(sql)

    def _quarantine_evolution(self, run: ModelRun) -> List[str]:
        """The statements that make an existing quarantine take the model's rows, read from
        its schema; `QuarantineMismatch` where it could not."""
        table, table_format = run.quarantine_table, run.quarantine_format
        if table_format is None:
            return []
        existing = self.spark.relation_schema(table, table_format == "parquet")
        evolution = plan_quarantine(existing, run.compiled, table_format)
        if evolution.conflicts:
            raise QuarantineMismatch(run.unique_id, table, evolution.conflicts) from None
        return evolve_quarantine(evolution, table, table_format)

    def _quarantine(self, run: ModelRun, select: str) -> None:
        self._ready_quarantine(run, select)
        self._insert_quarantined(run, f"insert into {run.quarantine_table} by name {select}")
        self.out.quarantined = self.out.rows_discarded

    def _quarantine_collected(self, run: ModelRun) -> None:
        """The discarded rows the load collected, into the quarantine (after the load, under
        the run's intent: a failure or a kill before this ends takes the load back)."""
        rows, self.out.rejected = self.out.rejected, None
        view = suffixed(run.view, "__rejected")
        count = self.spark.rows_view(view, rows)
        if count:
            run_id = f"{sql_string(run.invocation_id)} AS `{RUN_ID_COLUMN}`"
            self._insert_quarantined(
                run, f"insert into {run.quarantine_table} by name SELECT *, {run_id} FROM {view}"
            )
            self.out.quarantined = count

    def _journal(self, run: ModelRun) -> None:
        """A journaled run that quarantined nothing tags one commit on the quarantine: its
        load is done (core/intent.py)."""
        self.spark.run(
            f"alter table {run.quarantine_table} set tblproperties "
            f"('{JOURNAL_RUN_PROPERTY}' = {sql_string(run.invocation_id)})"
        )
