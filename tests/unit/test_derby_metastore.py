"""Which sessions get their Derby metastore's view text widened, and the SQL that does it (run
against real Spark and Derby in tests/functional/test_long_view_text.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbt.adapters.spark_contracts.connection import derby_metastore
from dbt.adapters.spark_contracts.connection.session import EmbeddedSparkConfig


def _conf(tmp_path: Path, **overrides: str) -> dict:
    conf = EmbeddedSparkConfig(warehouse_dir=tmp_path).spark_conf()
    conf.update(overrides)
    return conf


def test_the_embedded_default_is_widened(tmp_path: Path) -> None:
    config = EmbeddedSparkConfig(warehouse_dir=tmp_path)
    assert config.spark_conf()[derby_metastore.URL_KEY] == config.metastore_url
    assert derby_metastore.applies(_conf(tmp_path), config.metastore_url)
    builtin = _conf(tmp_path, **{"spark.sql.hive.metastore.jars": "builtin"})
    assert derby_metastore.applies(builtin, config.metastore_url)


@pytest.mark.parametrize(
    "overrides",
    [
        {derby_metastore.URL_KEY: "jdbc:derby://localhost:1527/metastore;create=true"},
        {derby_metastore.URL_KEY: "jdbc:postgresql://db/metastore"},
        {"spark.hadoop.hive.metastore.uris": "thrift://metastore:9083"},
        {"spark.sql.hive.metastore.jars": "maven"},
        {"spark.sql.catalogImplementation": "in-memory"},
    ],
)
def test_other_metastores_are_left_alone(tmp_path: Path, overrides: dict) -> None:
    url = EmbeddedSparkConfig(warehouse_dir=tmp_path).metastore_url
    assert not derby_metastore.applies(_conf(tmp_path, **overrides), url)


def test_a_column_is_copied_into_a_clob_then_renamed() -> None:
    assert derby_metastore.widen_statements("APP", "VIEW_EXPANDED_TEXT") == [
        'ALTER TABLE "APP"."TBLS" ADD COLUMN "VIEW_EXPANDED_TEXT_CLOB" CLOB',
        'UPDATE "APP"."TBLS" SET "VIEW_EXPANDED_TEXT_CLOB" = CAST("VIEW_EXPANDED_TEXT" AS CLOB)',
        'ALTER TABLE "APP"."TBLS" DROP COLUMN "VIEW_EXPANDED_TEXT"',
        'RENAME COLUMN "APP"."TBLS"."VIEW_EXPANDED_TEXT_CLOB" TO "VIEW_EXPANDED_TEXT"',
    ]


def test_the_process_holding_the_embedded_metastore_is_read_from_the_kernels_lock_table(tmp_path):
    """A process that holds an exclusive lock on `dbex.lck` (as a JVM with the Derby database
    booted does) is named; none once it let go. Read from /proc/locks, nothing locked."""
    import subprocess
    import sys
    import time

    from dbt.adapters.spark_contracts.connection.derby_metastore import DERBY_LOCK_FILE, lock_holder

    (tmp_path / DERBY_LOCK_FILE).write_text("")
    assert lock_holder(tmp_path) is None
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(tmp_path / DERBY_LOCK_FILE)!r}, os.O_RDWR)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert lock_holder(tmp_path) == holder.pid
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 10
    while lock_holder(tmp_path) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert lock_holder(tmp_path) is None
    assert lock_holder(tmp_path / "absent") is None  # no database there yet


def test_a_lock_table_line_names_its_holder(tmp_path):
    from dbt.adapters.spark_contracts.connection.derby_metastore import DERBY_LOCK_FILE, lock_holder

    (tmp_path / DERBY_LOCK_FILE).write_text("")
    inode = (tmp_path / DERBY_LOCK_FILE).stat().st_ino
    locks = tmp_path / "locks"
    locks.write_text(
        f"1: POSIX  ADVISORY  WRITE 4242 fd:01:{inode + 1} 0 EOF\n"
        f"2: FLOCK  ADVISORY  WRITE 5151 fd:01:{inode} 0 EOF\n"
        f"3: POSIX  ADVISORY  WRITE 6161 fd:01:{inode} 0 EOF\n"
        f"3: -> POSIX  ADVISORY  WRITE 7171 fd:01:{inode} 0 EOF\n"
    )
    assert lock_holder(tmp_path, locks) == 6161
