"""The run path's typed errors: a broken contract, a run undone, a restore refused or failed."""

from typing import Any, Dict, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.core.intent import (
    Commit,
    describe_commits,
)

logger = AdapterLogger("SparkContracts")


ABSENT = "(absent)"  # a type on the side that lacks the column (or the relation)


class SchemaContractViolation(DbtRuntimeError):
    """A broken `freeze`, with dlt's DataValidationError context as attributes."""

    def __init__(self, unique_id: str, relation: str, violation: Dict[str, Any], values=()):
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

    def __init__(self, unique_id: str, step: str, restored: str, cause: BaseException):
        self.cause = cause
        super().__init__(
            f"{unique_id}: {step} failed, so the run was undone ({restored}). Cause: {cause}"
        )


class QuarantineLost(DbtRuntimeError):
    """The load collects the rows it discards, and Spark did not report them: the load must
    not stay (its discarded rows would be lost), so the run takes it back."""

    def __init__(self, unique_id: str, quarantine: str):
        self.unique_id, self.quarantine = unique_id, quarantine
        super().__init__(
            f"{unique_id}: Spark reported no discarded rows for the load, so they cannot be "
            f"written to {quarantine}; the load is taken back rather than losing them"
        )


class QuarantineMismatch(DbtRuntimeError):
    """The quarantine table cannot take the model's discarded rows (core/quarantine.py): the
    run does not keep its load (it is taken back with the rest of the run)."""

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
