"""An Iceberg rebuild's replace is sent only while no other run's replace of the table may still
run (run/replace_alone.py): Iceberg commits a replace already sent onto whatever the table is by
then, erasing a snapshot committed meanwhile (benchmarks/experiments/iceberg_replace_inflight.py),
so no fence stops it once sent. Through `Runner._behind_history` and `_step`, on the catalogue
fake of test_fence.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.recovery.lease import (
    Replace,
    Seen,
    State,
    replace_verdict,
)
from dbt.adapters.spark_contracts.core.recovery.pending import (
    APP_PROPERTY,
    BEAT_PROPERTY,
    RUN_PROPERTY,
    Application,
    lease_name,
)
from dbt.adapters.spark_contracts.core.recovery.record import (
    CLIENT_PROPERTY,
    REPLACING_PROPERTY,
    TAKEN_PROPERTY,
    RunRecord,
)
from dbt.adapters.spark_contracts.run import Runner, RunReport
from dbt.adapters.spark_contracts.run import heartbeat as heartbeat_module
from dbt.adapters.spark_contracts.run.heartbeat import this_client
from dbt.adapters.spark_contracts.run.replace_alone import ReplaceMayRun
from dbt.adapters.spark_contracts.run.run_errors import LOAD_STEP, RunInProgress
from tests.unit.test_fence import Applied, rebuild_run, stall

REPLACE = "create or replace table iceberg.db.t using iceberg as select 1 as id"
OTHER = lease_name("iceberg.db.t", "inv9")
OTHER_TAG = "dbt-spark-contracts:inv9:x:model.p.m"
GONE_PID = 4_194_999  # above Linux's largest pid: no process runs with it


@given(
    state=st.sampled_from(State),
    seen=st.sampled_from([None, *Seen]),
    landed=st.booleans(),
    may_commit=st.booleans(),
)
def test_a_replacing_record_binds_only_while_its_replace_may_still_run(
    state: State, seen: Any, landed: bool, may_commit: bool
):
    """Released, taken over or provably dead: it binds no one. Alive (watched): renewed is a
    live run, else waited for; run out, it lets go only on positive evidence (its replace in
    the log, its application gone), else this run refuses."""
    verdict = replace_verdict(state, seen, landed, may_commit)
    if state is not State.WATCH:
        assert verdict is Replace.GO
    elif seen is Seen.LIVE:
        assert verdict is Replace.LIVE
    elif seen is Seen.WAITING:
        assert verdict is Replace.WAIT
    else:
        assert verdict is (Replace.GO if landed or not may_commit else Replace.REFUSE)


def test_the_mark_is_read_back_from_a_records_properties():
    """The mark names the commit tag its run's replace carries."""
    marked = RunRecord.from_properties(OTHER, {REPLACING_PROPERTY: OTHER_TAG, RUN_PROPERTY: "inv9"})
    assert marked.replacing == OTHER_TAG and not RunRecord.from_properties(OTHER, {}).replacing


class Renewing(Applied):
    """`Applied`, whose record `OTHER` is renewed each time it is read, when `renews`; each
    read kept in `sent` too, as `read: <sql>`."""

    renews = False

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        self.sent.append(f"read: {sql}")
        rows = super().fetch(sql)
        if self.renews and sql == f"show tblproperties {OTHER}":
            table = self.tables[OTHER]
            table[BEAT_PROPERTY] = str(int(table[BEAT_PROPERTY]) + 1)
        return rows


def other_run(catalogue: Applied, how: str) -> None:
    """Another run's record on the model, marked `replacing` with its commit tag (unless `how`
    is "unmarked"; "taken": taken over by a third run, its application the one this run's
    statements run on; "untagged": an earlier build's mark, "true")."""
    here = catalogue.here
    client = f"{this_client().host}/{GONE_PID}" if how == "gone" else "another-host/7"
    # gone: an embedded session's statements ended with its dbt process on this host
    app = Application(f"session://{client}", "local-1") if how == "gone" else here
    props = {
        RUN_PROPERTY: "inv9",
        # a takeover releases the lease too (record_io.take_over_sql): its heartbeat is 0
        BEAT_PROPERTY: "0" if how == "released" or how.startswith("taken") else "5",
        CLIENT_PROPERTY: client,
        APP_PROPERTY: app.to_property(),
    }
    if how != "unmarked":
        props[REPLACING_PROPERTY] = "true" if how == "untagged" else OTHER_TAG
    if how.startswith("taken"):
        props[TAKEN_PROPERTY] = "inv5"
    catalogue.tables[OTHER] = props
    if how in ("landed", "taken, landed"):  # its replace is in the table's log: its tag
        catalogue.snapshots.append((7, None, OTHER_TAG))


def rebuild(tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch) -> tuple:
    monkeypatch.setenv(heartbeat_module.LEASE_ENV, "0.3")  # a watch runs out in 0.3 s
    catalogue = Renewing(lease_name("iceberg.db.t", "inv2"))
    catalogue.tables["iceberg.db.t"] = catalogue.tables.pop("db.t")
    runner = Runner(catalogue, RunReport(), tmp_path)  # type: ignore[arg-type]
    run = rebuild_run(swaps_after_load=False)
    runner.leases.take(run)  # type: ignore[arg-type]
    runner.book.begin(())
    other_run(catalogue, how)
    catalogue.renews = how == "live"
    first = runner._behind_history(run, REPLACE)  # type: ignore[arg-type]
    assert first is not None
    stall(runner.leases)  # the load's fence reads the lease
    load = lambda: runner.spark.run(REPLACE)  # noqa: E731  (never sent: `first` gives it)
    step = lambda: runner._step(run, LOAD_STEP, load, True, True, first)  # type: ignore[arg-type]  # noqa: E731
    step.runner = runner  # type: ignore[attr-defined]
    return catalogue, step


@pytest.mark.parametrize("how", ["unmarked", "released", "gone", "landed", "taken, landed"])
def test_a_rebuild_replaces_where_no_other_runs_replace_may_still_run(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
):
    """Another run's record not marked `replacing`, released, whose dbt process on this host is
    gone, or whose replace is in the table's log (the tag its mark names; also once a third run
    took its lease over): the replace is sent, behind its guard. The run marked its own record,
    with its own commit tag, before it read the others'."""
    catalogue, step = rebuild(tmp_path, how, monkeypatch)
    step()
    assert REPLACE in catalogue.applied, catalogue.sent
    own = lease_name("iceberg.db.t", "inv2")
    mark = next(
        i
        for i, s in enumerate(catalogue.sent)
        if re.match(rf"alter table {re.escape(own)} set tblproperties .*{REPLACING_PROPERTY}", s)
        and "dbt-spark-contracts:inv2:" in s
    )
    listing = [
        i for i, s in enumerate(catalogue.sent) if s.startswith("read: show tables in iceberg.db")
    ]
    sent = next(i for i, s in enumerate(catalogue.sent) if s.startswith("BEGIN"))
    assert mark < min(i for i in listing if i > mark) < sent, catalogue.sent
    # the history the guard compares with is read first: a run stopped before its mark still
    # fails on a load that lands meanwhile (TestLateIcebergRebuild)
    history = next(i for i, s in enumerate(catalogue.sent) if "AS fingerprint" in s)
    assert history < mark, catalogue.sent


@pytest.mark.parametrize("how", ["live", "run out", "taken", "untagged"])
def test_a_rebuild_sends_nothing_while_another_runs_replace_may_still_run(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
):
    """Another run marked `replacing`: renewed while watched, a live run is replacing
    (`RunInProgress`); run out, with its client on another host, its application the one this
    run's statements run on and no snapshot under its tag, its replace may still be running
    and would erase this run's load (`ReplaceMayRun`, naming it and the repair by hand). The
    same where a third run took that lease over (a takeover on the lease's expiry is no
    evidence that its replace can no longer commit), and for an earlier build's mark, which
    names no tag to find its replace by. No replace is sent either way."""
    catalogue, step = rebuild(tmp_path, how, monkeypatch)
    expected = RunInProgress if how == "live" else ReplaceMayRun
    with pytest.raises(expected) as raised:
        step()
    assert "inv9" in str(raised.value)
    if how != "live":  # the repair by hand releases the lease and takes the mark back
        assert f"ALTER TABLE {OTHER} SET TBLPROPERTIES" in str(raised.value)
        assert f"'{REPLACING_PROPERTY}' = ''" in str(raised.value)
    assert REPLACE not in catalogue.applied, catalogue.sent
    assert not [s for s in catalogue.sent if s.startswith("BEGIN")], catalogue.sent


@pytest.mark.parametrize("how", ["live", "run out"])
def test_a_refused_rebuild_lets_go_of_its_record_and_drops_its_pending_rows(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
):
    """A quarantining rebuild (its pending table written) refused before its replace sent
    nothing: its failure is answered, so its pending rows are settled as after any failure
    before the load (dropped: its load is not in the log) and its record let go, not left for a
    taker as a statement without an answer would leave it (which would bind the next run to a
    replace that was never sent)."""
    catalogue, step = rebuild(tmp_path, how, monkeypatch)
    runner = step.runner  # type: ignore[attr-defined]
    settled: List[tuple] = []

    def settle_own(run: Any, restored: bool, answered: bool = True) -> None:
        settled.append((restored, answered))
        runner.state.pending = None  # dropped: the run's load is not in the table

    monkeypatch.setattr(runner.quarantine, "settle_own", settle_own)
    runner.state.pending = "iceberg.db.t__dbt_pending_inv2"
    with pytest.raises(RunInProgress if how == "live" else ReplaceMayRun):
        step()
    assert settled == [(False, True)], settled
    assert runner.leases.abandoned == "" and runner.leases.held is None
    own = lease_name("iceberg.db.t", "inv2")
    left = catalogue.tables.get(own)
    assert left is None or RunRecord.from_properties(own, left).released, left
