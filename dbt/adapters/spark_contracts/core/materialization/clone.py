"""What `dbt clone` does for one node: nothing, a Delta shallow clone, or a view.

Delta can shallow-clone a Delta table (`CREATE TABLE t SHALLOW CLONE s`: a new table whose log
points at the source's data files, nothing copied). Everything else (a view, a Parquet or Iceberg
table, an adapter told `can_clone_table()` is false, a target outside spark_catalog) becomes a view
over the source, as dbt's default clone does. Delta refuses to clone over a non-empty table
(DELTA_UNSUPPORTED_NON_EMPTY_CLONE), and a view cannot become a table in place, so a target
that exists is dropped before it is cloned again (`--full-refresh`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

from dbt.adapters.spark_contracts.core.materialization.flags import Is


class CloneAction(Enum):
    NO_OP = "no-op"  # the target exists and this is no --full-refresh
    SAME_RELATION = "same relation"  # the target is the source: nothing to clone
    SHALLOW_CLONE = "shallow clone"
    VIEW = "view"


@dataclass(frozen=True)
class CloneFacts:
    """What the materialization knows about one node's source (the deferred relation) and
    target; relation types are dbt's (`table`, `view`, ...), None when the relation is absent."""

    source_type: Optional[str]
    source_format: str  # delta, iceberg, parquet (table_format_of)
    target_type: Optional[str]
    target_in_session_catalog: bool
    same_relation: bool
    can_clone_table: bool
    full_refresh: bool


@dataclass(frozen=True)
class ClonePlan:
    action: CloneAction
    drop_target: bool
    reason: str

    no_op = Is("action", CloneAction.NO_OP)
    same_relation = Is("action", CloneAction.SAME_RELATION)
    as_view = Is("action", CloneAction.VIEW)


def plan_clone(facts: CloneFacts) -> ClonePlan:
    if facts.target_type is not None and not facts.full_refresh:
        return ClonePlan(CloneAction.NO_OP, False, "the target exists (no --full-refresh)")
    if facts.same_relation:  # never drop (or view over itself) the source
        return ClonePlan(CloneAction.SAME_RELATION, False, "the target is the source")
    reason = _why_not_shallow(facts)
    if reason is not None:
        return ClonePlan(CloneAction.VIEW, False, reason)
    return ClonePlan(
        CloneAction.SHALLOW_CLONE,
        drop_target=facts.target_type is not None,
        reason="the source is a Delta table",
    )


def _why_not_shallow(facts: CloneFacts) -> Optional[str]:
    if not facts.can_clone_table:
        return "can_clone_table() is false"
    if facts.source_type != "table":
        return f"the source is a {facts.source_type or 'missing relation'}, not a table"
    if facts.source_format != "delta":
        return f"Delta cannot shallow-clone a {facts.source_format} table into a Delta one here"
    if not facts.target_in_session_catalog:
        return "the target is outside spark_catalog, which Delta owns"
    return None
