"""Python models (pure part): which methods run them, and the name of their temporary view."""

import re
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbt.adapters.spark_contracts.core.materialization.python_model import (
    PYTHON_VIEW_SUFFIX,
    check_python_model,
    python_view_name,
)
from dbt.adapters.spark_contracts.core.settings.config import ConfigError


@pytest.mark.parametrize("method", ["session", "connect", "SESSION"])
def test_python_model_runs_on_in_process_methods(method):
    assert check_python_model("model.p.py_model", "python", method) is None


@pytest.mark.parametrize("method", ["thrift", "http", "odbc"])
def test_python_model_refused_on_sql_only_methods(method):
    with pytest.raises(ConfigError) as info:
        check_python_model("model.p.py_model", "python", method)
    message = str(info.value)
    assert "model.p.py_model" in message  # the model
    assert f"method: {method}" in message  # the method it cannot run on
    assert "session" in message and "connect" in message  # what is allowed


@pytest.mark.parametrize("method", ["thrift", "http", "odbc", "session", "connect"])
@pytest.mark.parametrize("language", ["sql", None, "SQL"])
def test_sql_models_run_on_every_method(method, language):
    assert check_python_model("model.p.sql_model", language, method) is None


def test_unknown_method_is_left_to_the_run():
    assert check_python_model("model.p.py_model", "python", None) is None


@pytest.mark.parametrize(
    "identifier,view",
    [
        ("orders", "orders__dbt_py"),
        ("my-model", "my_model__dbt_py"),
        ("1st", "_1st__dbt_py"),
        ("", "model__dbt_py"),
    ],
)
def test_python_view_name(identifier, view):
    assert python_view_name(identifier) == view


@given(st.text(max_size=30))
def test_python_view_name_is_a_plain_spark_identifier(identifier):
    view = python_view_name(identifier)
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", view)
    assert view.endswith(PYTHON_VIEW_SUFFIX)


# ---- the runner's errors (no Spark: the model fails before any DataFrame exists) -----------
from dbt_common.exceptions import DbtRuntimeError  # noqa: E402

from dbt.adapters.spark_contracts.python_model import (  # noqa: E402
    python_model_view,
    run_python_model,
)

MODEL = {
    "unique_id": "model.p.py_model",
    "alias": "py_model",
    "language": "python",
    "original_file_path": "models/py_model.py",
}
# what dbt.ref would load tables with; these models never call it
NO_SESSION = SimpleNamespace(table=None)
DBT_OBJ = "\n\nclass dbtObj:\n    def __init__(self, load):\n        self.load = load\n"


@pytest.mark.parametrize("method", ["thrift", "odbc"])
def test_runner_refuses_sql_only_methods(method):
    with pytest.raises(DbtRuntimeError) as info:
        python_model_view(object(), method, "def model(dbt, session): ...", MODEL)
    assert "model.p.py_model" in str(info.value) and f"method: {method}" in str(info.value)


def test_model_code_error_names_the_model_and_its_line():
    code = "def model(dbt, session):\n    x = 1\n    raise ValueError('no orders')\n" + DBT_OBJ
    with pytest.raises(DbtRuntimeError) as info:
        run_python_model(NO_SESSION, code, MODEL)
    message = str(info.value)
    assert "Python model model.p.py_model failed: ValueError: no orders" in message
    assert 'models/py_model.py", line 3, in model' in message


@pytest.mark.parametrize("returned", ["None", "[1, 2]", "{'id': 1}"])
def test_model_must_return_a_dataframe(returned):
    code = f"def model(dbt, session):\n    return {returned}\n" + DBT_OBJ
    with pytest.raises(DbtRuntimeError) as info:
        run_python_model(NO_SESSION, code, MODEL)
    message = str(info.value)
    assert "model.p.py_model" in message
    assert "return a pyspark DataFrame, a pandas DataFrame or a pandas-on-Spark" in message


def test_the_one_node_validation_refuses_python_on_thrift():
    """The check is one of core/settings/validate.py's CHECKS: run at parse and again at run."""
    from dbt.adapters.spark_contracts.core.settings.validate import NodeConfig, validate_node_config

    node = NodeConfig(
        model="model.p.py_model (models/py_model.py)",
        config={},
        run_vars={},
        language="python",
        connection_method="thrift",
    )
    with pytest.raises(ConfigError, match=r"model\.p\.py_model .*method: thrift"):
        validate_node_config(node)
    validate_node_config(NodeConfig(**{**node.__dict__, "connection_method": "session"}))
