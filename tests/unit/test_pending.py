"""core/recovery/pending.decide_pending: what another run's pending table comes to, from the model
table's own record only, compared by version, never by a clock (property-tested: it never drops
the rows of a load that is in the table, never acts on a run whose lease binds, never drops on a
log that does not reach back to the version the run made its pending table at)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.recovery.manual import RowsOf, manual_move, rows_of_pending
from dbt.adapters.spark_contracts.core.recovery.pending import (
    BEAT_PROPERTY,
    CREATED_VERSION_PROPERTY,
    LOADED_PREFIX,
    RUN_PROPERTY,
    TAG_PROPERTY,
    Action,
    Application,
    LogEntry,
    ModelRecord,
    Pending,
    application_gone,
    decide_pending,
    is_pending_of,
    loaded_property,
    pending_name,
)

TAG = "dbt-spark-contracts:inv-1:abc:model.p.t"
OTHER = "dbt-spark-contracts:inv-2:def:model.p.t"

# a log: consecutive versions from a random first one (older ones cleaned); version 0 is the
# table's first commit (as Delta's; Iceberg's is the snapshot without a parent)
entries = st.tuples(
    st.integers(0, 6),
    st.lists(
        st.tuples(
            st.sampled_from([TAG, OTHER, None]),
            st.sampled_from(
                [
                    "WRITE",
                    "MERGE",
                    "SET TBLPROPERTIES",
                    "RESTORE",
                    "OPTIMIZE",
                    "CREATE TABLE AS SELECT",
                ]
            ),
        ),
        max_size=8,
    ),
).map(
    lambda t: [LogEntry(tag, op, t[0] + i, first=t[0] + i == 0) for i, (tag, op) in enumerate(t[1])]
)
LOADS = ("WRITE", "MERGE", "CREATE TABLE AS SELECT")


def pending(heartbeat: float = 0, created: str | None = "3", before: bool = False) -> Pending:
    """`before`: made before the table had any version (a creating run's: no version)."""
    version = None if before else created
    name = "db.t__quarantine__pending_inv1"
    return Pending(name, TAG, "inv-1", heartbeat, version, before_any_version=before)


@given(entries, st.booleans())
def test_a_lease_that_binds_is_left_alone(log, gone):
    decision = decide_pending(pending(12.5), ModelRecord(log, {}), binds=True, gone=gone)
    assert decision.action is Action.WAIT


@given(entries, st.sampled_from(["0", "3", "9", None]), st.booleans())
def test_the_rows_of_a_load_in_the_table_are_never_dropped(log, created, gone):
    loaded = [*log, LogEntry(TAG, "WRITE", 100)]
    decision = decide_pending(pending(0, created), ModelRecord(loaded, {}), gone=gone)
    assert decision.action is Action.MOVE


@given(entries, st.booleans(), st.sampled_from(["0", "3", "9", None, "before"]))
def test_rows_are_dropped_only_where_the_log_reaches_back_and_holds_no_load(log, gone, made):
    """... (back to the version the pending table was made at, or, for one made before the
    table had any version, back to the table's first commit) and, where no load of the run was
    ever in the log, only once the Spark application that ran its statements is provably gone
    (a statement of it may commit yet)."""
    before = made == "before"
    decision = decide_pending(pending(0, made, before), ModelRecord(log, {}), gone=gone)
    loads = [e for e in log if e.tag == TAG and e.operation in LOADS]
    if decision.action is Action.DROP:
        if before:
            reaches_back = bool(log) and log[0].first
        else:
            reaches_back = made is not None and any(str(e.version) == made for e in log)
        undone = any(e.tag == TAG and e.operation == "RESTORE" for e in log) and loads
        assert reaches_back or undone
        assert not loads or undone
        assert gone or undone
    if decision.action is Action.MOVE:
        assert loads
    if before and gone and log and log[0].first and not loads:  # provably never loaded
        assert decision.action is Action.DROP


def test_a_creating_runs_pending_table_is_settled_from_the_tables_first_commit():
    """A run that was creating the table records no version on its pending table. Its CTAS,
    the table's first commit, carries its tag: moved. Another run created the table and the
    log from the first commit on holds no load of it: dropped once its application is gone,
    kept while it may still run (a server may still run its CTAS: `create or replace`), and
    kept where the log was cleaned past the table's first commit."""
    made = pending(0, before=True)
    created = [LogEntry(TAG, "CREATE TABLE AS SELECT", 0, first=True), LogEntry(OTHER, "WRITE", 1)]
    assert decide_pending(made, ModelRecord(created, {})).action is Action.MOVE
    iceberg = [LogEntry(TAG, "append", 8_812_345_678, first=True)]
    assert decide_pending(made, ModelRecord(iceberg, {})).action is Action.MOVE
    other = [LogEntry(OTHER, "CREATE TABLE AS SELECT", 0, first=True), LogEntry(None, "WRITE", 1)]
    dropped = decide_pending(made, ModelRecord(other, {}), gone=True)
    assert dropped.action is Action.DROP and "first commit" in dropped.reason
    assert decide_pending(made, ModelRecord(other, {}), gone=False).action is Action.KEEP
    cleaned = [LogEntry(None, "WRITE", 7)]
    assert decide_pending(made, ModelRecord(cleaned, {}), gone=True).action is Action.KEEP
    assert decide_pending(made, ModelRecord([], {}), gone=True).action is Action.KEEP
    # a pending table that does not say (an older run's): never dropped on an absence
    unknown = pending(0, created=None)
    assert decide_pending(unknown, ModelRecord(other, {}), gone=True).action is Action.KEEP


def test_a_load_taken_back_by_its_own_run_is_dropped():
    log = [LogEntry(None, "CREATE", 0), LogEntry(TAG, "WRITE", 1), LogEntry(TAG, "RESTORE", 2)]
    assert decide_pending(pending(0), ModelRecord(log, {})).action is Action.DROP


def test_a_repairs_restore_to_before_the_load_takes_it_back_and_a_later_one_does_not():
    """A repair's RESTORE carries the repairing run's tag: what counts is where it went."""
    load = LogEntry(TAG, "WRITE", version=4)
    back = LogEntry(OTHER, "RESTORE", version=5, restored_to=3)
    later = LogEntry(OTHER, "RESTORE", version=6, restored_to=4)
    base = [LogEntry(None, "CREATE TABLE AS SELECT", version=3), load]
    assert decide_pending(pending(0), ModelRecord([*base, back], {})).action is Action.DROP
    assert decide_pending(pending(0), ModelRecord([*base, later], {})).action is Action.MOVE


def test_a_backfill_update_is_not_the_load():
    log = [LogEntry(None, "CREATE TABLE AS SELECT", 3), LogEntry(TAG, "UPDATE", 4)]
    assert decide_pending(pending(0), ModelRecord(log, {}), gone=True).action is Action.DROP


def test_a_run_that_never_loaded_is_dropped_only_once_its_application_is_gone():
    """A Thrift or Connect server runs on what a killed client sent: while it may, the load
    may commit yet, and the rows are kept (the next run looks again)."""
    log = [LogEntry(None, "CREATE TABLE AS SELECT", 3)]
    kept = decide_pending(pending(0), ModelRecord(log, {}), gone=False)
    assert kept.action is Action.KEEP and "may still be running" in kept.reason
    assert decide_pending(pending(0), ModelRecord(log, {}), gone=True).action is Action.DROP


def test_an_iceberg_snapshot_id_is_a_version_too():
    log = [LogEntry(None, "append", 8_812_345_678), LogEntry(OTHER, "append", 1_234)]
    made = pending(0, "8812345678")
    assert decide_pending(made, ModelRecord(log, {}), gone=True).action is Action.DROP


def test_an_application_is_gone_only_on_positive_evidence():
    host = "ci-7"
    mine = Application(f"session://{host}/100", "local-1")
    running = {100, 200}.__contains__
    # an embedded session lives in its process: ended on this host is gone
    assert application_gone(Application(f"session://{host}/300", "local-0"), mine, running)
    assert not application_gone(Application(f"session://{host}/200", "local-0"), mine, running)
    assert not application_gone(Application("session://other/300", "local-0"), mine, running)
    # a server: the same endpoint now running another application restarted
    server = Application("thrift://spark:10000", "app-2")
    assert application_gone(Application("thrift://spark:10000", "app-1"), server, running)
    assert not application_gone(Application("thrift://spark:10000", "app-2"), server, running)
    assert not application_gone(Application("thrift://other:10000", "app-1"), server, running)
    assert not application_gone(Application("thrift://spark:10000", "app-1"), mine, running)
    assert not application_gone(None, mine, running)
    # read back from the property the run sets
    recorded = Application.from_property(mine.to_property())
    assert recorded == mine and Application.from_property("garbled") is None


def test_restore_targets_read_back_as_thrift_prints_them():
    from dbt.adapters.spark_contracts.run.table_log import _restored_to

    assert _restored_to({"operationParameters": '{"version":"3","timestamp":null}'}) == 3
    assert _restored_to({"operationParameters": {"version": "12"}}) == 12


def test_a_log_cleaned_past_the_run_keeps_the_rows():
    log = [LogEntry(OTHER, "WRITE", 7)]  # the version the pending table was made at is gone
    decision = decide_pending(pending(0, "3"), ModelRecord(log, {}), gone=True)
    assert decision.action is Action.KEEP and "no longer reaches back" in decision.reason


def test_parquet_moves_on_its_property_once_its_run_is_gone_and_keeps_otherwise():
    """Parquet keeps no log: its load is recorded by a property. A run whose application may
    still run may still send its own move (past its fence), which a settler's move beside it
    would double, so only a run provably gone is moved for."""
    loaded = ModelRecord(None, {loaded_property("inv-1"): TAG})
    assert decide_pending(pending(0), loaded, gone=True).action is Action.MOVE
    alive = decide_pending(pending(0), loaded, gone=False)
    assert alive.action is Action.KEEP and "not provably gone" in alive.reason
    # released by its run (a failed move after its load: QuarantinePending) or by a person
    assert decide_pending(pending(0), loaded, released=True).action is Action.MOVE
    assert decide_pending(pending(0), ModelRecord(None, {}), gone=True).action is Action.KEEP
    assert loaded_property("inv-1").startswith(LOADED_PREFIX)


def test_a_pending_table_is_named_by_its_run_and_read_back_from_its_properties():
    name = pending_name("db.t__quarantine", "0a1b-2c3d-4e5f-6789")
    assert name == "db.t__quarantine__pending_0a1b2c3d4e5f"
    assert is_pending_of("T__Quarantine__pending_0a1b2c3d4e5f", "t__quarantine")
    assert not is_pending_of("t__quarantine", "t__quarantine")
    read = Pending.from_properties(
        name,
        {
            TAG_PROPERTY.upper(): TAG,
            RUN_PROPERTY: "inv-1",
            BEAT_PROPERTY: "12",
            CREATED_VERSION_PROPERTY: "3",
        },
    )
    assert (read.tag, read.run, read.heartbeat, read.created_version) == (TAG, "inv-1", 12.0, "3")
    no_version = Pending.from_properties(name, {CREATED_VERSION_PROPERTY: ""})
    assert no_version.created_version is None and no_version.before_any_version
    assert not Pending.from_properties(name, {}).before_any_version  # it does not say
    assert not read.before_any_version
    unnamed = Pending.from_properties(name, {BEAT_PROPERTY: "x"})
    assert decide_pending(unnamed, ModelRecord([], {})).action is Action.KEEP


def test_the_move_by_hand_appends_only_the_discarded_rows():
    """A pending table holds the run's kept rows too (`_contract_reason` null): the statements a
    warning names for a move by hand append the discarded ones only, then drop it."""
    said = manual_move("s.m__quarantine__pending_r", "s.m__quarantine", "parquet", None)
    move, rest = said.split("; ", 1)
    assert move == (
        "INSERT INTO s.m__quarantine BY NAME SELECT * FROM s.m__quarantine__pending_r "
        "WHERE `_contract_reason` IS NOT NULL"
    )
    assert rest.startswith("drop table if exists s.m__quarantine__pending_r (if the model's load")


def test_the_move_by_hand_appends_nothing_the_quarantine_holds_already():
    """A run's move that landed before its drop of the pending table: the statement by hand
    inserts none of that run's rows again (of that batch, for a microbatch batch's)."""
    quarantine = "s.m__quarantine"
    run_pending = Pending(pending_name(quarantine, "inv-1"), TAG, "inv-1", 0.0, None)
    rows = rows_of_pending(run_pending, quarantine)
    assert rows == RowsOf("inv-1", None)
    move = manual_move(run_pending.name, quarantine, "parquet", rows).split("; ", 1)[0]
    assert move.endswith(
        "WHERE `_contract_reason` IS NOT NULL AND NOT EXISTS (SELECT 1 FROM s.m__quarantine "
        "WHERE `_dbt_run_id` = 'inv-1')"
    )
    batch_pending = Pending(pending_name(quarantine, "inv-1", "b-tag"), "b-tag", "inv-1", 0.0, None)
    assert rows_of_pending(batch_pending, quarantine) == RowsOf("inv-1", "b-tag")
    unnamed = Pending(pending_name(quarantine, "inv-1"), None, None, None, None)
    assert rows_of_pending(unnamed, quarantine) is None
