"""A replace of the model table sent only while no other run's replace of it may still run
(Iceberg: a rebuild's `create or replace`, behind the table's history, core/recovery/history_guard).

The history guard stops a replace that was not yet sent when another run committed. It cannot
stop one already sent: Iceberg commits a replace onto whatever the table is by then, and the
snapshot another run committed meanwhile is gone from the table's metadata too
(benchmarks/experiments/iceberg_replace_inflight.py). No repair could find that load again,
so the run that would commit after such a replace must not go on while it may still run:

- before it sends its replace, a run marks its own record `replacing` (`REPLACING_PROPERTY`),
  then reads the other runs' records;
- another record marked `replacing` binds it (core/recovery/lease.replace_verdict): watched
  until renewed (`RunInProgress`: a live run is replacing) or run out; run out, it binds on
  until there is positive evidence that its replace can no longer commit (its commit tag in
  the table's log, or its Spark application gone), and this run sends nothing
  (`ReplaceMayRun`, naming it and the repair by hand). A holder whose dbt process on this host
  is gone binds no one (an embedded session's statements ended with it).

Each run writes its mark before it reads the others', so of two runs that mark at once at
least one reads the other's mark: never both replace unseen. The mark is not taken back: the
record goes when the run ends, and a run that died after its replace landed is let go by its
tag in the log."""

from __future__ import annotations

import time
from typing import List

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.connection.spark_handle import Spark, process_running
from dbt.adapters.spark_contracts.core.recovery.lease import (
    Replace,
    Seen,
    State,
    Watch,
    judge,
    may_still_run,
    replace_verdict,
)
from dbt.adapters.spark_contracts.core.recovery.pending import LEASE_SUFFIX
from dbt.adapters.spark_contracts.core.recovery.record import (
    BEAT_PROPERTY,
    REPLACING_PROPERTY,
    RunRecord,
)
from dbt.adapters.spark_contracts.run.heartbeat import lease_seconds, this_client, wait_while
from dbt.adapters.spark_contracts.run.late import may_still_commit
from dbt.adapters.spark_contracts.run.lease import Leases
from dbt.adapters.spark_contracts.run.model_run import ModelRun
from dbt.adapters.spark_contracts.run.record_io import other_records
from dbt.adapters.spark_contracts.run.run_errors import RunInProgress
from dbt.adapters.spark_contracts.run.table_log import table_log

logger = AdapterLogger("SparkContracts")


class ReplaceMayRun(DbtRuntimeError):
    """Another run's replace of the model table may still run (its lease ran out, its client
    or Spark application may be alive, and its replace is not in the table's log): a replace
    sent now could be overwritten by it, with no trace. This run sent no replace, and its
    pending rows and record go as after any failure before its load."""

    def __init__(self, unique_id: str, relation: str, holder: str, record: str):
        self.unique_id, self.relation, self.holder, self.record = (
            unique_id,
            relation,
            holder,
            record,
        )
        super().__init__(
            f"{unique_id}: run {holder} was replacing {relation} and may still be (its lease ran "
            "out, but its dbt process or its Spark application may still be alive, and its "
            "replace is not in the table's log). An Iceberg replace of it landing after this "
            "run's load would erase that load without a trace, so this run changed nothing. "
            "Run again once its replace is in the table's log, or the embedded session it ran "
            "in has ended (its dbt process on this host), or its Thrift or Connect server has "
            "restarted. Repair by hand: make sure that run is over "
            "(its statement no longer running on the server), then release its lease, ALTER "
            f"TABLE {record} SET TBLPROPERTIES ('{BEAT_PROPERTY}' = '0', "
            f"'{REPLACING_PROPERTY}' = ''), and run the model again."
        )


def clear_to_replace(spark: Spark, leases: Leases, run: ModelRun) -> None:
    """Returns once the run's record is marked `replacing` (under the run's commit tag, which
    its replace carries) and no other run's replace of the table may still run (the module's
    text). Raises `RunInProgress` or `ReplaceMayRun` where one may: the run has sent nothing."""
    leases.write(run, {REPLACING_PROPERTY: run.commit_tag})
    watch = Watch(lease_seconds())

    def say(first: RunRecord, left: float) -> str:
        return (
            f"{run.unique_id}: waiting up to {left:.0f} s for run {first.holder}, which was "
            f"replacing {run.relation}: its lease has not been renewed since this run found it"
        )

    try:
        wait_while(lambda: _binding(spark, run, watch), watch, say)
    except BaseException:  # nothing sent: a Ctrl-C while it waits leaves no mark to bind on
        try:  # (a refusal's record is let go by the load's undo as well)
            leases.write(run, {REPLACING_PROPERTY: ""})
        except Exception as exc:
            logger.warning(f"{run.unique_id}: could not take its replacing mark back: {exc}")
        raise


def _binding(spark: Spark, run: ModelRun, watch: Watch) -> List[RunRecord]:
    """The other runs' `replacing` records still watched; raises where one is live or may
    still run with its lease run out."""
    waiting, now = [], time.monotonic()
    others = other_records(spark, run.relation, run.invocation_id, LEASE_SUFFIX, run.table_format)
    host = this_client().host
    for record in (r for r in others if r.replacing and not r.let_go):  # its holder's release
        if record.taken_by:  # taken over once its lease ran out (or its holder was dead):
            # the taker's own evidence is not this run's; only the log or the application is
            alive = may_still_run(record, host, process_running)
            state, seen = (State.WATCH if alive else State.DEAD), Seen.EXPIRED
        else:
            state = judge(record, host, process_running)
            seen = watch.see(record, now) if state is State.WATCH else None
        expired = seen is Seen.EXPIRED
        # the application before the log (run/late.py): a replace that commits in between is
        # then found landed, never missed
        may_commit = expired and may_still_commit(spark, record)
        landed = may_commit and _landed(spark, run, record)
        verdict = replace_verdict(state, seen, landed, may_commit)
        if verdict is Replace.LIVE:
            raise RunInProgress(run.unique_id, run.relation, str(record.holder))
        if verdict is Replace.REFUSE:
            raise ReplaceMayRun(run.unique_id, run.relation, str(record.holder), record.table)
        if verdict is Replace.WAIT:
            waiting.append(record)
    return waiting


def _landed(spark: Spark, run: ModelRun, record: RunRecord) -> bool:
    """`record`'s replace is in the model table's log: a snapshot under the commit tag its
    mark names (the tag its run's session carried)."""
    tag = record.replacing
    if tag.lower() == "true":  # an earlier build's mark: its pending table's tag is the run's
        tag = record.pending.tag if record.pending is not None else ""
    if not tag:
        return False
    _, snapshots = table_log(spark, run.table_format).listed(run.relation)
    return any(s.commit.tag == tag for s in snapshots)
