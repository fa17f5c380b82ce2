"""The durable intent of a multi-step run, and who made which commit. Pure.

Before its first change a multi-step run writes an `Intent` into a table property of the table it
changes; its last step removes it. A later run that finds an intent left by another invocation
knows a run died half way and repairs the table before anything else. Every commit a run makes is
tagged (`commit_tag`); a restore goes ahead only when every commit after the restore point is the
run's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from dbt.adapters.spark_contracts.core.evolution.render import (
    BACKUP_SUFFIX,
    REWRITE_SUFFIX,
    suffixed,
)
from dbt.adapters.spark_contracts.core.evolution.steps import DropTable, Inverse, Rename, Step

INTENT_PROPERTY = "dbt_spark_contracts.intent"
TAG_PREFIX = "dbt-spark-contracts"
# The intent's JSON is stored hex-encoded: SHOW TBLPROPERTIES redacts a property whose value
# matches Spark's redaction patterns (`url`, `token`, `secret`, `password`, `access key`), which
# a model's or a column's name in the intent can; hex digits never match them.
HEX_PREFIX = "hex:"
# a lease taker's empty marker commit (core/recovery/txn_fence.py): nobody's change to take back
MARKER_TAG_PREFIX = f"{TAG_PREFIX}-fence:"


def is_marker(tag: str | None) -> bool:
    """A commit is a lease taker's marker (core/recovery/txn_fence.py): it changes no row and
    no schema."""
    return bool(tag) and str(tag).startswith(MARKER_TAG_PREFIX)


class IntentUnreadable(ValueError):
    """A table carries an intent this version cannot read (e.g. redacted by an older run)."""

    def __init__(self, value: str, reason: str) -> None:
        self.value = value
        super().__init__(
            f"the table property {INTENT_PROPERTY} cannot be read ({reason}): {value[:80]!r}. "
            "A run died half way through a change and left it. Check the table's history "
            "(DESCRIBE HISTORY / the Iceberg snapshots), put the table back by hand if needed, "
            f"then ALTER TABLE ... UNSET TBLPROPERTIES ('{INTENT_PROPERTY}')"
        )


def commit_tag(invocation_id: str, unique_id: str, run: str = "") -> str:
    """The tag of every commit one run of a model makes; `run` tells apart the runs of one
    model in one invocation (a microbatch model's batches), whose restore points differ."""
    middle = f"{invocation_id}:{run}" if run else invocation_id
    return f"{TAG_PREFIX}:{middle}:{unique_id}"


@dataclass(frozen=True)
class Intent:
    """What a multi-step run was about to do, and how to put the table back."""

    invocation_id: str
    unique_id: str
    relation: str
    table_format: str
    restore_version: int | None  # Delta version / Iceberg snapshot id before the run
    commit_tag: str
    added_columns: tuple[tuple[str, ...], ...] = field(default_factory=tuple)
    steps: tuple[Step, ...] = field(default_factory=tuple)  # the steps the run is to take
    # the quarantine the run writes after its load: a repair that takes the load back takes
    # the run's quarantined rows (`_dbt_run_id`) back too
    quarantine: str = ""
    # the columns its last step removes after its load (Iceberg, whose rollback keeps the
    # schema): gone from the table, that step landed, and the change stands (`landed_last`)
    removed_after_load: tuple[tuple[str, ...], ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        data = asdict(self)
        data["steps"] = [step.to_dict() for step in self.steps]
        if not self.removed_after_load:  # readable by a version before it
            data.pop("removed_after_load")
        return json.dumps(data, sort_keys=True)

    def to_property(self) -> str:
        """The table property's value: the JSON hex-encoded (never redacted, never quoted)."""
        return HEX_PREFIX + self.to_json().encode().hex()

    @classmethod
    def from_property(cls, value: str) -> Intent:
        """An intent from its property: hex-encoded, or plain JSON as earlier runs wrote it."""
        try:
            if value.startswith(HEX_PREFIX):
                return cls.from_json(bytes.fromhex(value[len(HEX_PREFIX) :]).decode())
            return cls.from_json(value)
        except (ValueError, TypeError, KeyError) as exc:  # JSONDecodeError is a ValueError
            raise IntentUnreadable(value, type(exc).__name__) from exc

    @classmethod
    def from_json(cls, text: str) -> Intent:
        data = json.loads(text)
        data.pop("writer", None)  # written by 0.x runs (Iceberg tagged by Spark application id)
        data["added_columns"] = tuple(tuple(p) for p in data.get("added_columns", ()))
        removed = data.get("removed_after_load", ())
        data["removed_after_load"] = tuple(tuple(p) for p in removed)
        if "statements" in data:  # written before steps were values: their text
            data["steps"] = _steps_of_text(data["relation"], data.pop("statements"))
        else:
            data["steps"] = tuple(Step.from_dict(s) for s in data.get("steps", ()))
        return cls(**data)


def landed_last(intent: Intent, present: Iterable[bool]) -> bool:
    """The run's last step, the removal of its columns after its load, landed: none of them is
    in the table any more (`present`: whether each of `intent.removed_after_load` is). Its one
    `DROP COLUMNS` is one metadata commit, sent only once the load committed, so the table
    holds the whole change: a repair puts nothing back (a rollback would keep the schema
    without them, and their values with the rows it took back)."""
    found = list(present)
    return bool(intent.removed_after_load) and not any(found)


def _steps_of_text(relation: str, statements: Iterable[str]) -> tuple[Step, ...]:
    """The steps of an intent written as text (by 0.x runs before steps were values), with the
    inverses that renderer's Parquet rewrite had: its statements are recognised by the exact
    text it wrote (core/evolution/render.py of that version), nothing else has an inverse
    there (a dead run's added Iceberg columns are in `added_columns`)."""
    beside, backup = suffixed(relation, REWRITE_SUFFIX), suffixed(relation, BACKUP_SUFFIX)
    inverses: dict[str, Inverse] = {
        f"DROP TABLE IF EXISTS {beside}": DropTable(beside),
        f"ALTER TABLE {relation} RENAME TO {backup}": Rename(backup, relation),
    }
    return tuple(
        Step(sql, stands=True)
        if sql == f"ALTER TABLE {beside} RENAME TO {relation}"
        else Step(sql, inverses.get(sql))
        for sql in map(str, statements)
    )


def find_intent(properties: Mapping[str, str]) -> Intent | None:
    """The intent recorded in a table's properties (keys compared case-insensitively)."""
    for key, value in properties.items():
        if key.lower() == INTENT_PROPERTY:
            return Intent.from_property(value)
    return None


@dataclass(frozen=True)
class Commit:
    """One commit after a restore point: Delta version or Iceberg snapshot, and who made it."""

    version: int
    operation: str
    tag: str | None
    restored_to: int | None = None  # a Delta RESTORE's target version


def foreign_commits(commits: Iterable[Commit], own_tag: str) -> tuple[Commit, ...]:
    """Commits not made by the run tagged `own_tag` (a restore would undo them); a lease
    taker's empty marker (core/recovery/txn_fence.py: a MERGE with its tag) is nobody's
    change."""
    return tuple(c for c in commits if c.tag != own_tag and not is_marker_commit(c))


def is_marker_commit(commit: Commit) -> bool:
    """`commit` is a lease taker's empty marker: a MERGE with a marker's tag (Delta's,
    core/recovery/txn_fence.py), or an append with one (an Iceberg repair's empty commit,
    run/rollback_fence.py); a commit of another kind under that tag changed something."""
    return is_marker(commit.tag) and commit.operation.upper() in ("MERGE", "APPEND")


def describe_commits(commits: Iterable[Commit]) -> str:
    return ", ".join(
        f"{c.version} ({c.operation}, by {c.tag or 'an untagged writer'})" for c in commits
    )


def intent_summary(intent: Intent) -> dict[str, Any]:
    return {
        "invocation_id": intent.invocation_id,
        "model": intent.unique_id,
        "restore_version": intent.restore_version,
    }


@dataclass(frozen=True)
class Snapshot:
    """One Iceberg snapshot as its table's metadata lists it after a rollback."""

    commit: Commit  # its id (`version`), operation and tag
    parent: int | None
    current: bool  # an ancestor of the table's current snapshot


def rolled_back_with_the_run(
    snapshots: Iterable[Snapshot], point: int, checked: Iterable[int], own_tag: str
) -> tuple[Commit, ...]:
    """Another writer's snapshots a rollback to `point` took back with the run's own: the
    descendants of `point` no longer in the current lineage, which the check before the
    rollback did not see (`checked`: the snapshots it read after `point`) and the run did not
    make; a lease taker's empty marker (nobody's change: a run that takes a lease over commits
    one, run/fence.history_marker) is none. Decided from the table's own metadata (parent
    ids), never from commit times."""
    listed = list(snapshots)
    parent = {s.commit.version: s.parent for s in listed}
    seen = set(checked)

    def descends(version: int) -> bool:
        at: int | None = parent.get(version)
        hops = 0
        while at is not None and hops <= len(parent):
            if at == point:
                return True
            at, hops = parent.get(at), hops + 1
        return False

    return tuple(
        s.commit
        for s in listed
        if not s.current
        and s.commit.version not in seen
        and s.commit.tag != own_tag
        and not is_marker_commit(s.commit)
        and descends(s.commit.version)
    )
