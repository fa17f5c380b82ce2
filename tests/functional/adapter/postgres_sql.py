"""dbt's simple_snapshot suites set up their data with Postgres SQL held in module constants
that the test bodies use directly (not fixtures a subclass can override). This turns those
statements into the Spark SQL that does the same thing, so the official test bodies run
unchanged; the snapshots under test are dbt's and this adapter's, untouched.

Only the Postgres spellings those suites use are rewritten:
- several `;`-separated statements in one string: Spark runs one statement per call;
- `{database}.{schema}`: Spark has no database level above the schema here (database is None);
- `create table ... (...)` / `create table ... as select`: Spark's default source is parquet,
  which has no UPDATE/DELETE; the fixtures update and delete rows, so the table is Delta (the
  adapter's own default);
- `add column ... default null`: Delta takes no DEFAULT in ADD COLUMN, and a column added
  without one reads NULL, which is what `default null` says;
- `TEXT` / `::text` and `TIMESTAMP WITHOUT TIME ZONE`: Spark spells them STRING and TIMESTAMP;
- `'2015-12-24 12:19:28'` inserted into a TIMESTAMP column: Spark's ANSI store assignment does
  not cast a string to a timestamp, so the literal is typed (`timestamp'...'`).
"""

from __future__ import annotations

import re
from typing import Any, Callable, List

_CREATE_TABLE = re.compile(r"^\s*(?:--[^\n]*\n\s*)*create\s+table\b", re.IGNORECASE)
_CTAS = re.compile(r"^(\s*create\s+table\s+\S+)(\s+as\s+select\b)", re.IGNORECASE)
_DEFAULT_NULL = re.compile(r"(\badd\s+column\b.*?)\s+default\s+null\b", re.IGNORECASE | re.DOTALL)
_TEXT_TYPE = re.compile(r"\bTEXT\b", re.IGNORECASE)
_NO_TIME_ZONE = re.compile(r"\s+WITHOUT\s+TIME\s+ZONE\b", re.IGNORECASE)
_TIMESTAMP_LITERAL = re.compile(r"'(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})'")


def spark_statements(sql: str) -> List[str]:
    """The Spark statements that do what the Postgres `sql` does, in order."""
    sql = sql.replace("{database}.{schema}", "{schema}")
    sql = _NO_TIME_ZONE.sub("", sql)
    sql = _TEXT_TYPE.sub("STRING", sql)
    sql = _TIMESTAMP_LITERAL.sub(r"timestamp'\1'", sql)
    sql = _DEFAULT_NULL.sub(r"\1", sql)
    statements = []
    for statement in sql.split(";"):
        if not _without_comments(statement).strip():
            continue
        if _CREATE_TABLE.match(statement) and " using " not in statement.lower():
            ctas = _CTAS.match(statement)
            if ctas:
                statement = f"{ctas.group(1)} using delta{statement[ctas.end(1) :]}"
            else:
                statement = statement.rstrip() + " using delta"
        statements.append(statement)
    return statements


def _without_comments(statement: str) -> str:
    return "\n".join(line.split("--")[0] for line in statement.splitlines())


def run_postgres_sql(run_sql: Callable[..., Any]) -> Callable[..., Any]:
    """`project.run_sql`, taking the suites' Postgres SQL: each Spark statement runs in turn,
    the last one's result (what `fetch` asked for) is returned."""

    def run(sql: str, fetch: Any = None) -> Any:
        result = None
        for statement in spark_statements(sql):
            result = run_sql(statement, fetch)
        return result

    return run
