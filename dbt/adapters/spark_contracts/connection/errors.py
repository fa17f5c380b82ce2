"""A failed statement as dbt's typed error, by the exception's class, for every connection method.

What Spark (or its Thrift server) rejected becomes dbt's `DbtDatabaseError`; dbt's own
errors pass through unchanged; anything else stays a `DbtRuntimeError`. The message is the
error's own, never a Java stack trace.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from contextlib import contextmanager
from typing import Any, Callable, ClassVar, Iterator, Tuple, Type, TypeVar

from dbt.adapters.exceptions import FailedToConnectError
from dbt_common.exceptions import CompilationError, DbtDatabaseError, DbtRuntimeError

from dbt.adapters.spark_contracts.core.settings.config import ConfigError
from dbt.adapters.spark_contracts.core.settings.deadline import timeout_message

_LOST = "Cannot find main error class"
# A Java stack frame (`\tat org.x.Y.m(Y.scala:12)`) or its elision (`\t... 21 more`): the Spark
# Thrift Server puts the whole stack into the error message it answers with.
_JAVA_FRAME = re.compile(r"^\s*(at [\w$.<>/]+\(.*\)|\.\.\. \d+ more)\s*$")


def without_java_frames(text: str) -> str:
    """`text` without the lines of a Java stack trace (messages and `Caused by:` lines stay)."""
    return "\n".join(line for line in text.splitlines() if not _JAVA_FRAME.match(line))


def _database_error_classes() -> Tuple[Type[BaseException], ...]:
    """Exceptions that mean "the engine rejected or failed the statement".

    Embedded session: pyspark's captured JVM exceptions, and Py4J's wrapper of JVM exceptions
    pyspark does not convert (Delta raises some: `DeltaIllegalStateException`). Spark Connect:
    the server's errors. Thrift/http: PyHive's DB-API `DatabaseError` (odbc is refused when the profile loads)."""
    return _installed(
        "pyspark.errors.exceptions.captured:CapturedException",  # pyspark is a dependency
        "pyspark.errors.exceptions.connect:SparkConnectException",  # the connect extra (grpc)
        "py4j.protocol:Py4JJavaError",  # Spark Connect clients need no py4j
        "pyhive.exc:DatabaseError",
    )


def _installed(*classes: str) -> Tuple[Type[BaseException], ...]:
    """The exception classes (`module:Class`) of the clients installed here: an optional
    client that is missing gives none."""
    found: list[Type[BaseException]] = []
    for name in classes:
        module, attribute = name.split(":")
        try:
            found.append(getattr(importlib.import_module(module), attribute))
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def is_database_error(exc: BaseException) -> bool:
    return isinstance(exc, _database_error_classes())


def is_spark_error(exc: BaseException) -> bool:
    """Raised by Spark or pyspark: a database error, or pyspark's own (client side) error."""
    from pyspark.errors import PySparkException

    return is_database_error(exc) or isinstance(exc, PySparkException)


def _java_message(java: object) -> str:
    """A JVM exception and its causes as `Class: message` lines, without the stack (the class
    names the failure; a cause carries what a wrapper like TASK_WRITE_FAILED hides)."""
    lines: list[str] = []
    seen: object = java
    for _ in range(6):
        if seen is None:
            break
        text = ""
        for method in ("toString", "getMessage"):
            try:
                text = str(getattr(seen, method)() or "")
            except Exception:
                continue
            if text:
                break
        if text and text not in lines:
            lines.append(text)
        try:
            seen = seen.getCause()  # type: ignore[attr-defined]
        except Exception:
            break
    return "\nCaused by: ".join(lines)


def spark_error_message(exc: BaseException) -> str:
    """The error's own message, never a Java stack trace.

    Py4J's `Py4JJavaError` prints the whole JVM stack, so the Java exception's own message is
    used. PySpark formats JVM errors with Spark's error classes only, so a Delta error
    (`DELTA_...`) may become `Cannot find main error class`; the Delta exception itself, earlier
    in the chain, still carries the real message. PyHive's errors carry the Thrift server's
    response, whose status holds the message."""
    java = getattr(exc, "java_exception", None)
    if java is not None:  # Py4JJavaError
        message = _java_message(java)
        if message and _LOST not in message:
            return message
    status = getattr(exc.args[0], "status", None) if exc.args else None
    if status is not None and getattr(status, "errorMessage", None):
        return without_java_frames(str(status.errorMessage))
    try:
        text = str(exc)
    except Exception:
        text = ""
    if text and _LOST not in text:
        return text
    seen: BaseException | None = exc
    while seen is not None:
        origin = getattr(seen, "_origin", None) or getattr(seen, "java_exception", None)
        message = _java_message(origin) if origin is not None else ""
        if message and _LOST not in message:
            return message
        seen = seen.__context__ or seen.__cause__
    return text or type(exc).__name__


_E = TypeVar("_E", bound="_ServerError")


class _ServerError(DbtRuntimeError):
    """An error of the connection, not of a statement: `what` went wrong, and `endpoint` names
    the method and server once the connection manager knows them."""

    what: ClassVar[str]

    def __init__(self, detail: str, endpoint: str = "") -> None:
        self.detail = detail
        self.endpoint = endpoint
        prefix = f"{endpoint}: " if endpoint else ""
        super().__init__(f"{prefix}{self.what}: {detail}")

    def at(self: _E, endpoint: str) -> _E:
        return self if self.endpoint else type(self)(self.detail, endpoint)


class ConnectionLostError(_ServerError):
    """The connection to the server broke (or the server went away) while a statement ran."""

    what = "lost the connection to the server"


class ServerRefusedError(_ServerError):
    """The server answered but refused this client (a wrong or missing token, no permission):
    not a lost connection (retrying cannot help) and not an error of the statement."""

    what = "the server refused this client"


class VariantResultOverThriftError(DbtDatabaseError):
    """Spark's Thrift server cannot describe a result holding a VARIANT column (it has no
    thrift type for it), so no statement returning one can be read over `thrift`. Raised when
    the server failed to describe a result whose analysed schema holds a VARIANT (`columns`)."""

    def __init__(self, columns: Tuple[str, ...], detail: str) -> None:
        self.columns = columns
        self.detail = detail
        named = ", ".join(f"`{c}`" for c in columns)
        super().__init__(
            f"method thrift cannot return a result holding a VARIANT column ({named}): Spark's "
            "Thrift server has no type for it. Select it as `to_json(<column>)` or "
            "`variant_get(<column>, '$', '<type>')`, or use the session or connect method. "
            f"(the server said: {detail})"
        )


# gRPC status codes that mean "the server cannot be reached (any more)": UNAVAILABLE is what the
# client raises once its retries are used up.
_GRPC_UNREACHABLE_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED")
# ... and "the server refuses this client": on open a failed connection, later a refusal.
_GRPC_REFUSED_CODES = ("UNAUTHENTICATED", "PERMISSION_DENIED")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _grpc_code_name(exc: BaseException) -> str:
    """The gRPC status code name of a Spark Connect client error or a raw gRPC error, or ''."""
    code = None
    getter = getattr(exc, "getGrpcStatusCode", None)  # pyspark's SparkConnectGrpcException
    if callable(getter):
        code = getter()
    else:
        try:
            import grpc

            if isinstance(exc, grpc.RpcError) and callable(getattr(exc, "code", None)):
                code = exc.code()  # type: ignore[attr-defined]
        except ImportError:
            return ""
    return str(getattr(code, "name", "") or "")


def transport_error_classes() -> Tuple[Type[BaseException], ...]:
    """Exceptions of a broken thrift transport (PyHive over a socket or HTTP)."""
    installed = _installed("thrift.transport.TTransport:TTransportException")
    return (EOFError, ConnectionError, TimeoutError, *installed)


def is_connection_error(exc: BaseException) -> bool:
    """`exc` (or what it wraps) says the server cannot be reached or dropped the connection."""
    for seen in _chain(exc):
        if _grpc_code_name(seen) in _GRPC_UNREACHABLE_CODES:
            return True
        if isinstance(seen, transport_error_classes()):
            return True
    return False


def is_refusal(exc: BaseException) -> bool:
    """`exc` (or what it wraps) says the server refused this client's credentials."""
    return any(_grpc_code_name(seen) in _GRPC_REFUSED_CODES for seen in _chain(exc))


def connection_error_detail(exc: BaseException) -> str:
    """One line on why a connection failed: the gRPC status and its details, or the transport
    error, without the client's debug dump."""
    for seen in _chain(exc):
        name = _grpc_code_name(seen)
        if name in _GRPC_UNREACHABLE_CODES or name in _GRPC_REFUSED_CODES:
            details = getattr(seen, "details", None)
            text = str(details() if callable(details) else "") or _first_line(seen)
            for inner in _chain(seen):  # the raw gRPC error carries the details
                inner_details = getattr(inner, "details", None)
                if callable(inner_details) and inner_details():
                    text = str(inner_details())
                    break
            return f"{name}: {text}"
        if isinstance(seen, transport_error_classes()):
            return f"{type(seen).__name__}: {_first_line(seen) or 'connection closed'}"
    return f"{type(exc).__name__}: {_first_line(exc)}"


def _first_line(exc: BaseException) -> str:
    message = getattr(exc, "msg", None) or getattr(exc, "message", None) or str(exc)
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    return lines[0] if lines else ""


def to_dbt_error(exc: BaseException) -> DbtRuntimeError:
    """dbt's error for `exc`, raised while running a statement."""
    if isinstance(exc, DbtRuntimeError) and not isinstance(
        exc, (ConnectionLostError, ServerRefusedError, FailedToConnectError)
    ):
        # dbt-spark's thrift wrapper raises DbtRuntimeError from a broken transport
        if exc.__cause__ is not None and is_connection_error(exc.__cause__):
            return ConnectionLostError(connection_error_detail(exc.__cause__))
    if isinstance(exc, DbtDatabaseError):
        # dbt-spark's thrift wrapper raises these with the server's message, stack included
        exc.msg = without_java_frames(str(exc.msg))
        return exc
    if isinstance(exc, DbtRuntimeError):
        return exc
    if is_connection_error(exc):
        return ConnectionLostError(connection_error_detail(exc))
    if is_refusal(exc):
        return ServerRefusedError(connection_error_detail(exc))
    if is_database_error(exc):
        return DbtDatabaseError(without_java_frames(spark_error_message(exc)))
    return DbtRuntimeError(str(exc))


@contextmanager
def spark_errors_as_dbt_errors() -> Iterator[None]:
    """Spark's own errors (pyspark, Spark Connect, Py4J) raised inside become dbt's typed errors
    (`to_dbt_error`); anything else passes unchanged."""
    try:
        yield
    except Exception as exc:
        if is_spark_error(exc):
            raise to_dbt_error(exc) from exc
        raise


@contextmanager
def config_errors_as_compilation_errors() -> Iterator[None]:
    """A configuration the core refuses (`ConfigError`) reaches dbt as its CompilationError."""
    try:
        yield
    except ConfigError as exc:
        raise CompilationError(str(exc)) from exc


class QueryTimeoutError(DbtRuntimeError):
    """A statement ran longer than the profile's `query_timeout` and Spark cancelled it."""

    def __init__(self, seconds: float, method: str) -> None:
        self.seconds, self.method = seconds, method
        super().__init__(timeout_message(seconds, method))


# dbt.log's line for a connection that goes on in a new session (`leave_session`)
SESSION_LEFT = "the session is left for a write without an answer; going on in a new one"


class CancelMark:
    """Mixed into a connection's handle: whether dbt asked to cancel the statement it runs on
    a server (its own state, per connection; set by the connection manager's `cancel`)."""

    cancel_asked: bool = False


class StatementCancelled(DbtRuntimeError):
    """A server's statement that failed after dbt had asked to cancel it (Ctrl-C): the server
    says cancelled as soon as it is asked, not once the statement has stopped, so one that
    was committing may still commit."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"cancelled while it ran on the server ({detail})")


def statement_answered(exc: BaseException) -> bool:
    """Spark's answer to the statement that ended in `exc` is final: Spark refused or failed
    it (`DbtDatabaseError`), or it ran in this process's own Spark, whose call has returned (a
    `query_timeout` on the embedded session). Anything else (a lost connection, a cancel or a
    timeout of a server's statement, an error of the client) says nothing of whether the
    server commits it."""
    if isinstance(exc, StatementCancelled):
        return False
    if isinstance(exc, QueryTimeoutError):
        return exc.method == "session"
    return isinstance(exc, DbtDatabaseError)


def refused_before_any_change(plan: Callable[..., Any]) -> Callable[..., Any]:
    """A build the core refuses (`ConfigError`) reaches dbt as a CompilationError naming the
    model and its relation."""

    @functools.wraps(plan)
    def planned(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return plan(self, *args, **kwargs)
        except ConfigError as exc:
            bound = inspect.signature(plan).bind(self, *args, **kwargs).arguments
            model, existing = bound.get("model") or {}, bound.get("existing")
            raise CompilationError(f"{model.get('unique_id')} ({existing}): {exc}") from exc

    return planned
