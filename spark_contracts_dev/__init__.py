"""Development tooling of dbt-spark-contracts, not part of the adapter's wheel: a local Spark
standalone cluster (`python -m spark_contracts_dev.cluster start|stop|status`) and local-mode
Thrift / Spark Connect servers (`python -m spark_contracts_dev.servers thrift|connect`), all
started from the pyspark wheel, for the functional tests, `make cluster*` and the benchmarks.
Importable from the repository's root (pytest.ini's `pythonpath = .`; `python -m` from there).
"""
