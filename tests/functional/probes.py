"""Counting how often Spark evaluates a model's rows (the embedded session method): every dbt
thread's session gets UDFs that count their calls in accumulators of this process's
SparkContext and return their argument unchanged."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterable, Iterator

import pytest

from dbt.adapters.spark_contracts.connection import session as embedded

Count = Callable[..., int]
ROWS = 200  # the rows a probed model outputs in its changing run


def versioned_model(config: str, v1: str, v2: str) -> str:
    """A model configured with `config` (config()'s arguments) whose SELECT is `v1`, or `v2`
    under `--vars '{v: 2}'`."""
    return (
        "{{ config(" + config + ") }}\n"
        "{% if var('v', 1) == 1 %}\n" + v1 + "\n{% else %}\n" + v2 + "\n{% endif %}\n"
    )


def probe_model(config: str, v1: str, v2: str) -> str:
    """An incremental `versioned_model`."""
    return versioned_model("materialized='incremental', " + config, v1, v2)


@contextmanager
def evaluation_probes(names: Iterable[str] = ()) -> Iterator[Count]:
    """Within it, every dbt thread's new session has `probe_eval(x)`, counted under "", and
    `probe_named(x, name)`, counted under `name` (one of `names`). Yields `count(name="")`,
    the calls so far."""
    keys = ("", *names)
    accumulators: Dict[str, Any] = {}
    original = embedded.thread_session

    def with_probes(config: Any) -> Any:
        session = original(config)
        if not accumulators:  # created once, on the shared SparkContext
            accumulators.update({key: session.sparkContext.accumulator(0) for key in keys})
        counters = dict(accumulators)  # what the UDFs' pickled closures carry

        def probe(x: int) -> int:
            counters[""].add(1)
            return x

        def probe_named(x: int, name: str) -> int:
            counters[name].add(1)
            return x

        session.udf.register("probe_eval", probe, "bigint")
        session.udf.register("probe_named", probe_named, "bigint")
        return session

    def count(name: str = "") -> int:
        return int(accumulators[name].value) if accumulators else 0

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embedded, "thread_session", with_probes)
        yield count
