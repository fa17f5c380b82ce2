"""Python models (pure): which connection methods can run them, and the temporary view that
hands what a model returns to the SQL write path."""

from __future__ import annotations

import re
from typing import Optional

from dbt.adapters.spark_contracts.core.settings.config import ConfigError

# The methods whose SparkSession lives in the dbt process (embedded, or a Spark Connect
# client): the model's code runs there and its DataFrame's plan stays with that session.
PYTHON_MODEL_METHODS = ("session", "connect")
PYTHON_VIEW_SUFFIX = "__dbt_py"


def check_python_model(unique_id: str, language: Optional[str], method: Optional[str]) -> None:
    """Raise ConfigError when a Python model cannot run on this connection method.

    Python models run in the dbt process with the thread's SparkSession; thrift, http and
    odbc only carry SQL to a server, so a Python model there is refused, never skipped.
    """
    if method is None or (language or "sql").lower() != "python":
        return  # method None: not known where this is called
    name = str(method or "").lower()
    if name in PYTHON_MODEL_METHODS:
        return
    raise ConfigError(
        f"{unique_id}: Python models cannot run with `method: {name}`; "
        f"use `method: {' or '.join(PYTHON_MODEL_METHODS)}` (the model runs in the dbt "
        "process with the thread's SparkSession), or disable the model for this target "
        "(`enabled: false`)"
    )


def python_view_name(identifier: str) -> str:
    """The temporary view (of the thread's own session) that holds a Python model's DataFrame:
    the identifier with anything but letters, digits and `_` replaced, then `__dbt_py`."""
    safe = re.sub(r"[^0-9A-Za-z_]", "_", identifier) or "model"
    if safe[0].isdigit():
        safe = f"_{safe}"
    return f"{safe}{PYTHON_VIEW_SUFFIX}"
