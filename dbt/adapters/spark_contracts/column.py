"""Columns: dbt-spark's column, with the full (never truncated) Spark type string."""

from __future__ import annotations

from dataclasses import dataclass

from dbt.adapters.spark.column import SparkColumn


@dataclass
class SparkContractsColumn(SparkColumn):
    def is_complex(self) -> bool:
        return self.dtype.lower().split("<", 1)[0] in ("struct", "array", "map")
