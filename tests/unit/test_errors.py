"""A failed statement as dbt's typed error, by the exception's class (errors.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from dbt_common.exceptions import CompilationError, DbtDatabaseError, DbtRuntimeError
from py4j.protocol import Py4JJavaError
from pyhive.exc import OperationalError, ProgrammingError
from pyspark.errors import PySparkValueError
from pyspark.errors.exceptions.captured import AnalysisException
from pyspark.errors.exceptions.connect import AnalysisException as ConnectAnalysisException

from dbt.adapters.spark_contracts.connection.errors import (
    CancelMark,
    ConnectionLostError,
    QueryTimeoutError,
    StatementCancelled,
    is_database_error,
    is_spark_error,
    spark_error_message,
    statement_answered,
    to_dbt_error,
    without_java_frames,
)


class _Java:
    """A JVM exception as Py4J hands it over (no JVM needed here)."""

    def __init__(self, message: Any, text: str = "java.lang.IllegalStateException") -> None:
        self._message = message
        self._text = text

    def getMessage(self) -> Any:  # noqa: N802 (Java's name)
        return self._message

    def toString(self) -> str:  # noqa: N802 (Java's: the class, then the message)
        return f"{self._text}: {self._message}" if self._message else self._text

    def getCause(self) -> Any:  # noqa: N802
        return None


def _py4j_error(java: _Java) -> Py4JJavaError:
    error = Py4JJavaError.__new__(Py4JJavaError)
    error.args = ("An error occurred while calling o60.sql.\n", java)
    error.java_exception = java
    return error


def test_py4j_java_error_is_a_database_error_without_java_stack() -> None:
    java = _Java("[DELTA_UNSUPPORTED_NON_EMPTY_CLONE] The clone destination table is non-empty.")
    error = to_dbt_error(_py4j_error(java))
    assert type(error) is DbtDatabaseError
    assert error.msg == f"java.lang.IllegalStateException: {java.getMessage()}"
    assert "\tat " not in error.msg


def test_py4j_java_error_without_message_names_the_java_class() -> None:
    error = to_dbt_error(_py4j_error(_Java(None, "java.lang.NullPointerException")))
    assert type(error) is DbtDatabaseError
    assert error.msg == "java.lang.NullPointerException"


def test_py4j_error_of_pysparks_error_formatting_gives_the_delta_message_it_hid() -> None:
    """PySpark formats a Delta error through Spark's error classes; that call fails with
    `Cannot find main error class` while the Delta exception is being handled (measured on
    pyspark 4.1.1 + Delta 4.3.1, a MERGE on an unknown column)."""
    delta = _py4j_error(_Java("[DELTA_MERGE_UNRESOLVED_EXPRESSION] Cannot resolve t.nope"))
    lost = _py4j_error(
        _Java("[INTERNAL_ERROR] Cannot find main error class 'DELTA_MERGE_UNRESOLVED_EXPRESSION'")
    )
    lost.__context__ = delta
    error = to_dbt_error(lost)
    assert type(error) is DbtDatabaseError
    assert error.msg.endswith(": [DELTA_MERGE_UNRESOLVED_EXPRESSION] Cannot resolve t.nope")


@pytest.mark.parametrize("cls", [AnalysisException, ConnectAnalysisException])
def test_spark_errors_are_database_errors(cls: type) -> None:
    exc = cls.__new__(cls)
    assert is_database_error(exc)


def test_thrift_server_errors_are_database_errors_with_the_servers_message() -> None:
    response = SimpleNamespace(status=SimpleNamespace(errorMessage="[PARSE_SYNTAX_ERROR] at 'x'"))
    for cls in (OperationalError, ProgrammingError):
        error = to_dbt_error(cls(response))
        assert type(error) is DbtDatabaseError
        assert error.msg == "[PARSE_SYNTAX_ERROR] at 'x'"


def test_dbt_errors_keep_their_type() -> None:
    for exc in (DbtDatabaseError("x"), CompilationError("y"), DbtRuntimeError("z")):
        assert to_dbt_error(exc) is exc


def test_other_errors_are_runtime_errors() -> None:
    for exc in (
        ValueError("bad"),
        PySparkValueError(errorClass="CANNOT_BE_NONE", messageParameters={"arg_name": "a"}),
    ):
        error = to_dbt_error(exc)
        assert type(error) is DbtRuntimeError


def test_message_of_a_plain_exception() -> None:
    assert spark_error_message(ValueError("bad value")) == "bad value"


THRIFT_MESSAGE = """org.apache.hive.service.cli.HiveSQLException: Error running query: [DELTA_X] Bad.
\tat org.apache.spark.sql.hive.thriftserver.HiveThriftServerErrors$.runningQueryError(HiveThriftServerErrors.scala:43)
\tat java.base/java.lang.Thread.run(Thread.java:840)
Caused by: org.apache.spark.sql.delta.DeltaIllegalStateException: [DELTA_X] Bad.
\tat org.apache.spark.sql.delta.DeltaErrorsBase.x$(DeltaErrors.scala:3429)
\t... 21 more
"""


def test_thrift_server_stack_traces_are_dropped() -> None:
    expected = (
        "org.apache.hive.service.cli.HiveSQLException: Error running query: [DELTA_X] Bad.\n"
        "Caused by: org.apache.spark.sql.delta.DeltaIllegalStateException: [DELTA_X] Bad."
    )
    response = SimpleNamespace(status=SimpleNamespace(errorMessage=THRIFT_MESSAGE))
    assert to_dbt_error(OperationalError(response)).msg == expected
    # dbt-spark's thrift wrapper raises DbtDatabaseError with the server's message itself
    error = DbtDatabaseError(THRIFT_MESSAGE)
    assert to_dbt_error(error) is error
    assert error.msg == expected


def test_messages_without_frames_are_unchanged() -> None:
    text = "[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found.\n  at line 2"
    assert without_java_frames(text) == text


def test_pyspark_client_errors_are_spark_errors_but_not_database_errors() -> None:
    exc = PySparkValueError(errorClass="CANNOT_BE_NONE", messageParameters={"arg_name": "a"})
    assert is_spark_error(exc) and not is_database_error(exc)
    assert not is_spark_error(ValueError("bad"))


def test_py4j_error_names_its_causes_without_their_stacks() -> None:
    """A task failure wraps the model's own error (`raise_error('boom')`) as its cause."""
    cause = _Java("[USER_RAISED_EXCEPTION] boom", "org.apache.spark.SparkRuntimeException")
    top = _Java("[TASK_WRITE_FAILED] Task failed", "org.apache.spark.SparkException")
    top.getCause = lambda: cause  # type: ignore[method-assign]
    error = to_dbt_error(_py4j_error(top))
    assert error.msg == (
        "org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed\n"
        "Caused by: org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] boom"
    )


def test_a_refused_result_description_is_told_by_the_response_type():
    from TCLIService.ttypes import TFetchResultsResp, TGetResultSetMetadataResp, TStatus

    from dbt.adapters.spark_contracts.connection.thrift import _metadata_refused

    status = TStatus(statusCode=3, errorMessage="java.lang.IllegalArgumentException: any text")
    assert _metadata_refused(OperationalError(TGetResultSetMetadataResp(status=status)))
    assert not _metadata_refused(OperationalError(TFetchResultsResp(status=status)))
    assert not _metadata_refused(ProgrammingError("No query yet"))
    assert not _metadata_refused(OperationalError())


def test_the_variant_error_names_columns_and_ways_out():
    from dbt.adapters.spark_contracts.connection.errors import VariantResultOverThriftError

    error = VariantResultOverThriftError(("s", "v"), "the server's words")
    assert isinstance(error, DbtDatabaseError) and error.columns == ("s", "v")
    for part in ("`s`, `v`", "to_json(<column>)", "variant_get", "session", "connect"):
        assert part in str(error)


# -- whether Spark's answer to a statement is final (run/runner: a load without one may commit)


@pytest.mark.parametrize(
    "error, final",
    [
        (DbtDatabaseError("[DELTA_CONCURRENT_APPEND] refused"), True),
        (QueryTimeoutError(2, "session"), True),  # this process's Spark: its call returned
        (QueryTimeoutError(2, "thrift"), False),
        (StatementCancelled("Query failed with status: CANCELED_STATE"), False),
        (ConnectionLostError("TSocket read 0 bytes"), False),
        (DbtRuntimeError("Query exceeded timeout of 2 seconds"), False),  # dbt-spark's thrift
        (RuntimeError("a bug of the client"), False),
    ],
)
def test_only_a_refusal_or_the_sessions_own_call_is_a_final_answer(error: Any, final: bool):
    assert statement_answered(error) is final


def manager_with(handle: Any, method: str = "thrift") -> Any:
    """The connection manager's `cancel` and `exception_handler` over one connection (no dbt
    config, no server)."""
    from dbt.adapters.spark_contracts.connection.connections import (
        SparkContractsConnectionManager,
    )

    manager = object.__new__(SparkContractsConnectionManager)
    credentials = SimpleNamespace(method=method, host="localhost", port=10000)
    connection = SimpleNamespace(
        handle=handle, _handle=handle, name="model.p.m", credentials=credentials
    )
    manager.get_if_exists = lambda: connection  # type: ignore[method-assign]
    return manager, connection


class Handle(CancelMark):
    def cancel(self) -> None:
        pass


@pytest.mark.parametrize(
    "method, cancelled", [("thrift", True), ("connect", True), ("session", False)]
)
def test_a_servers_statement_failing_after_a_cancel_is_not_a_final_answer(
    method: str, cancelled: bool, monkeypatch: pytest.MonkeyPatch
):
    """Ctrl-C: dbt cancels the connection, and the server answers the running statement with
    an error at once (thrift: CANCELED_STATE), which says nothing of whether it stopped. That
    statement's error is `StatementCancelled`; the connection's next statement is its own.
    The embedded session's call returns only once the statement is over: its error stays."""
    from dbt.adapters.spark_contracts.connection import connections

    monkeypatch.setattr(connections, "endpoint_of", lambda c: SimpleNamespace(label="here"))
    manager, connection = manager_with(Handle(), method)
    with pytest.raises(StatementCancelled if cancelled else DbtDatabaseError):
        with manager.exception_handler("insert into t select 1"):
            manager.cancel(connection)
            raise DbtDatabaseError("Query failed with status: CANCELED_STATE")
    with pytest.raises(DbtDatabaseError):  # the next statement: not cancelled
        with manager.exception_handler("select 1"):
            raise DbtDatabaseError("[TABLE_OR_VIEW_NOT_FOUND]")


def test_a_cancel_during_a_connections_first_statement_is_seen(monkeypatch: pytest.MonkeyPatch):
    """dbt opens a connection on its first statement: the handle is lazy when the statement
    starts and the server's wrapper by the time it fails; a cancel asked meanwhile counts."""
    from dbt.adapters.spark_contracts.connection import connections

    monkeypatch.setattr(connections, "endpoint_of", lambda c: SimpleNamespace(label="here"))
    manager, connection = manager_with(object())  # not opened yet
    with pytest.raises(StatementCancelled):
        with manager.exception_handler("insert into t select 1"):
            connection._handle = connection.handle = Handle()  # opened by the statement
            manager.cancel(connection)
            raise DbtDatabaseError("Query failed with status: CANCELED_STATE")
