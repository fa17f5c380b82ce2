# Two commands from a fresh clone: `make demo` and `make test` (Python 3.10+, Java 17, Maven or HTTPS).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
JARS   := $(CURDIR)/.jars
PYTEST_ARGS ?=

# Every dbt and pytest run below reads the Delta/Iceberg jars from the local folder: no network.
export DBT_SPARK_CONTRACTS_JARS := $(JARS)

.PHONY: install jars demo test unit functional faults faults-ci servers lint bench clean

install: $(VENV)/.installed
$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

jars: install $(JARS)/.fetched
$(JARS)/.fetched:
	$(BIN)/python -m dbt.adapters.spark_contracts.jars fetch $(JARS)
	touch $@

demo: install jars
	cd integration_tests && ../$(BIN)/python demo.py

lint: install
	$(BIN)/ruff check dbt tests benchmarks integration_tests
	$(BIN)/ruff format --check dbt tests benchmarks integration_tests
	$(BIN)/mypy dbt/adapters/spark_contracts/core

unit: install
	$(BIN)/pytest tests/unit -q -p no:cacheprovider

functional: install jars
	$(BIN)/pytest tests/functional -q -p no:cacheprovider --show-capture=no -n 2 --ignore=tests/functional/evolution/test_kill.py $(PYTEST_ARGS)

# Fault injection: real `dbt run` processes killed with SIGKILL at every commit (Delta, Iceberg).
faults: install jars
	$(BIN)/pytest tests/functional/evolution/test_kill.py -q -p no:cacheprovider --show-capture=no -n 2

# CI's share of the fault matrix: SIGKILL at the middle and the last commit of each format.
faults-ci: install jars
	DBT_SPARK_CONTRACTS_KILL_SAMPLE=1 $(BIN)/pytest tests/functional/evolution/test_kill.py -q -p no:cacheprovider --show-capture=no -n 2

# The same adapter through real servers started from the pyspark wheel (Thrift Server, Spark Connect).
servers: install jars
	$(BIN)/pytest tests/functional/test_connection_methods.py -q -p no:cacheprovider --show-capture=no --profile thrift
	$(BIN)/pytest tests/functional/test_connection_methods.py -q -p no:cacheprovider --show-capture=no --profile connect

test: lint unit functional faults-ci servers

bench: install jars
	$(BIN)/python benchmarks/bench_diff_plan.py
	$(BIN)/python benchmarks/bench_delta_evolution.py
	$(BIN)/python benchmarks/bench_contract_load.py
	$(BIN)/python benchmarks/bench_run_path.py

clean:
	rm -rf $(VENV) $(JARS) integration_tests/target integration_tests/spark-warehouse logs
