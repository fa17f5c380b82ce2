"""The run path's typed errors: a broken contract, a run undone, a restore refused or failed."""

from typing import Any, Dict, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.core.recovery.intent import (
    Commit,
    describe_commits,
)
from dbt.adapters.spark_contracts.core.recovery.manual import RowsOf, manual_move
from dbt.adapters.spark_contracts.core.recovery.pending import (
    BEAT_PROPERTY,
)
from dbt.adapters.spark_contracts.run.heartbeat import LEASE_ENV, lease_seconds

logger = AdapterLogger("SparkContracts")


ABSENT = "(absent)"  # a type on the side that lacks the column (or the relation)


class SchemaContractViolation(DbtRuntimeError):
    """A broken `freeze`, with dlt's DataValidationError context as attributes."""

    def __init__(
        self, unique_id: str, relation: str, violation: Dict[str, Any], values: Any = ()
    ) -> None:
        self.unique_id, self.relation = unique_id, relation
        self.violation = dict(violation)
        self.schema_entity = violation.get("schema_entity")
        self.contract_mode = violation.get("contract_mode")
        self.column_name = violation.get("column")
        self.deployed_type = violation.get("deployed_type")
        self.compiled_type = violation.get("compiled_type")
        self.offending_values = list(values)
        lines = [
            f"Schema contract violated in {unique_id} ({relation}); nothing was loaded:",
            f"  schema_entity: {self.schema_entity}",
            f"  contract_mode: {self.contract_mode}",
        ]
        lines.append(f"  column: {self.column_name or '(none: the relation itself)'}")
        lines.append(
            f"  deployed type: {self.deployed_type or ABSENT}, "
            f"compiled type: {self.compiled_type or ABSENT}"
        )
        if self.offending_values:
            shown = ", ".join(repr(v) for v in self.offending_values[:5])
            lines.append(f"  offending values (up to 5): {shown}")
        if violation.get("reason"):
            lines.append(f"  reason: {violation['reason']}")
        super().__init__("\n".join(lines))


class RunUndone(DbtRuntimeError):
    """A step failed after the run changed the table; the table was put back."""

    def __init__(
        self,
        unique_id: str,
        step: str,
        restored: str,
        cause: BaseException,
        others: Tuple[str, ...] = (),
    ):
        self.cause, self.others = cause, others
        beside = (
            f" Run {', '.join(others)} of this model was changing the table at the same time "
            "(its lease is fresh): run again once it has ended."
            if others
            else ""
        )
        super().__init__(
            f"{unique_id}: {step} failed, so the run was undone ({restored}).{beside} "
            f"Cause: {cause}"
        )


LOAD_STEP = "the load"  # the step that sends the run's load (run/runner.py)


def step_named(step: str) -> str:
    """A step as an error names it: the load, or its statement (the first 200 characters)."""
    return step if step == LOAD_STEP else f"statement `{' '.join(step.split())[:200]}`"


class StepUnanswered(DbtRuntimeError):
    """A statement of the run's to its table (its load, or a step of its change: an ALTER, a
    backfill) got no answer from Spark (a lost connection, a server's cancel) after the run
    changed the table, and could not be fenced off: it may still commit, so the table is not
    put back now (a late commit would land over the restore); the run's record is kept, its
    lease unreleased, and the model's next run takes it over once it has run out and repairs
    the table first (Delta: after its marker; Iceberg: watching for the late commit). Parquet
    keeps no log to fence off or take back a late write: its next run takes the lease over
    only on positive evidence that nothing of this run still runs (`UnguardedTakeover`
    names the lease and the repair by hand until then). `logged`: the table's format keeps a
    log (Delta, Iceberg)."""

    def __init__(
        self, unique_id: str, relation: str, step: str, cause: BaseException, logged: bool = True
    ):
        self.unique_id, self.relation, self.step, self.cause = unique_id, relation, step, cause
        then = (
            "the model's next run repairs it first, from the table's own log, once this run's "
            "lease has run out (any run of the model)"
            if logged
            else "this run's lease stays, and a Parquet table keeps no log to fence off or take "
            "back a late write: the model's next run goes on only once nothing of this run can "
            "still run (the server restarted), else it fails naming the lease and how to "
            "release it by hand once the statement has ended on the server"
        )
        super().__init__(
            f"{unique_id}: Spark gave no answer for the run's {step_named(step)} on "
            f"{relation}, which may still commit, so the table was not put back now: {then}. "
            f"Cause: {cause}"
        )


class RunInProgress(DbtRuntimeError):
    """Another run of the model holds its lease and renewed it while this run watched
    (core/recovery/lease.py): this run changes nothing and fails, naming it."""

    def __init__(self, unique_id: str, relation: str, invocation_id: str):
        self.unique_id, self.relation, self.invocation_id = unique_id, relation, invocation_id
        super().__init__(
            f"{unique_id}: run {invocation_id} is changing {relation} (it renewed its lease "
            "while this run watched it); this run changed nothing. Run again once it has ended. "
            "A run that died is taken over at once when its process on this host is gone, else "
            "once its lease runs out (DBT_SPARK_CONTRACTS_LEASE_SECONDS, 30 s by default)."
        )


class LeaseLost(DbtRuntimeError):
    """The fence (core/recovery/lease.py): another run took this run's lease over while this run was
    stalled (a long pause, a stopped process, a lost network), or this run could not confirm it
    held it (`unconfirmed_after`: the seconds since its last beat went through, past what the
    lease allows, so another run may have judged it expired; `renew_error`: its renewal
    failed, else it went through too slowly). This run commits nothing more; the run that took
    over repaired, or the model's next run repairs, what it left."""

    def __init__(
        self,
        unique_id: str,
        relation: str,
        taken_by: "str | None",
        unconfirmed_after: "float | None" = None,
        renew_error: "str | None" = None,
    ):
        self.unique_id, self.relation, self.taken_by = unique_id, relation, taken_by
        self.unconfirmed_after, self.renew_error = unconfirmed_after, renew_error
        if unconfirmed_after is None:
            who = f"run {taken_by}" if taken_by else "another run (its lease is gone)"
            super().__init__(
                f"{unique_id}: this run lost its lease on {relation} to {who}, which took it "
                "over while this run was stalled past the lease; this run committed nothing "
                "after that. The table is as that run (or the model's next run) leaves it: run "
                "the model again."
            )
            return
        lease = lease_seconds()
        why = (
            f"renewing it failed ({renew_error})"
            if renew_error
            else "its renewal went through, but too slowly"
        )
        advice = (
            ""
            if renew_error
            else f" A server this slow to commit a table property needs a longer lease: raise "
            f"{LEASE_ENV}."
        )
        super().__init__(
            f"{unique_id}: this run could not confirm its lease on {relation}: {why}. Its last "
            f"heartbeat that went through was sent {unconfirmed_after:.1f} s ago, more than "
            f"{0.9 * lease:.1f} s (nine tenths of the {lease:g}-s lease, {LEASE_ENV}), so another "
            "run may have judged the lease expired; no run marked it taken over. This run "
            "committed nothing after that, and the model's next run repairs what it left: run "
            "the model again." + advice
        )


class TableChangedMeanwhile(DbtRuntimeError):
    """Another run of the model changed the table's schema after this run read it (and let go
    of its lease before this run took its own): this run's plan was made against the schema
    before, so it fails before its first change to the table (run it again: it plans against
    the table as it is now)."""

    def __init__(self, unique_id: str, relation: str, planned: str, now: str):
        self.unique_id, self.relation = unique_id, relation
        super().__init__(
            f"{unique_id}: {relation} changed after this run read it (planned against "
            f"{planned}, the table is now {now}), most likely by another run of the model; "
            "this run left the table as it was. Run it again to plan against the table as it is."
        )


class RepairFirst(DbtRuntimeError):
    """The table this run planned against is half changed, found after this run's repair step
    looked: by a run of the model that died half way through a change (`invocation_id`, its
    record found when this run took the model's lease), or by an earlier microbatch batch of
    this invocation (`step`: its statement Spark gave no answer for, a step of its change
    (`StepUnanswered`) or of its repair of a dead run; such a batch's record is not one this
    invocation reads). This run changes nothing; the model's next run repairs the table first,
    then plans."""

    def __init__(self, unique_id: str, relation: str, *, invocation_id: str = "", step: str = ""):
        if bool(invocation_id) == bool(step):
            raise ValueError("RepairFirst names either the dead run or the batch's step")
        self.unique_id, self.relation = unique_id, relation
        self.invocation_id, self.step = invocation_id, step
        if invocation_id:
            super().__init__(
                f"{unique_id}: run {invocation_id} of the model died half way through a change "
                f"of {relation} after this run looked for one; this run changed nothing. Run it "
                "again: it repairs the table first."
            )
            return
        super().__init__(
            f"{unique_id}: an earlier batch of this invocation left {relation} half changed "
            f"(Spark gave no answer for its {step_named(step)}, which may still commit); this "
            "batch changed nothing. Run the model again: it repairs the table first, once that "
            "batch's lease has run out."
        )


class QuarantinePending(DbtRuntimeError):
    """The load committed, and moving the run's discarded rows from its pending table into the
    quarantine failed: the load stays, the rows wait in the pending table (nothing is lost),
    and the model's next run moves them before anything else (core/recovery/pending.py)."""

    def __init__(
        self,
        unique_id: str,
        pending: str,
        quarantine: str,
        cause: BaseException,
        table_format: str,
        rows: RowsOf,
    ):
        self.unique_id, self.pending, self.quarantine, self.cause = (
            unique_id,
            pending,
            quarantine,
            cause,
        )
        super().__init__(
            f"{unique_id}: the load committed, but its discarded rows could not be moved from "
            f"{pending} into {quarantine}: {cause}. They are kept in {pending}; the model's "
            "next run moves them first (its run's lease released here). By hand: "
            f"{manual_move(pending, quarantine, table_format, rows)}"
        )


class QuarantineMismatch(DbtRuntimeError):
    """The quarantine table cannot take the model's discarded rows (core/contracts/quarantine.py): found
    before the load, so the run changes nothing."""

    def __init__(self, unique_id: str, quarantine: str, conflicts: Tuple[str, ...]):
        self.unique_id, self.quarantine, self.conflicts = unique_id, quarantine, conflicts
        super().__init__(
            f"{unique_id}: {quarantine} cannot hold this run's discarded rows: "
            f"{'; '.join(conflicts)}. Rename {quarantine} (its rows stay in it) or drop it; "
            "the next run creates it with the model's columns."
        )


class ForeignCommits(DbtRuntimeError):
    """A restore would undo commits another writer made after the restore point: not done."""

    def __init__(self, relation: str, restore_version: Any, commits: Tuple[Commit, ...], why: str):
        self.relation, self.restore_version, self.commits = relation, restore_version, commits
        super().__init__(
            f"{relation}: not restored to {restore_version}, because another writer committed "
            f"after it: {describe_commits(commits)}. {why} Repair by hand: inspect the history "
            f"(`DESCRIBE HISTORY {relation}` / `{relation}.snapshots`), then restore or replay."
        )


class UnguardedTakeover(DbtRuntimeError):
    """Another run's lease on a model whose format cannot guard against a late write (Parquet:
    no log, core/recovery/lease.unguarded_takeover) ran out while that run may still run a
    statement: this run takes nothing over and changes nothing."""

    def __init__(
        self,
        unique_id: str,
        relation: str,
        holder: str,
        record: str,
        where: str,
        table_format: str,
        holds_work: bool,
    ):
        self.unique_id, self.relation, self.holder, self.record = (
            unique_id,
            relation,
            holder,
            record,
        )
        by_hand = (
            f"release its lease, ALTER TABLE {record} SET TBLPROPERTIES ('{BEAT_PROPERTY}' = "
            "'0') (not a DROP: the record says what that run left half done, which the next "
            "run repairs from it)"
            if holds_work
            else f"DROP TABLE {record} (its record, which says of no change half done)"
        )
        super().__init__(
            f"{unique_id}: the lease of run {holder} on {relation} ran out, but that run may "
            f"still run a statement ({where}), and a {table_format} table keeps no log: a write "
            "of it landing after this run's load could not be fenced off or taken back (rows "
            "would repeat). This run changed nothing. Repair by hand: make sure that run is "
            "over (its dbt process ended; over a Thrift or Connect server, its statement no "
            f"longer running there, or the server restarted), then {by_hand}, and run the "
            "model again."
        )


class LateCommits(DbtRuntimeError):
    """A run whose lease was taken over committed after the repair (core/recovery/late.py), and
    another writer's snapshot lies over it, or it has no snapshot to go back to: nothing is
    undone (that would undo the other commit); both named, with the repair by hand."""

    def __init__(
        self,
        relation: str,
        run: str,
        record: str,
        theirs: Tuple[Commit, ...],
        under: Tuple[Commit, ...],
    ):
        self.relation, self.run, self.theirs, self.under = relation, run, theirs, under
        catalog, ident = relation.split(".", 1)
        over = f"; after it: {describe_commits(under)}" if under else ""
        super().__init__(
            f"{relation}: run {run}, whose lease was taken over and whose change was repaired, "
            f"committed once more after the repair: {describe_commits(theirs)}{over}. Nothing "
            f"was undone. Repair by hand: read `{relation}.snapshots`, then either CALL "
            f"{catalog}.system.rollback_to_snapshot('{ident}', <the parent of its first "
            "snapshot>) (undoing the later commits too) or replay them; then drop that run's "
            f"record, {record} (REFRESH TABLE it first)."
        )


class RestoreFailed(DbtRuntimeError):
    """A step failed and putting the table back failed too: both named, and the manual fix."""

    def __init__(
        self, unique_id: str, step: str, cause: BaseException, restore: BaseException, manual: str
    ):
        self.cause, self.restore_error, self.manual = cause, restore, manual
        super().__init__(
            f"{unique_id}: {step} failed ({cause}), and restoring the table failed too "
            f"({restore}). Repair by hand: {manual}"
        )


class SwapUndone(DbtRuntimeError):
    """A rebuild built beside its relation failed at `step`; the old relation holds its name
    again, as it was."""

    def __init__(self, relation: str, step: str, cause: BaseException):
        self.relation, self.step, self.cause = relation, step, cause
        super().__init__(
            f"Rebuilding {relation} failed at {step} ({cause}); {relation} is as it was before "
            "the run."
        )


class SwapFailed(DbtRuntimeError):
    """Putting a relation back from its backup failed: after a swap that failed (`cause`), or
    when the next run recovers a swap a dead run left between its renames. Names both failures
    and the statements that finish it by hand, in order."""

    def __init__(
        self,
        relation: str,
        cause: BaseException | str,
        undo_error: BaseException,
        remaining: Tuple[str, ...],
    ):
        self.relation, self.cause, self.undo_error = relation, cause, undo_error
        self.remaining = remaining
        statements = "\n".join(f"  {s};" for s in remaining)
        super().__init__(
            f"{relation}: {cause}; putting the old relation back failed ({undo_error}). Run "
            f"these by hand, in order:\n{statements}"
        )


class FirstPassFailed(Exception):
    """A quarantining run's first pass (core/materialization/run_plan.first_pass) failed: its one
    statement committed nothing. Never reaches dbt: the run takes its pending table instead."""

    def __init__(self, cause: BaseException) -> None:
        first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        super().__init__(
            "the first pass wrote nothing (a row the contract discards, or another failure: "
            f"{first[:200]}); the run reads the model's output into its pending table"
        )
