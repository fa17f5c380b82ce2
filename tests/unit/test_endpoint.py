"""Endpoint naming, the Connect retry policy from the profile, and connection errors by type."""

from __future__ import annotations

import pytest
from dbt_common.exceptions import DbtDatabaseError, DbtRuntimeError
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.connection.credentials import SparkContractsCredentials
from dbt.adapters.spark_contracts.connection.errors import (
    ConnectionLostError,
    connection_error_detail,
    is_connection_error,
    to_dbt_error,
)
from dbt.adapters.spark_contracts.connection.remote import connect_failure, endpoint_of
from dbt.adapters.spark_contracts.core.settings.config import ConfigError
from dbt.adapters.spark_contracts.core.settings.endpoint import (
    CONNECT_DEFAULT_RETRIES,
    Endpoint,
    connect_address,
    connect_retry_settings,
    host_address,
)


@pytest.mark.parametrize(
    "url, address",
    [
        ("sc://localhost", "sc://localhost:15002"),
        ("sc://localhost:15999", "sc://localhost:15999"),
        ("sc://spark.example.com:443/;token=SECRET;use_ssl=true", "sc://spark.example.com:443"),
        ("sc://[::1]:15002/;user_id=me", "sc://[::1]:15002"),
    ],
)
def test_connect_address_drops_the_parameters(url: str, address: str) -> None:
    assert connect_address(url) == address


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=30))
def test_a_token_never_reaches_the_address(token: str) -> None:
    assert connect_address(f"sc://h.example:1/;token={token};use_ssl=true") == "sc://h.example:1"


def test_endpoint_label_and_host_address() -> None:
    assert Endpoint("thrift", host_address("localhost", 10000)).label == (
        "spark_contracts method thrift, localhost:10000"
    )
    assert host_address(None, None) == "localhost"


def _creds(**keys: object) -> SparkContractsCredentials:
    data = {"type": "spark_contracts", "schema": "s", **keys}
    SparkContractsCredentials.validate(dict(data))
    return SparkContractsCredentials.from_dict(dict(data))


def test_connect_profile_keys_reach_url_endpoint_and_retries() -> None:
    creds = _creds(
        method="connect",
        host="spark.example.com",
        port=15003,
        token="SECRET",
        use_ssl=True,
        connect_retries=7,
        connect_timeout=3,
    )
    assert creds.connect_url == "sc://spark.example.com:15003/;token=SECRET;use_ssl=true"
    assert (
        endpoint_of(creds).label == "spark_contracts method connect, sc://spark.example.com:15003"
    )
    from dbt.adapters.spark_contracts.connection.remote import retry_settings

    settings = retry_settings(creds)
    assert (settings.max_retries, settings.max_backoff_ms) == (7, 3000)
    assert settings.waits_ms() == [50, 200, 800, 3000, 3000, 3000, 3000]


def test_connect_retries_default_and_thrift_keeps_dbt_spark_default() -> None:
    assert _creds(method="connect", host="sc://h").connect_retries == CONNECT_DEFAULT_RETRIES
    thrift = _creds(method="thrift", host="h", port=1, user="u")
    assert thrift.connect_retries == 0
    assert endpoint_of(thrift).label == "spark_contracts method thrift, h:1"


@pytest.mark.parametrize("retries, timeout", [(-1, 10), (3, 0)])
def test_bad_retry_settings_are_refused(retries: int, timeout: int) -> None:
    with pytest.raises(ConfigError):
        connect_retry_settings(retries, timeout)
    with pytest.raises(DbtRuntimeError, match="connect_(retries|timeout)"):
        _creds(method="connect", host="sc://h", connect_retries=retries, connect_timeout=timeout)


@given(st.integers(0, 20), st.integers(1, 120))
def test_waits_never_exceed_the_timeout(retries: int, timeout: int) -> None:
    waits = connect_retry_settings(retries, timeout).waits_ms()
    assert len(waits) == retries
    assert all(0 < w <= timeout * 1000 for w in waits)
    assert waits == sorted(waits)


def _grpc_error(code_name: str, message: str) -> BaseException:
    import grpc
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    return SparkConnectGrpcException(
        message=message, grpc_status_code=getattr(grpc.StatusCode, code_name)
    )


def test_unavailable_is_a_lost_connection_not_a_database_error() -> None:
    exc = _grpc_error("UNAVAILABLE", "failed to connect to all addresses\nmore debug text")
    assert is_connection_error(exc)
    assert connection_error_detail(exc) == "UNAVAILABLE: failed to connect to all addresses"
    error = to_dbt_error(exc)
    assert isinstance(error, ConnectionLostError) and not isinstance(error, DbtDatabaseError)
    named = error.at("spark_contracts method connect, sc://h:1")
    assert named.msg == (
        "spark_contracts method connect, sc://h:1: lost the connection to the server: "
        "UNAVAILABLE: failed to connect to all addresses"
    )
    assert named.at("other") is named


def test_a_statement_error_stays_a_database_error() -> None:
    exc = _grpc_error("INTERNAL", "[TABLE_OR_VIEW_NOT_FOUND] x")
    assert not is_connection_error(exc)
    assert type(to_dbt_error(exc)) is DbtDatabaseError


def test_wrapped_transport_error_is_found_by_type() -> None:
    from thrift.transport.TTransport import TTransportException

    try:
        try:
            raise TTransportException(message="TSocket read 0 bytes")
        except TTransportException as inner:
            raise DbtRuntimeError("Connection lost while polling") from inner
    except DbtRuntimeError as outer:
        error = to_dbt_error(outer)
    assert isinstance(error, ConnectionLostError)
    assert error.detail == "TTransportException: TSocket read 0 bytes"


def test_connect_failure_names_the_endpoint_and_the_cause() -> None:
    from dbt.adapters.exceptions import FailedToConnectError

    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as cause:
            raise FailedToConnectError("failed to connect: ...") from cause
    except FailedToConnectError as exc:
        error = connect_failure(Endpoint("thrift", "localhost:1"), exc)
    assert isinstance(error, FailedToConnectError)
    assert error.msg == (
        "spark_contracts method thrift, localhost:1: could not connect: "
        "ConnectionRefusedError: [Errno 111] Connection refused"
    )


@pytest.mark.parametrize("method", ["thrift", "http"])
def test_thrift_does_not_resend_a_statement_unless_asked(method: str) -> None:
    """dbt-spark re-sends a statement whose connection broke while polled (query_retries 1); the
    server may still run the first, so a load could run twice: 0 unless the profile says."""
    extra = {"token": "t", "cluster": "c"} if method == "http" else {"user": "u"}
    assert _creds(method=method, host="h", port=1, **extra).query_retries == 0
    asked = _creds(method=method, host="h", port=1, query_retries=2, **extra)
    assert asked.query_retries == 2


@pytest.mark.parametrize("code", ["UNAUTHENTICATED", "PERMISSION_DENIED"])
def test_a_refused_client_is_neither_a_lost_connection_nor_a_database_error(code: str) -> None:
    from dbt.adapters.spark_contracts.connection.errors import ServerRefusedError, is_refusal

    exc = _grpc_error(code, "invalid authentication token\ndebug")
    assert is_refusal(exc) and not is_connection_error(exc)
    assert connection_error_detail(exc) == f"{code}: invalid authentication token"
    error = to_dbt_error(exc)
    assert type(error) is ServerRefusedError
    assert error.at("spark_contracts method connect, sc://h:1").msg == (
        "spark_contracts method connect, sc://h:1: the server refused this client: "
        f"{code}: invalid authentication token"
    )


def test_deadline_exceeded_is_a_lost_connection() -> None:
    exc = _grpc_error("DEADLINE_EXCEEDED", "deadline")
    assert is_connection_error(exc)
    assert isinstance(to_dbt_error(exc), ConnectionLostError)


def test_only_the_connect_clients_retries_warning_is_silenced() -> None:
    import warnings

    from dbt.adapters.spark_contracts.connection.remote import silence_retries_warning

    text = "[RETRIES_EXCEEDED] The maximum number of retries has been exceeded."
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")  # what pytest's own capture does
        silence_retries_warning()  # what importing remote.py does
        warnings.warn_explicit(
            text, UserWarning, "retries.py", 281, module="pyspark.sql.connect.client.retries"
        )
        assert seen == []
        warnings.warn_explicit(text, UserWarning, "x.py", 1, module="some.other.module")
        warnings.warn_explicit(
            "another warning",
            UserWarning,
            "retries.py",
            9,
            module="pyspark.sql.connect.client.retries",
        )
    assert [str(w.message) for w in seen] == [text, "another warning"]
