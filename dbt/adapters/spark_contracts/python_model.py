"""Python models in the dbt process: run the compiled model with the thread's SparkSession and
register the DataFrame it returns as a temporary view of that session. The materialization then
reads the view as a SQL model's query, so contracts, evolution and the one load apply alike.

Nothing runs here but the model's own code: the DataFrame stays a plan, evaluated by the load."""

from __future__ import annotations

import traceback
from typing import Any, Dict

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_contracts.connection.cursor import SparkSessionConnectionWrapper
from dbt.adapters.spark_contracts.connection.errors import spark_error_message
from dbt.adapters.spark_contracts.core.materialization.python_model import (
    check_python_model,
    python_view_name,
)
from dbt.adapters.spark_contracts.core.settings.config import ConfigError


def python_model_view(handle: Any, method: str, compiled_code: str, model: Dict[str, Any]) -> str:
    """Run a Python model on the SparkSession of the thread's connection `handle`; the name of
    the temporary view holding its DataFrame. Methods without one refuse, naming the model."""
    unique_id = str(model.get("unique_id", "python model"))
    try:
        check_python_model(unique_id, model.get("language"), method)
    except ConfigError as exc:
        raise DbtRuntimeError(str(exc)) from exc
    if not isinstance(handle, SparkSessionConnectionWrapper):
        raise DbtRuntimeError(f"{unique_id}: method {method} has no SparkSession to run it")
    return run_python_model(handle.handle.cursor().session, compiled_code, model)


def run_python_model(session: Any, compiled_code: str, model: Dict[str, Any]) -> str:
    """Run `model(dbt, session)` of the compiled code; the name of the view holding its
    DataFrame (a temporary view of `session`)."""
    unique_id = str(model.get("unique_id", "python model"))
    filename = str(model.get("original_file_path") or unique_id)
    # `spark` too: dbt-spark's notebooks, and so existing models, have it as a global.
    namespace: Dict[str, Any] = {"__name__": "dbt_python_model", "spark": session}
    try:
        exec(compile(compiled_code, filename, "exec"), namespace)
        dbt = namespace["dbtObj"](session.table)
        returned = namespace["model"](dbt, session)
    except Exception as exc:
        raise DbtRuntimeError(_failure(unique_id, filename, exc)) from exc
    frame = _as_spark_frame(returned, session, unique_id)
    view = python_view_name(str(model.get("alias") or model.get("name") or "model"))
    frame.createOrReplaceTempView(view)
    return view


def _failure(unique_id: str, filename: str, exc: BaseException) -> str:
    """The error and the model's own lines of the traceback (not the adapter's frames)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    where = "".join(traceback.format_list(frames))
    message = spark_error_message(exc) or repr(exc)
    return f"Python model {unique_id} failed: {type(exc).__name__}: {message}" + (
        f"\n{where.rstrip()}" if where else ""
    )


def _as_spark_frame(returned: Any, session: Any, unique_id: str) -> Any:
    """A Spark DataFrame of `session` for what the model returned: a Spark DataFrame, a pandas
    DataFrame (createDataFrame) or a pandas-on-Spark one (to_spark)."""
    from pyspark.sql import DataFrame

    if not isinstance(returned, DataFrame):
        module = type(returned).__module__
        if module.startswith("pyspark.pandas"):
            returned = returned.to_spark()
        elif module.startswith("pandas"):
            returned = session.createDataFrame(returned)
        else:
            raise DbtRuntimeError(
                f"Python model {unique_id}: model() returned {type(returned).__qualname__} "
                f"({module}); return a pyspark DataFrame, a pandas DataFrame or a "
                "pandas-on-Spark DataFrame"
            )
    return _in_session(returned, session, unique_id)


def _in_session(frame: Any, session: Any, unique_id: str) -> Any:
    """`frame`, bound to `session`: its temporary view must be one the model's later SQL sees.

    A frame built on another session of the same embedded Spark (pandas-on-Spark builds on the
    process's default session) is re-bound to this one without evaluating it."""
    other = frame.sparkSession
    if other is session:
        return frame
    jsession = getattr(session, "_jsparkSession", None)
    jother = getattr(other, "_jsparkSession", None)
    if jsession is None or jother is None:  # Spark Connect: a plan belongs to its session
        if getattr(other, "session_id", None) == getattr(session, "session_id", object()):
            return frame
        raise DbtRuntimeError(
            f"Python model {unique_id}: model() returned a DataFrame of another Spark Connect "
            "session; build it from the `session` argument (or dbt.ref / dbt.source)"
        )
    if jother.equals(jsession):
        return frame
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

    datasets = session._jvm.org.apache.spark.sql.classic.Dataset
    return ClassicDataFrame(datasets.ofRows(jsession, frame._jdf.logicalPlan()), session)
