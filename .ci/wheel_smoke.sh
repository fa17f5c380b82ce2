#!/usr/bin/env bash
# The wheel installed as a user installs it: a fresh venv outside the repository, the wheel with
# its dependencies from PyPI (resolved by uv, pinned in the constraints, for time: pip's own
# resolver is not what this checks, the wheel's declared dependencies are), the jars fetched
# with the documented command (`python -m dbt.adapters.spark_contracts.jars fetch <dir>`), then,
# in a dbt project outside the repository, `dbt debug` and a one-model `dbt build` on the
# embedded Spark (method: session): the model's run and a data test of its row, in one Spark
# start. Passes when run_results.json says the model succeeded and the test passed.
#
#   .ci/wheel_smoke.sh <wheel> [constraints.txt] [jars dir]
#
# constraints: the dbt-core line to install (`make wheel-test` passes .ci/constraints-dbt1.11.txt:
#   without it pip takes the newest dbt-core 1.12.x, whose parser package builds only with
#   access to GitHub). jars dir: a folder to fetch into; `make wheel-test` passes the repository's
#   filled .jars, so the documented fetch runs and finds every jar there (no download); without
#   it the jars are downloaded into the temporary folder.
set -euo pipefail

wheel=$(realpath "$1")
constraints=${2:+$(realpath "$2")}
jars=${3:+$(realpath "$3")}
python=${PYTHON:-python3}

work=$(mktemp -d "${TMPDIR:-/tmp}/dbt-spark-contracts-wheel.XXXXXX")
work=$(cd "$work" && pwd -P)     # as the Spark JVMs' command lines name it (pyspark resolves links)
keep=${KEEP_WHEEL_SMOKE:-0}
# Removed once the Spark JVMs dbt started have exited (their shutdown hooks read the venv's jars).
gone() {
  command -v pgrep >/dev/null || return 0
  for _ in $(seq 30); do pgrep -f "$work/venv" >/dev/null || return 0; sleep 1; done
  echo "a process of $work/venv still runs after 30 s; removing $work anyway"
}
trap 'status=$?; if [ "$keep" = 1 ] || [ $status != 0 ]; then echo "left in $work"; else gone; rm -rf "$work" || echo "could not remove $work"; fi' EXIT
cd "$work"                       # nothing of the repository on the path from here on
unset PYTHONPATH DBT_SPARK_CONTRACTS_JARS DBT_PROFILES_DIR SPARK_HOME  # the wheel's own pyspark
began=$(date +%s)
step() { printf '\n== %s (%ss)\n' "$1" $(($(date +%s) - began)); }

step "fresh venv in $work/venv, the wheel and its dependencies from PyPI"
"$python" -m venv venv
# uv resolves the wheel's declared dependencies from PyPI as pip does, in half the time
venv/bin/pip install --quiet --disable-pip-version-check ${constraints:+-c "$constraints"} uv
venv/bin/uv pip install --quiet --python venv/bin/python ${constraints:+-c "$constraints"} "$wheel"
venv/bin/pip list 2>/dev/null | grep -Ei '^(dbt-core|dbt-spark|dbt-adapters|pyspark|delta-spark) '
venv/bin/python - <<'EOF'
import importlib.util, pathlib, sys
import dbt.adapters.spark_contracts as adapter
where = pathlib.Path(adapter.__file__).resolve()
assert pathlib.Path(sys.prefix).resolve() in where.parents, f"adapter imported from {where}"
assert importlib.util.find_spec("spark_contracts_dev") is None, "development tooling installed"
print("adapter from", where.parent)
EOF

step "jars: python -m dbt.adapters.spark_contracts.jars fetch"
jars=${jars:-$work/jars}
venv/bin/python -m dbt.adapters.spark_contracts.jars fetch "$jars"
export DBT_SPARK_CONTRACTS_JARS=$jars

step "a dbt project outside the repository: dbt debug, dbt run"
mkdir -p project/models
cat > project/dbt_project.yml <<'EOF'
name: wheel_smoke
version: "1.0"
config-version: 2
profile: wheel_smoke
EOF
cat > project/profiles.yml <<'EOF'
wheel_smoke:
  target: dev
  outputs:
    dev:
      type: spark_contracts
      method: session
      schema: wheel_smoke
      threads: 1
EOF
cat > project/models/smoke.sql <<'EOF'
{{ config(materialized='table') }}
select 1 as id, 'installed from the wheel' as note
EOF
# a data test of the model's row, run by the same `dbt build` (one Spark start for both)
mkdir -p project/tests
cat > project/tests/smoke_holds_its_row.sql <<'EOF'
select id, note from {{ ref('smoke') }} where not (id = 1 and note = 'installed from the wheel')
union all
select 0, 'not one row' from (select count(*) as n from {{ ref('smoke') }}) counted where n != 1
EOF
cd project
../venv/bin/dbt debug --profiles-dir .
../venv/bin/dbt build --profiles-dir .
../venv/bin/python - <<'EOF'
import json

results = json.load(open("target/run_results.json"))["results"]
statuses = sorted((r["unique_id"].split(".")[0], r["status"]) for r in results)
assert statuses == [("model", "success"), ("test", "pass")], results
print("run_results: the model built and its row tested:", statuses)
EOF
step "wheel smoke test passed"
