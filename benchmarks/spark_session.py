"""The embedded session the Spark benchmarks share: 2 local cores, modest memory, the jar folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dbt.adapters.spark_contracts.connection.session import EmbeddedSparkConfig, get_session

DEFAULT_JARS = Path(__file__).resolve().parents[1] / ".jars"


def build_session(warehouse: Path) -> Any:
    jars_dir = Path(os.environ.get("DBT_SPARK_CONTRACTS_JARS", DEFAULT_JARS))
    config = EmbeddedSparkConfig(
        warehouse_dir=warehouse,
        jars_dir=jars_dir,
        master="local[2]",
        server_side_parameters={
            "spark.driver.memory": "2g",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
        },
    )
    return get_session(config)
