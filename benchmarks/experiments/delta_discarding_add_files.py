"""Times a design for a discarding quarantine run on Delta, the counterpart of
iceberg_discarding_add_files.py: the model's output, with its reasons and a route column,
written once as Parquet partitioned by the route into a folder inside the Delta table's own
directory (`<table>/dbt_route_<uuid>/route=t|q/`), then the kept files (`route=t`) committed
into the table's log by Delta's own transaction API through py4j (`DeltaLog.forTable`,
`startTransaction()`, `commit(<AddFile>s, ManualUpdate)`: one metadata-only commit, no
rewrite), and the few discarded rows (`route=q`) inserted into the Delta quarantine with a plain
`INSERT ... SELECT` from the routed folder read as Parquet. Against the plain load and the
pending table (what the adapter does), both the harness's; the routed write sorted by route
(Spark's default) and unsorted (`plannedWrite.enabled=false`, 2 concurrent writers per task), as
on Iceberg. Before the rounds, at 100,000 rows: the checks (contents as the pending table's, the
probe's evaluations, the table's columns, history, log entry, count(*) and a full read, VACUUM's
dry run), then what a direct commit does with a CHECK constraint, with an INSERT committed inside
its transaction, and on a table with column mapping.

Each AddFile carries `{"numRecords": N}` as its stats, N read from the file's Parquet footer
(no min/max: no data skipping on these files); its path is relative to the table's root,
escaped as Delta's own writer does (`new Path(relative).toUri.toString`).

P3's query (a join to an aggregate, 5 M rows), 5 discarded by default; `[rows] [rounds]
[every]` (every: 1 row in `every` discarded; 5 for P3-heavy). The evaluations are counted by a
non-deterministic probe on a 100,000-row run, and each design's tables are compared with the
pending table's (the plain load keeps every row). A manual check of cost, not a test: run from
the project root with the venv.
"""

import statistics
import time
import uuid
from functools import partial

from p3_harness import DISCARDED, KEPT, KEPT_SCHEMA, WITH_REASON, Harness

harness = Harness()  # Delta on spark_catalog
spark = harness.spark
jvm = spark._jvm
T, Q = "t", "quarantine"

# one file schema for both routes: the table's columns first, then the quarantine's raw value
# and the reason, NULL where a row is kept (the route is the folder, not a column of the files)
ROUTED = (
    "select id, h, cnt, max_h, n, if(_contract_reason is null, null, n_str) as n_str, "
    "_contract_reason, if(_contract_reason is null, 't', 'q') as route from ({q})"
)

reset = harness.reset_delta
phases: dict = {}  # per design: (routed write, Delta commit, quarantine insert) seconds per run
LABELS = ("routed write", "Delta commit", "quarantine insert")


location = harness.location
plain = partial(harness.plain, table=T)
pending = partial(harness.pending, table=T, quarantine=Q)


def commit_files(table_path: str, folder: str, meanwhile=None) -> int:
    """Commits the Parquet files under `<table_path>/<folder>` into the Delta table at
    `table_path` in one transaction (blind append, ManualUpdate); the commit's version.
    `meanwhile`: run between the transaction's start and its commit (the concurrency check)."""
    hadoop = jvm.org.apache.hadoop
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    root = hadoop.fs.Path(table_path)
    fs = root.getFileSystem(conf)
    statuses = fs.listStatus(hadoop.fs.Path(root, folder))
    empty = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(jvm.java.util.HashMap())
    none = jvm.scala.Option.apply(None)
    adds = jvm.java.util.ArrayList()
    for status in statuses:
        name = status.getPath().getName()
        if not name.endswith(".parquet"):
            continue  # `.crc` files of the local file system
        footer = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(
            jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromStatus(status, conf)
        )
        try:
            records = footer.getRecordCount()
        finally:
            footer.close()
        relative = hadoop.fs.Path(f"{folder}/{name}").toUri().toString()
        adds.add(
            jvm.org.apache.spark.sql.delta.actions.AddFile(
                relative,  # path, relative to the table's root, URI-escaped
                empty,  # partitionValues (the table is not partitioned)
                status.getLen(),  # size
                status.getModificationTime(),  # modificationTime
                True,  # dataChange
                f'{{"numRecords":{records}}}',  # stats
                empty,  # tags
                None,  # deletionVector
                none,  # baseRowId
                none,  # defaultRowCommitVersion
                none,  # clusteringProvider
            )
        )
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table_path)
    txn = log.startTransaction()
    if meanwhile is not None:
        meanwhile()
    actions = jvm.org.apache.spark.api.python.PythonUtils.toSeq(adds)
    manual_update = getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$ManualUpdate$")
    operation = getattr(manual_update, "MODULE$")
    return txn.commit(actions, operation)


def routed_commit(query: str, meanwhile=None, sort: bool = True) -> None:
    table_path = location(T)
    folder = f"dbt_route_{uuid.uuid4().hex}"
    began = time.monotonic()
    routed = spark.sql(ROUTED.format(q=WITH_REASON.format(q=query)))
    # unsorted: each task keeps one writer per route open instead of sorting its rows by route
    spark.conf.set("spark.sql.optimizer.plannedWrite.enabled", str(sort).lower())
    spark.conf.set("spark.sql.maxConcurrentOutputFileWriters", "0" if sort else "2")
    try:
        routed.write.partitionBy("route").parquet(f"{table_path}/{folder}")
    finally:  # the other designs run with Spark's defaults
        spark.conf.unset("spark.sql.optimizer.plannedWrite.enabled")
        spark.conf.unset("spark.sql.maxConcurrentOutputFileWriters")
    wrote = time.monotonic()
    commit_files(table_path, f"{folder}/route=t", meanwhile)
    committed = time.monotonic()
    discards = f"{table_path}/{folder}/route=q"
    if jvm.java.io.File(discards.removeprefix("file:")).isDirectory():  # none on a clean day
        spark.sql(f"insert into {Q} select {', '.join(DISCARDED)} from parquet.`{discards}`")
    took = (wrote - began, committed - wrote, time.monotonic() - committed)
    phases.setdefault("routed+commit" if sort else "routed+commit-unsorted", []).append(took)


DESIGNS = {
    "plain": plain,
    "pending": pending,
    "routed+commit": routed_commit,
    "routed+commit-unsorted": lambda query: routed_commit(query, sort=False),
}


def inspect(name: str) -> None:
    """What the first routed design left: the table's columns, history, log, reads, VACUUM."""
    if name != "routed+commit":
        return
    table = spark.table(T)
    history = spark.sql(f"describe history {T}").orderBy("version").collect()
    print(f"  columns {table.columns} (expected {KEPT}); schema {table.schema.simpleString()}")
    print(f"  history: {[(h.version, h.operation, h.isBlindAppend) for h in history]}")
    print(f"  commit metrics: {history[-1].operationMetrics}")
    print(
        f"  count(*) {spark.sql(f'select count(*) from {T}').first()[0]}, full read "
        f"{len(table.collect())} rows, ids both in {T} and {Q}: "
        f"{spark.sql(f'select count(*) from {T} join {Q} using (id)').first()[0]}"
    )
    files = spark.sql(f"select input_file_name() f from {T}").distinct().collect()
    print(f"  files read: {sorted(f.f.removeprefix(location(T)) for f in files)}")
    log = location(T).removeprefix("file:") + "/_delta_log/00000000000000000001.json"
    print(f"  commit 1 in the log: {open(log).read()}")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    dry = spark.sql(f"vacuum {T} retain 0 hours dry run").collect()
    spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    print(f"  vacuum dry run would delete: {[r[0].removeprefix(location(T)) for r in dry]}")
    detail = spark.sql(f"describe detail {T}").first()
    print(
        f"  detail: numFiles {detail.numFiles}, properties {detail.properties}, "
        f"features {detail.tableFeatures}"
    )


if __name__ == "__main__":
    harness.check(DESIGNS, reset, T, Q, after=inspect)
    # a direct commit bypasses what Delta checks in its write path: a CHECK no row satisfies
    reset()
    spark.sql(f"alter table {T} add constraint no_row check (id < 0)")
    try:
        routed_commit(harness.query(100_000, probed=False))
        print(f"CHECK (id < 0) added, then the commit: {spark.table(T).count()} rows in {T}")
    except Exception as error:  # noqa: BLE001
        print(f"CHECK (id < 0) added, then the commit failed: {str(error)[:300]}")
    # and an append committed by another writer between startTransaction() and commit()
    reset()
    routed_commit(
        harness.query(100_000, probed=False),
        meanwhile=lambda: spark.sql(f"insert into {T} values (-1, 'x', 0, 'x', 0)"),
    )
    history = spark.sql(f"describe history {T}").orderBy("version").collect()
    print(
        f"an INSERT inside the transaction: {spark.table(T).count()} rows; history "
        f"{[(h.version, h.operation, h.readVersion) for h in history]}"
    )
    # and tables with column mapping: switched on after the table was made (its columns keep
    # their names as physical names), and made with it (physical names `col-<uuid>`)
    for made_with in (False, True):
        reset()
        mapping = (
            "tblproperties ('delta.columnMapping.mode' = 'name', "
            "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')"
        )
        if made_with:
            spark.sql(f"drop table {T}")
            spark.sql(f"create table {T} ({KEPT_SCHEMA}) using delta {mapping}")
        else:
            spark.sql(f"alter table {T} set {mapping}")
        when = "made with" if made_with else "switched on"
        try:
            routed_commit(harness.query(100_000, probed=False))
            print(f"column mapping 'name' {when}, then the commit: {harness.contents(T, Q)[0]}")
        except Exception as error:  # noqa: BLE001
            print(f"column mapping 'name' {when}, then the commit failed: {str(error)[:300]}")
    phases.clear()
    harness.time(DESIGNS, reset)
    for name, runs in phases.items():
        for label, took in zip(LABELS, zip(*runs, strict=True), strict=True):
            print(
                f"  {name} {label:<18} {[round(t, 2) for t in took]} "
                f"median {statistics.median(took):.2f} s"
            )
