"""dbt's Python model suites, on real Spark (session profile; `--profile connect` too): the
models run in the dbt process on the thread's SparkSession and load through the SQL path."""

import pytest
from dbt.tests.adapter.python_model.test_python_model import (
    BasePythonEmptyTests,
    BasePythonIncrementalTests,
    BasePythonMetaGetTests,
    BasePythonModelTests,
    BasePythonSampleTests,
)
from dbt.tests.adapter.python_model.test_spark import (
    PANDAS_MODEL,
    PANDAS_ON_SPARK_MODEL,
    PYSPARK_MODEL,
    BasePySparkTests,
)


class TestPythonModel(BasePythonModelTests):
    pass


class TestPythonIncremental(BasePythonIncrementalTests):
    pass


class TestPythonMetaGet(BasePythonMetaGetTests):
    pass


class TestPythonEmpty(BasePythonEmptyTests):
    pass


class TestPythonSample(BasePythonSampleTests):
    pass


class TestPySpark(BasePySparkTests):
    @pytest.fixture(scope="class")
    def models(self):
        # dbt's suite also returns a `databricks.koalas` DataFrame: Koalas is a Databricks-only
        # package (superseded by pyspark.pandas, tested here), not installable with Spark 4.
        return {
            "pandas_df.py": PANDAS_MODEL,
            "pyspark_df.py": PYSPARK_MODEL,
            "pandas_on_spark_df.py": PANDAS_ON_SPARK_MODEL,
        }

    def test_different_dataframes(self, project):
        from dbt.tests.util import run_dbt

        results = run_dbt(["run"])
        assert len(results) == 3
        rows = project.run_sql(
            f"select City, Latitude from {project.test_schema}.pandas_on_spark_df order by City",
            fetch="all",
        )
        assert [(r[0], r[1]) for r in rows][:2] == [("Bogota", 4.6), ("Brasilia", -15.78)]
