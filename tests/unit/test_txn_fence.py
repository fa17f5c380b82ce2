"""The fence inside the commit (core/recovery/txn_fence.py), pure: a run's writes carry its record's
application id whatever way the record's name is written; a taker's marker is nobody's change to
take back; a pending table is dropped without its Spark application being provably gone only
where its run's writes were fenced off by a marker in the model table's own log, never where its
load is there. Property-tested; the fence on real Delta is in
tests/functional/evolution/test_kill.py, and the Runner against a table that keeps Delta's rule
in tests/unit/test_fault_matrix.py."""

from __future__ import annotations

import pytest
from dbt_common.exceptions import DbtDatabaseError
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.connection.errors import ConnectionLostError
from dbt.adapters.spark_contracts.core.evolution.capabilities import row_of
from dbt.adapters.spark_contracts.core.recovery.intent import Commit, foreign_commits, is_marker
from dbt.adapters.spark_contracts.core.recovery.pending import (
    FENCED_PROPERTY,
    Action,
    LogEntry,
    ModelRecord,
    Pending,
    decide_pending,
)
from dbt.adapters.spark_contracts.core.recovery.record import (
    TXN_APP_PROPERTY,
    RunRecord,
    pending_properties,
)
from dbt.adapters.spark_contracts.core.recovery.txn_fence import (
    MARKER_VERSION,
    TXN_APP_ID,
    TXN_VERSION,
    app_id,
    marker_sql,
    marker_tag,
)
from dbt.adapters.spark_contracts.run import retry
from dbt.adapters.spark_contracts.run.fence import carrying, commit_markers
from dbt.adapters.spark_contracts.run.model_run import DELTA_USER_METADATA
from dbt.adapters.spark_contracts.run.retry import INSERT_ATTEMPTS

TAG = "dbt-spark-contracts:inv-1:abc:model.p.t"
OTHER = "dbt-spark-contracts:inv-2:def:model.p.t"
RECORD = "db.t__dbt_lease_inv1"

names = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)


@given(names, names, st.sampled_from(["", "spark_catalog."]))
def test_a_records_application_id_is_the_same_however_its_name_is_written(schema, name, cat):
    """Its holder names it with its catalog and schema, a listing gives it bare, quoted or in
    another case: one id (else a marker would fence off nobody)."""
    record = f"{name}__dbt_lease_inv1"
    written = [record, f"{schema}.{record}", f"{cat}{schema}.`{record}`", record.upper()]
    assert len({app_id(w, "n1") for w in written}) == 1
    assert len({marker_tag(w) for w in written}) == 1
    assert app_id(record, "n1") != app_id(f"{name}__dbt_lease_inv2", "n1")  # each run its own
    assert app_id(record, "n1") != app_id(record, "n2")  # and each taking of the lease


def test_the_markers_version_is_above_every_version_a_holder_sends():
    assert MARKER_VERSION == 2**63 - 1  # Delta's txnVersion is a long
    assert "when matched then delete" in marker_sql("db.t") and " on false " in marker_sql("db.t")


def test_only_delta_fences_inside_the_commit():
    assert row_of("delta").fences_in_commit
    assert not row_of("iceberg").fences_in_commit and not row_of("parquet").fences_in_commit


tags = st.sampled_from([TAG, OTHER, None, marker_tag(RECORD), "streaming-job"])


@given(st.lists(st.tuples(tags, st.sampled_from(["MERGE", "WRITE", "UPDATE"])), max_size=8))
def test_a_marker_is_never_a_foreign_commit_and_never_the_runs_own(sequence):
    """A marker is an empty MERGE with the marker tag; any other commit under that tag (a
    session the tag leaked into) is still another writer's."""
    commits = [Commit(v, op, tag) for v, (tag, op) in enumerate(sequence)]
    foreign = foreign_commits(commits, TAG)
    markers = [(t, op) for t, op in sequence if is_marker(t) and op == "MERGE"]
    expected = [(t, op) for t, op in sequence if t != TAG and (t, op) not in markers]
    assert [(c.tag, c.operation) for c in foreign] == expected
    assert not is_marker(TAG) and not is_marker(None) and is_marker(marker_tag(RECORD))


def test_a_record_says_the_transaction_id_its_holders_writes_and_load_carry():
    app = app_id(RECORD, "n1")
    says = pending_properties("db.t__quarantine__pending_inv1", TAG, 3, app)
    assert says[FENCED_PROPERTY] == app
    properties = {**says, TXN_APP_PROPERTY: app, "dbt_spark_contracts.heartbeat": "0"}
    record = RunRecord.from_properties(RECORD, properties)
    assert record.txn_app == app
    assert record.pending is not None and record.pending.fenced_writes == app
    assert FENCED_PROPERTY not in pending_properties("p", TAG, 3)  # a load into a new log
    assert RunRecord.from_properties(RECORD, {}).txn_app is None  # an earlier build's record


OPERATIONS = ("WRITE", "MERGE", "RESTORE", "SET TBLPROPERTIES")
entries = st.lists(
    st.tuples(st.sampled_from([TAG, OTHER, None, marker_tag(RECORD)]), st.sampled_from(OPERATIONS)),
    max_size=8,
).map(lambda t: [LogEntry(tag, op, 4 + i) for i, (tag, op) in enumerate(t)])


@given(entries, st.booleans(), st.booleans())
def test_a_fenced_off_run_without_its_load_in_the_log_is_dropped_at_once(log, fenced_off, gone):
    """A run whose writes a marker fenced off: its load is in the log the settler read after the
    marker, or it never commits. So its rows are dropped when that log reaches back to the
    version its pending table was made at and holds no load of it, also while its Spark
    application may still run; moved when its load is there; and a lease that binds is left
    alone whatever the marker."""
    made = Pending("db.t__quarantine__pending_inv1", TAG, "inv-1", 0, "3", None, False, "x")
    whole = [LogEntry(None, "WRITE", 3), *log]
    decision = decide_pending(made, ModelRecord(whole, {}), gone=gone, fenced_off=fenced_off)
    loads = [e for e in whole if e.tag == TAG and e.operation in ("WRITE", "MERGE")]
    undone = loads and any(e.tag == TAG and e.operation == "RESTORE" for e in whole)
    if loads and not undone:
        assert decision.action is Action.MOVE
    if not loads and (fenced_off or gone):
        assert decision.action is Action.DROP
    if not loads and not fenced_off and not gone:
        assert decision.action is Action.KEEP
    assert decide_pending(made, ModelRecord(whole, {}), binds=True, fenced_off=True).action is (
        Action.WAIT
    )


class Session:
    """A session's settings as `set_conf`/`get_conf` see them; `fail_on`: keys whose setting
    fails; `ran`: the statements with the transaction id they carried."""

    def __init__(self, fail_on: tuple = (), leaves: bool = False, cut_off: bool = False) -> None:
        self.conf: dict = {DELTA_USER_METADATA: "dbt-spark-contracts:inv:t:model.p.t"}
        self.fail_on, self.ran, self.versions = fail_on, [], []
        self.leaves, self.left = leaves, []  # type: ignore[var-annotated]
        self.cut_off = cut_off  # a new session cannot be opened (the server out of reach)

    def leave_session(self, carried: tuple = ()) -> bool:
        """Spark Connect's or Thrift's (`leaves`): later statements go to a new session
        (`conf` then is that one's, the carried settings copied); `left` keeps the old one's
        settings. `cut_off`: the old one is left, and opening the new one fails."""
        if not self.leaves:
            return False
        if self.cut_off:
            self.left.append(self.conf)
            self.conf = {}
            raise ConnectionLostError("no new session")
        self.left.append(dict(self.conf))
        self.conf = {k: self.conf[k] for k in carried if k in self.conf}
        return True

    def set_conf(self, key: str, value: str | None) -> None:
        if (key, value) in self.fail_on:
            raise RuntimeError(f"could not set {key}")
        if value is None:
            self.conf.pop(key, None)
        else:
            self.conf[key] = value

    def get_conf(self, key: str) -> str | None:
        return self.conf.get(key)

    def run(self, sql: str) -> None:
        self.ran.append((sql, self.conf.get(TXN_APP_ID), self.conf.get(DELTA_USER_METADATA)))
        self.versions.append(self.conf.get(TXN_VERSION))
        if sql.startswith("fail"):
            raise RuntimeError("the write failed")

    def fetch(self, sql: str) -> list:
        return [{"tableName": "t"}] if sql == "show tables in db like 't'" else []


def test_the_transaction_id_leaves_the_session_whatever_the_write_did():
    session = Session()
    with carrying(session, "app", 3):  # type: ignore[arg-type]
        session.run("insert")
    assert TXN_APP_ID not in session.conf and TXN_VERSION not in session.conf
    with pytest.raises(RuntimeError, match="the write failed"):  # its own error, not the unset's
        with carrying(Session(fail_on=((TXN_VERSION, None),)), "app", 4):  # type: ignore[arg-type]
            raise RuntimeError("the write failed")
    failing = Session(fail_on=((TXN_VERSION, "5"),))  # the version cannot be set: nothing stays
    with pytest.raises(RuntimeError, match="could not set"):
        with carrying(failing, "app", 5):  # type: ignore[arg-type]
            pass
    assert TXN_APP_ID not in failing.conf


@pytest.mark.parametrize("leaves", [True, False], ids=["connect-or-thrift", "one-session"])
def test_a_write_without_an_answer_keeps_its_id_in_the_session_it_may_still_run_in(
    leaves: bool,
):
    """A write Spark gave no answer for may still read the session's settings on the server
    (Spark Connect keeps the session): unset there, it would commit with no id, which no marker
    fences off (seen on 2026-11-30: a lost load committed after the next run's marker). Its
    session is left with the id set, and the connection goes on in a new one with the node's
    tag; where the method has one session only (the embedded one: its failed statement is
    over), the id is unset as before."""
    session = Session(leaves=leaves)
    with pytest.raises(ConnectionLostError):
        with carrying(session, "app", 6):  # type: ignore[arg-type]
            raise ConnectionLostError("read timed out")
    if leaves:
        assert session.left and session.left[-1][TXN_APP_ID] == "app", session.left
        assert session.left[-1][TXN_VERSION] == "6"
        assert session.conf == {DELTA_USER_METADATA: "dbt-spark-contracts:inv:t:model.p.t"}
    else:
        assert TXN_APP_ID not in session.conf and TXN_VERSION not in session.conf
    answered = Session(leaves=True)  # Spark's own refusal is final: unset, nothing left
    with pytest.raises(DbtDatabaseError):
        with carrying(answered, "app", 7):  # type: ignore[arg-type]
            raise DbtDatabaseError("refused")
    assert not answered.left and TXN_APP_ID not in answered.conf


def test_a_marker_carries_the_records_id_and_tag_and_the_nodes_tag_comes_back():
    session = Session()
    record = RunRecord(RECORD, "inv1", "0", txn_app=app_id(RECORD, "n1"))
    marked = commit_markers(session, record, [("db.t", "delta"), ("iceberg.db.t", "iceberg")])  # type: ignore[arg-type]
    assert marked == ("db.t",)  # Iceberg has no transaction id: no marker
    assert session.ran == [(marker_sql("db.t"), app_id(RECORD, "n1"), marker_tag(RECORD))]
    assert session.conf == {DELTA_USER_METADATA: "dbt-spark-contracts:inv:t:model.p.t"}
    unfenced = RunRecord(RECORD, "inv1", "0")  # an earlier build's: its writes carry no id
    assert commit_markers(session, unfenced, [("db.t", "delta")]) == ()  # type: ignore[arg-type]


class Refusing(Session):
    """A session whose first `refusals` markers Delta refuses: a write of the old holder under
    the same id committed while each ran (`ConcurrentTransactionException`, which dbt raises
    as a database error)."""

    def __init__(self, refusals: int) -> None:
        super().__init__()
        self.refusals = refusals

    def run(self, sql: str) -> None:
        super().run(sql)
        if self.refusals:
            self.refusals -= 1
            raise DbtDatabaseError("ConcurrentTransactionException: txn app id committed")


@pytest.mark.parametrize("refusals", [1, INSERT_ATTEMPTS])
def test_a_refused_marker_is_sent_again(refusals: int, monkeypatch: pytest.MonkeyPatch):
    """The marker that loses to the old holder's write (that write is in the log then) is sent
    again with the same id, version and tag, up to `INSERT_ATTEMPTS` more times."""
    monkeypatch.setattr(retry.time, "sleep", lambda seconds: None)
    session = Refusing(refusals)
    record = RunRecord(RECORD, "inv1", "0", txn_app=app_id(RECORD, "n1"))
    assert commit_markers(session, record, [("db.t", "delta")]) == ("db.t",)  # type: ignore[arg-type]
    sent = (marker_sql("db.t"), app_id(RECORD, "n1"), marker_tag(RECORD))
    assert session.ran == [sent] * (refusals + 1)
    assert session.versions == [str(MARKER_VERSION)] * (refusals + 1)
    assert session.conf == {DELTA_USER_METADATA: "dbt-spark-contracts:inv:t:model.p.t"}


def test_a_marker_refused_every_time_raises_the_last_refusal(monkeypatch: pytest.MonkeyPatch):
    """Refused on every try, the taker cannot show the window closed: the last refusal raises
    (it repairs nothing), and the node's own tag is back in the session."""
    monkeypatch.setattr(retry.time, "sleep", lambda seconds: None)
    session = Refusing(INSERT_ATTEMPTS + 1)
    record = RunRecord(RECORD, "inv1", "0", txn_app=app_id(RECORD, "n1"))
    with pytest.raises(DbtDatabaseError, match="ConcurrentTransactionException"):
        commit_markers(session, record, [("db.t", "delta")])  # type: ignore[arg-type]
    assert len(session.ran) == INSERT_ATTEMPTS + 1
    assert session.versions == [str(MARKER_VERSION)] * (INSERT_ATTEMPTS + 1)
    assert session.conf == {DELTA_USER_METADATA: "dbt-spark-contracts:inv:t:model.p.t"}


@pytest.mark.parametrize(
    "error", [ConnectionLostError("read timed out"), KeyboardInterrupt()], ids=type
)
def test_an_interrupt_or_a_failed_new_session_still_keeps_the_id_in_the_old_one(error):
    """An interrupt in the writing thread says nothing of the write either; and where the new
    session cannot be opened, the write's own error is raised and the old session keeps the
    id (nothing is unset there)."""
    session = Session(leaves=True, cut_off=isinstance(error, ConnectionLostError))
    with pytest.raises(type(error)):
        with carrying(session, "app", 6):  # type: ignore[arg-type]
            raise error
    assert session.left and session.left[-1][TXN_APP_ID] == "app", session.left
