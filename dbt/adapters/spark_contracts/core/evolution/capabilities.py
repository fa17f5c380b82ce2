"""What each table format can change in place: one table of data that the planner reads.

Facts: Spark 4.0 session catalog (parquet), Delta Lake 4.0, Iceberg 1.10 (see SPEC §4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from dbt.adapters.spark_contracts.core.evolution.operations import EnableTableFeature
from dbt.adapters.spark_contracts.core.schema.types import (
    Decimal,
    SparkType,
    is_widening,
    type_kind,
)

DEFAULT_FILE_FORMAT = "delta"  # this adapter's default table format (dbt-spark's: parquet)


class DefaultStyle(Enum):
    """How a new column gets a default for existing rows."""

    SET_DEFAULT_THEN_UPDATE = "ADD COLUMNS, SET DEFAULT, UPDATE existing rows, CHECK for NOT NULL"
    ADD_THEN_UPDATE = "ADD COLUMNS, then UPDATE existing rows"
    INLINE_DEFAULT = "ADD COLUMNS ... DEFAULT (existing rows read the default)"


class DecimalWidening(Enum):
    NONE = "none"
    PRECISION_ONLY = "precision up, same scale"
    PRECISION_AND_SCALE = "decimal(p,s) -> decimal(p+k1,s+k2), k1 >= k2 >= 0"


@dataclass(frozen=True)
class TableFeature:
    """A table property a change depends on; `accepted` values already satisfy it."""

    property: str
    value: str
    irreversible: bool
    note: str
    accepted: tuple[str, ...] = ()

    def enabled_in(self, properties: Mapping[str, str]) -> bool:
        lowered = {k.lower(): str(v).lower() for k, v in properties.items()}
        actual = lowered.get(self.property.lower())
        return actual is not None and actual in {self.value.lower(), *self.accepted}

    def enabling(self) -> EnableTableFeature:
        """The operation that sets the feature's property."""
        return EnableTableFeature(self.property, self.value, self.irreversible, self.note)


TYPE_WIDENING = TableFeature(
    "delta.enableTypeWidening",
    "true",
    irreversible=False,
    note="adds the Delta typeWidening table feature (removable with DROP FEATURE typeWidening)",
)
COLUMN_MAPPING = TableFeature(
    "delta.columnMapping.mode",
    "name",
    irreversible=True,
    note="enables Delta column mapping (mode name): an irreversible protocol upgrade "
    "(readers need Delta reader version 2+)",
    accepted=("id",),
)
COLUMN_DEFAULTS = TableFeature(
    "delta.feature.allowColumnDefaults",
    "supported",
    irreversible=True,
    note="adds the Delta allowColumnDefaults table feature (a protocol upgrade)",
    accepted=("enabled",),
)

# A VARIANT column (probed on Spark 4.1.1, Delta 4.3.1, Iceberg 1.12.0): Delta's ADD COLUMNS
# enables variantType by itself, the plan sets it first so the protocol upgrade is on record;
# Iceberg refuses VARIANT before format v3 (ALTER TABLE SET TBLPROPERTIES upgrades a v2 table);
# Spark's parquet tables store it without a feature.
VARIANT_TYPE_FEATURE = TableFeature(
    "delta.feature.variantType",
    "supported",
    irreversible=True,
    note="adds the Delta variantType table feature (a protocol upgrade: readers need Delta 4.0+)",
    accepted=("enabled",),
)
ICEBERG_V3 = TableFeature(
    "format-version",
    "3",
    irreversible=True,
    note="upgrades the Iceberg table to format v3, which stores VARIANT (irreversible: "
    "readers need Iceberg 1.10+)",
)

INTEGRAL_UP = {
    ("tinyint", "smallint"),
    ("tinyint", "int"),
    ("tinyint", "bigint"),
    ("smallint", "int"),
    ("smallint", "bigint"),
    ("int", "bigint"),
}


@dataclass(frozen=True)
class FormatCapabilities:
    """One row of the capability table; `widenings` are (from kind, to kind) done in metadata.
    A row names what it has beyond the defaults: a table format with a log (Delta, Iceberg) makes
    every change below in place; it needs no table feature for it unless its row names one."""

    name: str
    add_column_default: DefaultStyle
    widenings: frozenset[tuple[str, str]]
    decimal_widening: DecimalWidening
    managed_properties: tuple[str, ...]
    add_column: bool = True
    add_nested_field: bool = True
    enforces_not_null: bool = True
    not_null_check_constraint: bool = False
    nested_widening: bool = True
    widening_feature: TableFeature | None = None
    drop_not_null: bool = True
    drop_column: bool = True
    drop_nested_in_collection: bool = True
    drop_column_feature: TableFeature | None = None
    default_feature: TableFeature | None = None
    atomic_rewrite: bool = True
    update: bool = True
    variant_feature: TableFeature | None = None  # what a VARIANT column needs first
    # `insert overwrite table <t> partition (...)` (dbt-spark's form); Iceberg takes neither
    overwrite_names_partitions: bool = True
    # the table keeps a log of its commits (Delta's log, Iceberg's snapshots): its schema and
    # properties come from its catalog entry, a run's load is found in that log, rows can be
    # deleted again (a quarantine's triage); else a v1 table DESCRIBEd as JSON over thrift
    logged: bool = True
    # a run's stage or pending table beside a table of this format (plain parquet: no log, no
    # statistics), and the adapter's own tables beside it (schema history)
    stage_format: str = "parquet"
    history_format: str = "delta"
    drop_purges: bool = False  # DROP ... PURGE deletes the files (a REST catalog's DROP does not)
    # the session's catalog caches a table's metadata: another session's commit (a lease's
    # heartbeat, another run's mark) is seen, and a PURGE reaches its files, after a REFRESH
    refresh_to_see_others: bool = False
    # an append that meets another writer's concurrent metadata change (a property set) is
    # refused, having written nothing (Delta); Iceberg retries such a commit itself
    append_refused_by_metadata_change: bool = False
    in_own_catalog: bool = False  # lives in a named catalog (spark_catalog is Delta's)
    # the session conf an evolving append (or microbatch) sets for its one statement
    evolving_append_conf: str | None = None
    # NOT NULL / CHECK constraints are table properties (`delta.constraints.<name>`)
    constraints_as_properties: bool = False
    # NOT NULL columns are declared by CREATE + INSERT: the CTAS cannot declare them
    not_null_needs_create: bool = False
    # how a microbatch batch replaces its window (core/materialization/microbatch.BatchLoad's names)
    batch_load: str = "PARTITION_OVERWRITE"
    # a write carries a transaction id that a lease's taker can fence off inside the commit
    # (Delta's idempotent writes: core/recovery/txn_fence.py)
    fences_in_commit: bool = False
    # a commit that lands after its run's lease was taken over is found in the table's own
    # metadata and taken back by a later run (core/recovery/late.py): Iceberg's snapshots, and
    # Delta's versions for a statement that takes no transaction id (an ALTER)
    takes_late_commits_back: bool = False
    # a repair's undo is a commit carrying the session's commit tag (Delta's RESTORE; Iceberg's
    # rollback only moves the current snapshot), so a repairer's own late undo can be watched for
    undo_is_tagged_commit: bool = False
    # a rollback keeps the table's schema (Iceberg: a dropped column does not come back with
    # its values), so a run drops its removed columns after its load, its last step
    # (core/evolution/steps.Step.after_load); a failure before it leaves them in place
    drops_columns_after_load: bool = False
    # an ALTER of the model's table makes no snapshot, a rebuild's replace one off the current
    # lineage, and neither takes a transaction id, so a run sends each as a script that runs
    # it only while the table's history is what the run read before its fence, and a lease's
    # taker commits an empty snapshot first (core/recovery/history_guard.py: Iceberg)
    guards_by_history: bool = False
    # a CTAS killed while it writes leaves its uncommitted files (`_temporary/`) in the new
    # table's folder, and Spark refuses a managed table at a non-empty folder until someone
    # deletes it: a managed table of this format is created under a name of its run's own and
    # renamed to its name in the same script (core/materialization/build_plan.created_by_rename)
    ctas_killed_blocks_its_name: bool = False

    @property
    def moves_own_rows_by_merge(self) -> bool:
        """A run moves its own discarded rows into a quarantine of this format as a MERGE on its
        run id: the format fences no append inside the commit but checks a MERGE's commit
        against rows appended since it read (Iceberg), so a move sent before its run lost the
        lease and landing after a settler's inserts nothing more (or fails its commit), where
        an append would add the rows a second time. Delta fences the append itself; Parquet
        checks nothing, so a settler leaves a Parquet run's rows to it until that run let go
        or is provably gone (core/recovery/pending.decide_pending)."""
        return self.logged and not self.fences_in_commit

    @property
    def undo_fenced_by_expiry(self) -> bool:
        """A repair's undo here moves the current snapshot back, with no commit and nothing
        naming who moved it (Iceberg's `rollback_to_snapshot`), so a run that may still send one
        late (stalled past its fence) is fenced off by expiring the snapshot it would move back
        to: the late call then fails (run/rollback_fence.py)."""
        return self.takes_late_commits_back and not self.undo_is_tagged_commit

    @property
    def guards_late_writes(self) -> bool:
        """A run that lost its lease cannot leave a write behind in a table of this format: it
        is fenced off inside the commit, or found and taken back."""
        return self.fences_in_commit or self.takes_late_commits_back

    def can_widen(self, from_type: SparkType, to_type: SparkType, nested: bool) -> bool:
        """True when ALTER COLUMN TYPE does this widening without rewriting data."""
        if nested and not self.nested_widening:
            return False
        if (type_kind(from_type), type_kind(to_type)) not in self.widenings:
            return False
        if not is_widening(from_type, to_type):
            return False
        if isinstance(from_type, Decimal) and isinstance(to_type, Decimal):
            if self.decimal_widening is DecimalWidening.PRECISION_ONLY:
                return from_type.scale == to_type.scale
            return self.decimal_widening is DecimalWidening.PRECISION_AND_SCALE
        return True

    def carried_properties(self, properties: Mapping[str, str]) -> dict[str, str]:
        """Table properties to keep across a rewrite (drops what the format manages itself)."""
        return {k: str(v) for k, v in properties.items() if not self._managed(k.lower())}

    def _managed(self, key: str) -> bool:
        """Entries ending in `.` or `-` are prefixes, the others exact keys."""
        return any(
            key.startswith(p) if p.endswith((".", "-")) else key == p
            for p in self.managed_properties
        )


DELTA = FormatCapabilities(
    name="delta",
    add_column_default=DefaultStyle.SET_DEFAULT_THEN_UPDATE,
    not_null_check_constraint=True,
    widenings=frozenset(
        INTEGRAL_UP
        | {(k, "double") for k in ("tinyint", "smallint", "int")}
        | {(k, "decimal") for k in ("tinyint", "smallint", "int", "bigint")}
        | {("float", "double"), ("decimal", "decimal"), ("date", "timestamp_ntz")}
    ),
    decimal_widening=DecimalWidening.PRECISION_AND_SCALE,
    widening_feature=TYPE_WIDENING,
    drop_column_feature=COLUMN_MAPPING,
    default_feature=COLUMN_DEFAULTS,
    variant_feature=VARIANT_TYPE_FEATURE,
    fences_in_commit=True,
    takes_late_commits_back=True,
    undo_is_tagged_commit=True,
    evolving_append_conf="spark.databricks.delta.schema.autoMerge.enabled",
    append_refused_by_metadata_change=True,
    constraints_as_properties=True,
    batch_load="REPLACE_WHERE",
    managed_properties=(
        "delta.constraints.",
        "delta.feature.",
        "delta.minreaderversion",
        "delta.minwriterversion",
        "delta.columnmapping.maxcolumnid",
        "delta.rowtracking.materialized",
        "delta.lastcommittimestamp",
        "delta.lastupdateversion",
        "option.",
    ),
)

ICEBERG = FormatCapabilities(
    name="iceberg",
    add_column_default=DefaultStyle.ADD_THEN_UPDATE,
    widenings=frozenset({("int", "bigint"), ("float", "double"), ("decimal", "decimal")}),
    decimal_widening=DecimalWidening.PRECISION_ONLY,
    variant_feature=ICEBERG_V3,
    overwrite_names_partitions=False,
    stage_format="iceberg",  # Iceberg's catalog makes Iceberg tables only
    history_format="iceberg",
    drop_purges=True,
    refresh_to_see_others=True,
    in_own_catalog=True,
    not_null_needs_create=True,
    takes_late_commits_back=True,
    drops_columns_after_load=True,
    guards_by_history=True,
    batch_load="MERGE_WINDOW",
    managed_properties=(
        "current-snapshot-",
        "snapshot-count",
        "current-schema",
        "format",
        "provider",
        "location",
        "owner",
        "identifier-fields",
        "sort-order",
        "default-partition-spec",
        "option.",
    ),
)

PARQUET = FormatCapabilities(
    name="parquet",
    add_nested_field=False,
    add_column_default=DefaultStyle.INLINE_DEFAULT,
    enforces_not_null=False,
    widenings=frozenset(),
    decimal_widening=DecimalWidening.NONE,
    nested_widening=False,
    drop_not_null=False,
    drop_column=False,
    drop_nested_in_collection=False,
    atomic_rewrite=False,
    update=False,
    logged=False,
    ctas_killed_blocks_its_name=True,
    managed_properties=("transient_lastddltime", "spark.sql.", "option."),
)

CAPABILITIES: Mapping[str, FormatCapabilities] = {c.name: c for c in (DELTA, ICEBERG, PARQUET)}


def capabilities_for(table_format: str) -> FormatCapabilities:
    """The capability row for `delta`, `iceberg` or `parquet` (case-insensitive)."""
    try:
        return CAPABILITIES[table_format.lower()]
    except KeyError:
        known = ", ".join(CAPABILITIES)
        raise ValueError(
            f"unknown table format {table_format!r}; expected one of {known}"
        ) from None


def row_of(table_format: str) -> FormatCapabilities:
    """The row of a deployed table's format: any other file-source table (csv, orc, ...) is
    read as parquet's, a v1 table without a log."""
    return CAPABILITIES.get(table_format.lower(), PARQUET)


def drop_sql(table: str, table_format: str) -> str:
    """Drop one of the adapter's own tables (a stage, a pending table, a lease) beside a model
    table in `table_format`. Beside an Iceberg model they are Iceberg tables: PURGE deletes their
    files too, which a REST catalog's DROP alone leaves in the warehouse."""
    purge = " purge" if row_of(table_format).drop_purges else ""
    return f"drop table if exists {table}{purge}"


def describable(table_format: str) -> bool:
    """A table of this format is DESCRIBEd as JSON (a v1 table); a logged one is read through
    a view over it."""
    return not row_of(table_format).logged


def logged(table_format: str) -> bool:
    """A table of this format keeps a log of its commits (FormatCapabilities.logged)."""
    return row_of(table_format).logged
