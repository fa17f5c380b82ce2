"""The quarantine's recovery protocol, one for every format and connection method. Pure.

A run whose contract discards rows with `quarantine: true` writes them, from the executors, to a
table of its own, the *pending* table `<relation>__quarantine__pending_<run>`, before it touches
the model's table. The pending table carries the run's commit tag and a lease (a heartbeat the
run renews while it holds the table). Then the load, whose commit carries the same tag, in the
model table's own log (Delta: `userMetadata`; Iceberg: the snapshot summary; parquet, which
keeps no log: a table property the run sets right after its load). Then the pending rows are
appended to the quarantine and the pending table is dropped.

A later run of the model that finds a pending table of another run decides from the model
table's own record (`decide_pending`), never from the quarantine's:

- the run may still be alive (its lease binds: core/recovery/lease.py, judged by positive evidence or
  watched on the settling run's own clock): leave it; that run moves its own rows;
- the load that carries the tag is in the model's log: the load finished; its discarded rows
  are moved into the quarantine (unless it already holds rows of that run), then the pending
  table is dropped (roll forward: rows are added, never taken away). For parquet (its load
  recorded by the property) only once that run let go of its record's lease (it failed after
  its load, or a person released it) or its Spark application is provably gone (below): till
  then its own move may still land, and a parquet quarantine can neither fence it off (Delta's
  marker) nor take it as a no-op (Iceberg's MERGE on the run id), so it is kept;
- the model's log still holds the version the table was at when the pending table was made
  (recorded on it: never a clock) and holds no such load after it, and
  the Spark application that ran that run's statements is provably gone (its embedded session's
  process on this host has ended; the server at its endpoint has restarted): the run died
  before its load, which can no longer commit; its pending rows belong to no load and are
  dropped (the table is as before that run). While that application may still run a statement
  the dead client sent (a Thrift or Connect server), the table is kept: its load may commit yet;
  the next run looks again;
- the pending table records that the model table had no version when it was made (the run was
  creating the table, or it had no commit yet), so every commit of the table came after it; the
  table's log reaches back to its first commit (Delta's version 0, an Iceberg snapshot without a
  parent: nothing was cleaned) and holds no load of that run; and its Spark application is
  provably gone: that run's load never committed and never will; its rows are dropped (kept while
  the application may still run its load, as above);
- otherwise (parquet without the property; a log cleaned past the run): nothing can be proven;
  the pending table is kept and named in a warning, with the statements that move it by hand.

A quarantine dropped, recreated, replaced, emptied or with its log cleaned changes none of
this: the quarantine's history is never read.

A microbatch model's batches follow the same protocol, each batch a run of its own: its own
pending table (`pending_name(..., batch_tag)`, named by its commit tag, which differs per batch),
its load tagged with that tag. Their discarded rows share the invocation id in `_dbt_run_id`, so
a batch's rows also carry its commit tag in `_dbt_batch_tag` (core/contracts/load_select.BATCH_COLUMN):
the settler's "already held" check and its MERGE key on both, never on the run id alone (another
batch of the invocation may be in the quarantine already). Only the rows' own column is written
in the same commit as the rows; anything recorded elsewhere (a property, a journal) would leave
a kill between the two writes undecidable.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dbt.adapters.spark_contracts.core.evolution.render import suffixed

PENDING_SUFFIX = "__pending_"  # <relation>__quarantine__pending_<run>
TAG_PROPERTY = "dbt_spark_contracts.pending_tag"  # the run's commit tag, on the pending table
RUN_PROPERTY = "dbt_spark_contracts.pending_run"  # its invocation id (its rows' `_dbt_run_id`)
BEAT_PROPERTY = "dbt_spark_contracts.heartbeat"  # changes with each beat; RELEASED: released
RELEASED = "0"  # the heartbeat of a lease let go of
# the model table's version (Delta version, Iceberg snapshot id) when the pending table was made
CREATED_VERSION_PROPERTY = "dbt_spark_contracts.created_version"
# where the run's statements run: "<endpoint> <Spark application id>" (`Application`)
APP_PROPERTY = "dbt_spark_contracts.application"
# the transaction id its run's load into the model table's own log carries (Delta:
# core/recovery/txn_fence.py): a taker's marker under it fences that load off; not said where
# the load writes a new table's log (a rebuild that drops or swaps the table)
FENCED_PROPERTY = "dbt_spark_contracts.fenced_writes"
SESSION_ENDPOINT = "session://"  # session://<host>/<pid>: an embedded session, in that process
# parquet keeps no log: the run sets this on the model's table right after its load
LOADED_PREFIX = "dbt_spark_contracts.loaded_"


def run_key(invocation_id: str) -> str:
    """The part of a pending table's name that names its run (as the stage's)."""
    return invocation_id.replace("-", "")[:12]


def batch_key(tag: str) -> str:
    """The part of a microbatch batch's pending table's name that tells it from the other
    batches of its invocation: a digest of the batch's commit tag (unique per node run)."""
    return hashlib.sha1(tag.encode()).hexdigest()[:8]


def pending_name(quarantine: str, invocation_id: str, batch_tag: str = "") -> str:
    """A run's pending table. `batch_tag`: a microbatch batch's commit tag; the batches of one
    invocation each write their own (`<relation>__quarantine__pending_<run>_<batch>`)."""
    key = run_key(invocation_id) + (f"_{batch_key(batch_tag)}" if batch_tag else "")
    return suffixed(quarantine, PENDING_SUFFIX + key)


def is_invocations_pending(identifier: str, quarantine_identifier: str, invocation_id: str) -> bool:
    """`identifier` names a pending table of that invocation: its run's, or one of its
    microbatch batches'."""
    own = pending_name(quarantine_identifier, invocation_id).lower()
    name = identifier.lower()
    return name == own or name.startswith(own + "_")


def loaded_property(invocation_id: str) -> str:
    return LOADED_PREFIX + run_key(invocation_id)


LEASE_SUFFIX = "__dbt_lease_"  # <relation>__dbt_lease_<run>: a multi-step run's lease
# <relation>__dbt_settle_<run>: held while a run settles other runs' pending tables; only
# settlers look for it, so settling never stops a multi-step run of the model
SETTLE_SUFFIX = "__dbt_settle_"


def lease_name(relation: str, invocation_id: str, suffix: str = LEASE_SUFFIX) -> str:
    """The lease of a run that changes `relation` in several steps under its intent: another
    run of the model repairs that intent only once the lease is gone or has run out. With
    `SETTLE_SUFFIX`: the lease of a run settling other runs' pending tables."""
    return suffixed(relation, suffix + run_key(invocation_id))


def _number(properties: Mapping[str, str], key: str) -> float | None:
    """Table property `key` (any case) as a number; None: not there, or not a number."""
    lowered = {k.lower(): v for k, v in properties.items()}
    try:
        return float(lowered[key])
    except (KeyError, ValueError):
        return None


def heartbeat_of(properties: Mapping[str, str]) -> float | None:
    """The heartbeat a pending or lease table's properties carry (None: none, or not a number)."""
    return _number(properties, BEAT_PROPERTY)


def is_pending_of(identifier: str, quarantine_identifier: str) -> bool:
    """`identifier` names a pending table of the quarantine `quarantine_identifier`."""
    return identifier.lower().startswith((quarantine_identifier + PENDING_SUFFIX).lower())


def host_pid(text: str) -> tuple[str, int] | None:
    """(host, pid) written `<host>/<pid>` (an embedded session's endpoint, a lease's client)."""
    host, _, pid = text.rpartition("/")
    return (host, int(pid)) if host and pid.isdigit() else None


@dataclass(frozen=True)
class Application:
    """Where a connection's statements run: its endpoint (`session://<host>/<pid>` for the
    embedded session, which lives and dies with that process; `<method>://<host>:<port>` for a
    server) and the Spark application there."""

    endpoint: str
    app_id: str

    def to_property(self) -> str:
        return f"{self.endpoint} {self.app_id}"

    @classmethod
    def from_property(cls, value: str | None) -> Application | None:
        endpoint, _, app_id = (value or "").strip().partition(" ")
        return cls(endpoint, app_id.strip()) if endpoint and app_id.strip() else None

    def process(self) -> tuple[str, int] | None:
        """(host, pid) of an embedded session's process; None for a server."""
        if not self.endpoint.startswith(SESSION_ENDPOINT):
            return None
        return host_pid(self.endpoint[len(SESSION_ENDPOINT) :])


def application_gone(
    recorded: Application | None, here: Application, process_running: Callable[[int], bool]
) -> bool:
    """Positive evidence that no statement of the application `recorded` can still run:
    an embedded session whose process on this host (`here`'s) has ended, or a server at
    `here`'s own endpoint that now runs another Spark application (it restarted). Anything
    else (not recorded, another host, another server, the same application) proves nothing."""
    if recorded is None:
        return False
    process = recorded.process()
    if process is not None:
        mine = here.process()
        return mine is not None and mine[0] == process[0] and not process_running(process[1])
    return (
        recorded.endpoint == here.endpoint and bool(here.app_id) and recorded.app_id != here.app_id
    )


class Action(enum.Enum):
    WAIT = "wait"  # its run may be alive
    MOVE = "move"  # its load is in the model's log: append it to the quarantine
    DROP = "drop"  # its run never loaded: the rows belong to no load
    KEEP = "keep"  # nothing proves either: a person decides


@dataclass(frozen=True)
class Pending:
    """A pending table as its properties describe it."""

    name: str
    tag: str | None
    run: str | None
    heartbeat: float | None
    # the model table's version when it was made (`CREATED_VERSION_PROPERTY`); None where it
    # does not say (or the table had no version yet)
    created_version: str | None
    application: Application | None = None  # where its run's statements ran
    # it records (an empty `CREATED_VERSION_PROPERTY`) that the model table had no version when
    # it was made: the run was creating the table (or the table had no commit yet)
    before_any_version: bool = False
    # the transaction id its run's writes carry (`FENCED_PROPERTY`); None: they carry none
    fenced_writes: str | None = None

    @classmethod
    def from_properties(cls, name: str, properties: Mapping[str, str]) -> Pending:
        lowered = {k.lower(): v for k, v in properties.items()}
        tag, run = lowered.get(TAG_PROPERTY), lowered.get(RUN_PROPERTY)
        application = Application.from_property(lowered.get(APP_PROPERTY))
        recorded = lowered.get(CREATED_VERSION_PROPERTY)
        version = (recorded or "").strip() or None
        before = recorded is not None and version is None
        fenced = (lowered.get(FENCED_PROPERTY) or "").strip() or None
        return cls(name, tag, run, heartbeat_of(properties), version, application, before, fenced)


@dataclass(frozen=True)
class LogEntry:
    """One commit in the model table's own log: its tag, operation and version."""

    tag: str | None
    operation: str = ""
    version: int | None = None  # Delta's version; Iceberg's snapshot id
    restored_to: int | None = None  # a Delta RESTORE's target version
    first: bool = False  # the table's first commit (Delta's version 0; a snapshot with no parent)


@dataclass(frozen=True)
class ModelRecord:
    """What the model table's own record says: its log (oldest first; None for a format that
    keeps none) and, for parquet, its properties."""

    log: Sequence[LogEntry] | None
    properties: Mapping[str, str]


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str


# The operations a run's load commits (Delta; Iceberg's snapshot operations in lower case): a
# multi-step run's other commits (UPDATE, ADD COLUMNS, properties) are not its load.
LOAD_OPERATIONS = {
    "WRITE",
    "MERGE",
    "CREATE TABLE AS SELECT",
    "REPLACE TABLE AS SELECT",
    "CREATE OR REPLACE TABLE AS SELECT",
    "APPEND",
    "OVERWRITE",
}


def decide_pending(
    pending: Pending,
    record: ModelRecord,
    binds: bool = False,
    gone: bool = False,
    fenced_off: bool = False,
    released: bool = False,
) -> Decision:
    """What to do with another run's pending table (see the module's text). `binds`: its lease
    may still be held (core/recovery/lease.py); `gone`: its run's Spark application is provably gone
    (`application_gone`); `released`: its run's record says it let go of its lease
    (`RunRecord.let_go`: a run sends nothing more once it let go), not that it ran out; `fenced_off`: its run's writes carry a transaction id
    (`Pending.fenced_writes`) and the settler committed a marker under it on the model table
    before it read `record` (core/recovery/txn_fence.py), so a load of that run not in `record`
    never commits. No clock is read: the log is compared by version."""
    if pending.heartbeat is None or pending.tag is None or pending.run is None:
        return Decision(Action.KEEP, "its properties do not name its run and lease")
    if binds:
        return Decision(Action.WAIT, "its run renewed its lease, or may still renew it")
    if record.log is None:  # parquet: the property the run set right after its load
        key = None
        for name, value in record.properties.items():
            if name.lower().startswith(LOADED_PREFIX) and value == pending.tag:
                key = name
        if key is not None and not (gone or released):
            # its own move, already past its fence, may still land: a settler's move beside it
            # would add the rows twice, and a Parquet quarantine takes neither back
            return Decision(
                Action.KEEP,
                f"the table's property {key} records its load, but its lease ran out without "
                "being released and the Spark application that ran its statements is not "
                "provably gone: it may still be moving the rows itself, and a Parquet "
                "quarantine could not take a second move back",
            )
        if key is not None:
            over = "its lease was released" if released else "the Spark application is gone"
            return Decision(Action.MOVE, f"the table's property {key} records its load, and {over}")
        return Decision(
            Action.KEEP, "the table keeps no log and carries no property recording its load"
        )
    loaded = load_state(record, pending.tag)
    if loaded is Loaded.UNDONE:
        return Decision(Action.DROP, "its load was taken back (a RESTORE to before it)")
    if loaded is Loaded.YES:
        return Decision(Action.MOVE, f"the table's log holds its load (tag {pending.tag})")
    # positive evidence in the table's own log that the run's load is not there (yet)
    made_at = pending.created_version
    if made_at is not None and any(str(e.version) == made_at for e in record.log):
        no_load = (
            f"the table's log still holds version {made_at}, from before the run's load, and "
            "no load of that run after it"
        )
    elif pending.before_any_version and record.log and record.log[0].first:
        no_load = (
            "the run made it before the table had any version, the table's log from its first "
            "commit on holds no load of that run"
        )
    else:
        no_load = ""
    if no_load and fenced_off:
        return Decision(
            Action.DROP,
            f"{no_load}, and a marker in the table's log fences that run's writes off",
        )
    if no_load:
        if not gone:
            return Decision(
                Action.KEEP,
                "the table's log holds no load of that run yet, but the Spark application that "
                "ran its statements may still be running one (it is not provably gone)",
            )
        return Decision(
            Action.DROP, f"{no_load}, and the Spark application that ran its statements is gone"
        )
    return Decision(Action.KEEP, "the table's log no longer reaches back to that run")


class Loaded(enum.Enum):
    YES = "yes"
    NO = "no"  # not in the log (which may not reach back far enough: the caller checks)
    UNDONE = "undone"  # loaded, then taken back by its own run's RESTORE


def load_state(record: ModelRecord, tag: str) -> Loaded:
    """Whether the model table's log (oldest first) holds the load of the run tagged `tag`.
    A RESTORE after it to a version before it (whoever made it: the run itself, or a repair) is
    the load taken back; an Iceberg rollback takes it out of the current lineage (the caller
    leaves such snapshots out)."""
    state, loaded_at = Loaded.NO, None
    for entry in record.log or ():
        operation = entry.operation.upper()
        if operation == "RESTORE" and state is Loaded.YES:
            if entry.tag == tag or (
                entry.restored_to is not None
                and loaded_at is not None
                and entry.restored_to < loaded_at
            ):
                state = Loaded.UNDONE
        elif entry.tag == tag and operation in LOAD_OPERATIONS:
            state, loaded_at = Loaded.YES, entry.version
    return state
