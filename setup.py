#!/usr/bin/env python
"""dbt-spark-contracts: a dbt adapter derived from dbt-spark, with data contracts and schema evolution."""

from pathlib import Path

from setuptools import find_namespace_packages, setup

version: dict = {}
exec(Path("dbt/adapters/spark_contracts/__version__.py").read_text(), version)

setup(
    name="dbt-spark-contracts",
    version=version["version"],
    description="dbt-spark with data contracts that hold and schema evolution for Delta, Iceberg, Parquet",
    long_description=Path("README.md").read_text(),
    long_description_content_type="text/markdown",
    packages=find_namespace_packages(include=["dbt", "dbt.*"]),
    include_package_data=True,
    package_data={"dbt.adapters.spark_contracts.connection": ["log4j2.properties"], "dbt.include.spark_contracts": ["dbt_project.yml", "macros/*.sql", "macros/**/*.sql"]},
    python_requires=">=3.10",
    install_requires=[
        "dbt-core>=1.10,<1.13",
        "dbt-spark[PyHive]>=1.10,<1.12",
        "dbt-adapters>=1.10,<2.0",
        "pyspark[connect]==4.1.1",
        "delta-spark==4.3.1",
        "pandas>=2.0,<3",
        # core/contracts/pydantic_contract.py imports annotated_types (pydantic 2's) at import time
        "pydantic>=2,<3",
    ],
    extras_require={
        "dev": [
            "dbt-tests-adapter>=1.10,<2",
            "pytest>=8",
            "pytest-xdist>=3",
            "hypothesis>=6",
            "ruff>=0.6",
            "mypy>=1.10",
            "build>=1.2",
            "twine>=5",
        ]
    },
    entry_points={},
)
