# Two commands from a fresh clone: `make demo` and `make test` (Python 3.10+, Java 17, Maven or HTTPS).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
JARS   := $(CURDIR)/.jars
PYTEST_ARGS ?=

# Every dbt and pytest run below reads the Delta/Iceberg jars from the local folder: no network.
export DBT_SPARK_CONTRACTS_JARS := $(JARS)

.PHONY: install jars demo test unit functional lint bench clean

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
	cd integration_tests && ../$(BIN)/dbt build --profiles-dir .
	$(BIN)/python integration_tests/summarize.py integration_tests/target

lint: install
	$(BIN)/ruff check dbt tests benchmarks integration_tests
	$(BIN)/ruff format --check dbt tests benchmarks integration_tests
	$(BIN)/mypy dbt/adapters/spark_contracts/core

unit: install
	$(BIN)/pytest tests/unit -q -p no:cacheprovider

functional: install jars
	$(BIN)/pytest tests/functional -q -p no:cacheprovider --show-capture=no -n 2 $(PYTEST_ARGS)

test: lint unit functional

bench: install jars
	$(BIN)/python benchmarks/bench_diff_plan.py

clean:
	rm -rf $(VENV) $(JARS) integration_tests/target integration_tests/spark-warehouse logs
