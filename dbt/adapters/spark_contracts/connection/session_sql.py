"""The SQL of a thrift session's settings: SET and RESET of one conf, and which settings travel
in the OpenSession request instead of as statements."""

from typing import Any, Dict, Mapping, Optional, Tuple

from dbt.adapters.spark_contracts.connection.credentials import THRIFT_OPEN_SESSION_KEYS

# An OpenSession configuration key the Spark Thrift Server applies to the session as a setting
# (Hive's `set:hiveconf:`); a plain key it ignores.
HIVECONF_PREFIX = "set:hiveconf:"


def quoted(text: str) -> str:
    return "`" + text.replace("`", "``") + "`"


def set_sql(key: str, value: Optional[str]) -> str:
    """SET (None: RESET) of one SQL conf. Key and value are quoted: Spark's SET parses neither
    `snapshot-property.dbt-spark-contracts` nor `a:b` bare."""
    if value is None:
        return f"reset {quoted(key)}"
    return f"set {quoted(key)}={quoted(value)}"


# HiveServer2's OpenSession key for the session's database (the Spark Thrift Server runs
# `USE <it>` in the new session before it answers)
USE_DATABASE = "use:database"


def open_session_settings(parameters: Mapping[str, Any]) -> Tuple[Dict[str, str], Dict[str, str]]:
    """A thrift connection's `server_side_parameters` as (its OpenSession configuration, the
    settings SET once the session is open). The adapter's own runtime settings
    (`THRIFT_OPEN_SESSION_KEYS`) go in OpenSession as `set:hiveconf:<key>`, which the Spark
    Thrift Server applies to the new session before it answers: no statement. Every other key
    is SET after, as before (a static setting is logged and skipped there: in OpenSession it
    would fail the connection), and stays in OpenSession as the plain key dbt-spark sends
    (which the server ignores). The session opens in `default` (`use:database`, which the
    server applies as it opens the session: what PyHive's `USE default` did with a round trip
    of its own, connection/pyhive_open.py), unless the profile names another."""
    opening: Dict[str, str] = {USE_DATABASE: "default"}
    after: Dict[str, str] = {}
    for key, value in parameters.items():
        if key == USE_DATABASE:
            opening[key] = str(value)
        elif key in THRIFT_OPEN_SESSION_KEYS:
            opening[HIVECONF_PREFIX + key] = str(value)
        else:
            opening[key] = after[key] = str(value)
    return opening, after
