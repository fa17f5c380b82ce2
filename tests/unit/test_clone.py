"""`dbt clone` decisions (core/materialization/clone.py): no-op, skip, Delta shallow clone or view."""

from __future__ import annotations

from typing import Optional

from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.materialization.clone import (
    CloneAction,
    CloneFacts,
    plan_clone,
)


def facts(
    source_type: Optional[str] = "table",
    source_format: str = "delta",
    target_type: Optional[str] = None,
    target_in_session_catalog: bool = True,
    same_relation: bool = False,
    can_clone_table: bool = True,
    full_refresh: bool = False,
) -> CloneFacts:
    return CloneFacts(
        source_type=source_type,
        source_format=source_format,
        target_type=target_type,
        target_in_session_catalog=target_in_session_catalog,
        same_relation=same_relation,
        can_clone_table=can_clone_table,
        full_refresh=full_refresh,
    )


def test_delta_table_is_shallow_cloned() -> None:
    plan = plan_clone(facts())
    assert plan.action is CloneAction.SHALLOW_CLONE
    assert plan.action is CloneAction.SHALLOW_CLONE and not plan.drop_target


def test_full_refresh_drops_the_existing_clone_first() -> None:
    # Delta refuses to clone over a non-empty table (DELTA_UNSUPPORTED_NON_EMPTY_CLONE)
    plan = plan_clone(facts(target_type="table", full_refresh=True))
    assert plan.action is CloneAction.SHALLOW_CLONE and plan.drop_target
    plan = plan_clone(facts(target_type="view", full_refresh=True))
    assert plan.action is CloneAction.SHALLOW_CLONE and plan.drop_target


def test_existing_target_without_full_refresh_is_a_no_op() -> None:
    assert plan_clone(facts(target_type="table")).no_op
    assert plan_clone(facts(target_type="view", source_type="view")).no_op


def test_views_non_delta_tables_and_other_catalogs_become_views() -> None:
    assert plan_clone(facts(source_type="view")).as_view
    assert plan_clone(facts(source_format="parquet")).as_view
    assert plan_clone(facts(source_format="iceberg")).as_view
    assert plan_clone(facts(source_type=None)).as_view
    assert plan_clone(facts(target_in_session_catalog=False)).as_view
    plan = plan_clone(facts(can_clone_table=False))
    assert plan.as_view and "can_clone_table" in plan.reason


def test_same_relation_is_skipped_and_never_dropped() -> None:
    plan = plan_clone(facts(same_relation=True, target_type="table", full_refresh=True))
    assert plan.same_relation and not plan.drop_target


@given(
    source_type=st.sampled_from([None, "table", "view"]),
    source_format=st.sampled_from(["delta", "parquet", "iceberg"]),
    target_type=st.sampled_from([None, "table", "view"]),
    in_session_catalog=st.booleans(),
    same=st.booleans(),
    can_clone=st.booleans(),
    full_refresh=st.booleans(),
)
def test_plan_properties(
    source_type: Optional[str],
    source_format: str,
    target_type: Optional[str],
    in_session_catalog: bool,
    same: bool,
    can_clone: bool,
    full_refresh: bool,
) -> None:
    f = facts(
        source_type, source_format, target_type, in_session_catalog, same, can_clone, full_refresh
    )
    plan = plan_clone(f)
    # an existing target changes only under --full-refresh
    assert plan.no_op == (target_type is not None and not full_refresh)
    # only a Delta table is cloned as a table, only into spark_catalog, only if allowed
    if plan.action is CloneAction.SHALLOW_CLONE:
        assert (source_type, source_format, in_session_catalog, can_clone) == (
            "table",
            "delta",
            True,
            True,
        )
        assert not same
    # only an existing target other than the source is dropped, and only to clone it again
    if plan.drop_target:
        assert (
            plan.action is CloneAction.SHALLOW_CLONE
            and target_type is not None
            and full_refresh
            and not same
        )
