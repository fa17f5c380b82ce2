"""Run records as tables (core/recovery/record.py): listed, read, made with their lease's
properties, marked taken over; and a connection behind a lease's fence (`Fenced`)."""

import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Protocol, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtDatabaseError

from dbt.adapters.spark_contracts.connection.errors import statement_answered
from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.evolution.capabilities import drop_sql, row_of
from dbt.adapters.spark_contracts.core.recovery.pending import (
    APP_PROPERTY,
    BEAT_PROPERTY,
    LEASE_SUFFIX,
    RELEASED,
    RUN_PROPERTY,
    batch_key,
    lease_name,
)
from dbt.adapters.spark_contracts.core.recovery.record import (
    CLIENT_PROPERTY,
    EPOCH_PROPERTY,
    PENDING_PROPERTY,
    TAKEN_PROPERTY,
    RunRecord,
)
from dbt.adapters.spark_contracts.core.schema.types import sql_string
from dbt.adapters.spark_contracts.run.heartbeat import this_client

logger = AdapterLogger("SparkContracts")


def table_listed(spark: Spark, relation: str) -> bool:
    """`relation` (`schema.name`) is listed in its schema now (not dbt's cache)."""
    schema, name = relation.rsplit(".", 1)
    return bool(spark.fetch(f"show tables in {schema} like '{name.strip('`')}'"))


def table_properties(spark: Spark, table: str) -> Dict[str, str]:
    rows = spark.fetch(f"show tblproperties {table}")
    return {str(r.get("key")): str(r.get("value")) for r in rows}


def application_of(spark: Spark) -> str:
    """Where `spark`'s statements run, as a record names it (`Application.to_property`)."""
    application = getattr(spark, "application", None)
    return application().to_property() if application is not None else ""


def set_properties_sql(table: str, properties: Dict[str, str]) -> str:
    """`table`'s properties set to `properties` (a record told something, or marked)."""
    pairs = ", ".join(f"'{k}' = {sql_string(v)}" for k, v in properties.items())
    return f"alter table {table} set tblproperties ({pairs})"


def unset_properties_sql(table: str, *keys: str) -> str:
    """`keys` taken off `table`'s properties (a record no longer says them)."""
    names = ", ".join(sql_string(k) for k in keys)
    return f"alter table {table} unset tblproperties if exists ({names})"


def lease_properties(spark: Spark, invocation_id: str, epoch: int = 0) -> str:
    """The properties a lease (a run's record) is made with."""
    app = application_of(spark)
    return (
        f"'{RUN_PROPERTY}' = {sql_string(invocation_id)}, "
        f"'{BEAT_PROPERTY}' = '{time.time():.3f}', "
        f"'{CLIENT_PROPERTY}' = {sql_string(this_client().to_property())}, "
        f"'{APP_PROPERTY}' = {sql_string(app)}, '{EPOCH_PROPERTY}' = '{epoch}'"
    )


def read_lease(spark: Spark, table: str, table_format: Optional[str] = None) -> Optional[RunRecord]:
    """A lease table as it is now; None once it is gone (read, then listed, fails closed: a
    table that is listed but cannot be read raises). A record beside a model whose format's
    catalog caches its tables (`refresh_to_see_others`: Iceberg) is refreshed first, or another
    run's beat, mark or drop would not be seen."""
    try:
        if table_format is not None and row_of(table_format).refresh_to_see_others:
            spark.fetch(f"refresh table {table}")
        return RunRecord.from_properties(table, table_properties(spark, table))
    except Exception:
        if table_listed(spark, table):
            raise
        return None


def records_of(
    spark: Spark,
    schema: str,
    names: Iterable[str],
    own: str,
    table_format: Optional[str] = None,
) -> List[RunRecord]:
    """The records `names` in `schema` as they are now, but this invocation's own (`own`, its
    record's name; a microbatch batch's is `<own>_<batch>`) and those gone meanwhile."""
    own, found = own.lower(), []
    for name in names:
        if not name or name.lower() == own or name.lower().startswith(own + "_"):
            continue
        record = read_lease(spark, f"{schema}.{name}", table_format)
        if record is not None:
            found.append(record)
    return found


def other_records(
    spark: Spark,
    relation: str,
    invocation_id: str,
    suffix: str = LEASE_SUFFIX,
    table_format: Optional[str] = None,
) -> List[RunRecord]:
    """Other runs' records (leases) on `relation`, as they are now. Fails closed: a listing
    that fails raises, and a record whose properties cannot be read while it is still listed
    raises (it may be a live run's)."""
    schema, name = relation.rsplit(".", 1)
    own = lease_name(name, invocation_id, suffix)  # a batch's records too (records_of)
    rows = spark.fetch(f"show tables in {schema} like '{name}{suffix}*'")
    names = (str(r.get("tableName") or "") for r in rows)
    return records_of(spark, schema, names, own, table_format)


def drop_record(spark: Spark, table: str, table_format: str) -> None:
    """A run record (a lease table) dropped. Beside an Iceberg model it is an Iceberg table,
    dropped with PURGE, which deletes the files reachable from the table as the session's
    catalog last loaded it (its cache, `refresh_to_see_others`): the metadata file of a later
    commit by another session (the lease's own heartbeat connection, another run's mark) would
    stay in the warehouse. So it is refreshed first. The refresh only spares the warehouse a
    file: one that fails (the record gone already, left to the drop's `if exists`) is logged,
    and the drop is sent."""
    row = row_of(table_format)
    if row.drop_purges and row.refresh_to_see_others:
        try:
            spark.fetch(f"refresh table {table}")
        except DbtDatabaseError as exc:
            logger.debug(f"could not refresh {table} before dropping it: {exc}")
    spark.run(drop_sql(table, table_format))


def take_over_sql(table: str, invocation_id: str, told: Optional[Dict[str, str]] = None) -> str:
    """Another run's lease marked taken over by `invocation_id` (and released), saying `told`
    from then on too."""
    marks = {TAKEN_PROPERTY: invocation_id, BEAT_PROPERTY: RELEASED, **(told or {})}
    return set_properties_sql(table, marks)


class Fenced:
    """`spark` behind the fence: `check()` (a holder's `Leases.check`) before every statement
    sent with `run` (anything that may change a table), so a run that lost its lease sends
    nothing more, also from code that knows nothing of leases (a format's restore, which may
    send several statements: run/table_log.py). `fetch` (reads) and everything else pass."""

    def __init__(self, spark: Spark, check: Callable[[], None]) -> None:
        self._spark, self._check = spark, check

    def run(self, sql: str) -> Any:
        self._check()
        return self._spark.run(sql)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)


class Answered:
    """`spark` noting whether a statement it sent (`run`) ended without Spark's answer
    (connection/errors.statement_answered: a lost connection, a cancel, a server's timeout):
    such a statement may still commit on a server (`unanswered`: the first such statement)."""

    def __init__(self, spark: Spark) -> None:
        self._spark, self.unanswered = spark, ""

    def run(self, sql: str) -> Any:
        try:
            return self._spark.run(sql)
        except BaseException as exc:  # an interrupt in the writing thread is no answer too
            answered = isinstance(exc, Exception) and statement_answered(exc)
            self.unanswered = self.unanswered or ("" if answered else sql)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)


class LeaseOwner(Protocol):
    """Who holds a model's run lease: a planned `ModelRun`, or a `ModelKey` while settling."""

    @property
    def relation(self) -> str: ...
    @property
    def invocation_id(self) -> str: ...
    @property
    def table_format(self) -> str: ...
    @property
    def unique_id(self) -> str: ...
    @property
    def batch_tag(self) -> str: ...


@dataclass(frozen=True)
class ModelKey:
    """One invocation's run of one model, before its run is planned."""

    relation: str
    invocation_id: str
    table_format: str
    unique_id: str
    batch_tag: str = ""


def record_name(owner: LeaseOwner, suffix: str = LEASE_SUFFIX) -> str:
    """The table of `owner`'s record (or lease): `<model>__dbt_lease_<run>`, and for a
    microbatch batch `..._<batch>` (the batches of one invocation each keep their own)."""
    name = lease_name(owner.relation, owner.invocation_id, suffix)
    return name + (f"_{batch_key(owner.batch_tag)}" if owner.batch_tag else "")


def copy_of(spark: Spark, invocation_id: str, says: Dict[str, str]) -> List[Tuple[str, str]]:
    """What a pending table carries of its run's record (`says`; core/recovery/pending.Pending):
    the run, its tag, the model table's version, where its statements run; its lease released
    ("0"): the record holds the lease, so a settler that finds the table without its record
    waits for no one, and drops rows only on `decide_pending`'s proof."""
    kept = {k: v for k, v in says.items() if k != PENDING_PROPERTY}
    return [
        *kept.items(),
        (RUN_PROPERTY, invocation_id),
        (APP_PROPERTY, application_of(spark)),
        (BEAT_PROPERTY, RELEASED),
    ]
