"""Views longer than 32,700 characters on the embedded Derby metastore.

The Hive metastore Spark 4.1 embeds (hive-metastore 2.3.10) maps TBLS.VIEW_ORIGINAL_TEXT and
TBLS.VIEW_EXPANDED_TEXT to JDBC LONGVARCHAR in its package.jdo, which DataNucleus creates on
Derby as LONG VARCHAR: 32,700 characters at most. Spark writes a view's SQL into both, so a
longer view fails in the metastore ("A truncation error was encountered trying to shrink LONG
VARCHAR ... to length 32700", after Hive's ten retries, 2 s apart).

`widen_view_text` makes both columns CLOBs (2 GB), in the embedded session's own JVM (embedded
Derby admits one JVM per database, and this one holds it), through Derby's JDBC driver on the
metastore's database. Derby cannot change a column's type in place (SET DATA TYPE only lengthens
a VARCHAR), so each column is copied into a new CLOB column, dropped, and the copy renamed to
its name; both columns in one transaction, which Derby rolls back whole if anything fails or
the process dies (Derby's DDL is transactional): a metastore is either as it was or widened.

- A metastore from an earlier version of the adapter (LONG VARCHARs) is widened in place when
  the session starts, before Hive opens it; its tables, views and their text are kept.
- A new metastore is created by Hive first (the session opens it at once, instead of at the
  first statement), then widened.
- A widened one costs a look at two columns' types per start.

Hive keeps working on the CLOBs: DataNucleus binds and reads these columns as strings
(setString, getString, setNull(LONGVARCHAR)), which Derby converts to and from a CLOB; Derby
forbids the same on both types (comparisons, ORDER BY, GROUP BY, DISTINCT, indexes), so no query
that ran on the LONG VARCHARs fails on the CLOBs; and the metastore's start-up check (DataNucleus
with autoCreateAll) only adds missing tables and columns, it does not compare column types.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

VIEW_TEXT_COLUMNS = ("VIEW_EXPANDED_TEXT", "VIEW_ORIGINAL_TEXT")
VIEW_TEXT_TABLE = "TBLS"
LONG_VARCHAR_LIMIT = 32700
URL_KEY = "spark.hadoop.javax.jdo.option.ConnectionURL"
COPY_SUFFIX = "_CLOB"


def applies(conf: Mapping[str, str], own_url: str) -> bool:
    """Whether the session's metastore is the embedded Derby database the adapter configures
    (`own_url`): not a remote metastore, another database, or metastore jars of another Hive
    (an isolated class loader with a Derby engine of its own, which could not open a database
    this JVM's engine has open)."""
    return (
        conf.get("spark.sql.catalogImplementation") == "hive"
        and conf.get(URL_KEY) == own_url
        and not conf.get("spark.hadoop.hive.metastore.uris")
        and conf.get("spark.sql.hive.metastore.jars", "builtin") == "builtin"
    )


def widen_statements(schema: str, column: str) -> List[str]:
    """Derby's SQL turning one LONG VARCHAR column of TBLS into a CLOB with the same name and text."""
    table = f'"{schema}"."{VIEW_TEXT_TABLE}"'
    copy = f"{column}{COPY_SUFFIX}"
    return [
        f'ALTER TABLE {table} ADD COLUMN "{copy}" CLOB',
        f'UPDATE {table} SET "{copy}" = CAST("{column}" AS CLOB)',
        f'ALTER TABLE {table} DROP COLUMN "{column}"',
        f'RENAME COLUMN {table}."{copy}" TO "{column}"',
    ]


def widen_view_text(
    jvm: Any, url: str, database_dir: Path, open_metastore: Callable[[], None]
) -> List[str]:
    """Make TBLS's view text columns CLOBs in the Derby database at `url` (in `database_dir`);
    `open_metastore` has Hive open (and on a new database, create) its tables. Returns the
    columns widened now, [] when they already were CLOBs."""
    if not (database_dir / "service.properties").is_file():
        open_metastore()  # a new database: Hive creates its tables first
        return _widen(jvm, url) or []
    widened = _widen(jvm, url)
    if widened is None:  # a database without Hive's tables (a first start cut short)
        open_metastore()
        widened = _widen(jvm, url)
    return widened or []


def _widen(jvm: Any, url: str) -> Optional[List[str]]:
    """None when the database has no TBLS yet."""
    connection = jvm.java.sql.DriverManager.getConnection(url)
    try:
        types = _column_types(connection)
        if not types:
            return None
        narrow = [key for key, type_name in sorted(types.items()) if type_name == "LONG VARCHAR"]
        if not narrow:
            return []
        connection.setAutoCommit(False)
        statement = connection.createStatement()
        try:
            for schema, column in narrow:
                for sql in widen_statements(schema, column):
                    statement.execute(sql)
            connection.commit()
        except Exception:
            connection.rollback()
            raise
        finally:
            statement.close()
        return [f"{schema}.{VIEW_TEXT_TABLE}.{column}" for schema, column in narrow]
    finally:
        connection.close()


def _column_types(connection: Any) -> Dict[Tuple[str, str], str]:
    """{(schema, column): Derby type name} of TBLS's view text columns."""
    rows = connection.getMetaData().getColumns(None, None, VIEW_TEXT_TABLE, "VIEW_%")
    types: Dict[Tuple[str, str], str] = {}
    try:
        while rows.next():
            column = rows.getString("COLUMN_NAME")
            if column in VIEW_TEXT_COLUMNS:
                types[(rows.getString("TABLE_SCHEM"), column)] = rows.getString("TYPE_NAME")
    finally:
        rows.close()
    return types


def column_types(jvm: Any, url: str) -> Dict[str, str]:
    """{column: Derby type name} of TBLS's view text columns (for tests and diagnostics)."""
    connection = jvm.java.sql.DriverManager.getConnection(url)
    try:
        return {column: type_name for (_, column), type_name in _column_types(connection).items()}
    finally:
        connection.close()


# Derby holds an exclusive file lock on this file of a database while a JVM has it booted
DERBY_LOCK_FILE = "dbex.lck"


def lock_holder(metastore_dir: Path, locks: Path = Path("/proc/locks")) -> Optional[int]:
    """The pid of the process whose JVM has the embedded Derby database at `metastore_dir`
    booted, read from the kernel's table of file locks (Linux; None where there is none, or no
    process holds it). Nothing is locked to find out, so a JVM booting it meanwhile is never
    turned away."""
    try:
        inode = (metastore_dir / DERBY_LOCK_FILE).stat().st_ino
        table = locks.read_text()
    except OSError:
        return None
    for line in table.splitlines():
        fields = line.split()
        # "1: POSIX  ADVISORY  WRITE 12345 fd:01:678 0 EOF" (a blocked waiter's line has "->")
        if len(fields) >= 6 and fields[1] == "POSIX" and "->" not in fields:
            device_inode = fields[5].rsplit(":", 1)
            if len(device_inode) == 2 and device_inode[1] == str(inode) and fields[4].isdigit():
                return int(fields[4])
    return None
