# The two commands a new machine needs: `make demo` and `make test`. Each sets itself up.
.PHONY: setup demo ui test test-split test-fast lint typecheck bench bench-quick clean

VENV := .venv
PY := $(VENV)/bin/python
export PYSPARK_PYTHON := $(abspath $(PY))

setup:
	@bash scripts/setup.sh

demo: setup
	@$(PY) scripts/demo.py

# The Dagster UI (webserver + daemon) on the demo's instance and lake: http://127.0.0.1:3000
ui: setup
	@test -d .demo/lake || { echo "no demo lake yet: run \`make demo\` first"; exit 1; }
	DAGSTER_HOME=$(CURDIR)/.demo/dagster_home LAKE_ROOT=$(CURDIR)/.demo/lake \
	  LAKE_LANDING=$(CURDIR)/.demo/landing $(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

lint: setup
	$(VENV)/bin/ruff check lake_core lake_cli lake_orchestration lake_spark lake_service tests bench scripts
	$(VENV)/bin/lint-imports

typecheck: setup
	$(VENV)/bin/mypy lake_core lake_cli lake_spark lake_orchestration lake_service

# Every tier on two pytest workers (pytest-xdist, one per core; a module's tests stay on one
# worker, so its fixtures start once; the longest modules start first: tests/conftest.py).
# The racing tests share the cores with the rest: their checks are exact rows, never timings.
test: setup lint typecheck
	$(PY) -m pytest -q -n 2 --dist loadfile

# The slow tier (racing processes, crashes, faults) alone, after the rest on two workers.
test-split: setup
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not slow"
	$(PY) -m pytest -q -m slow

test-fast: setup
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not slow"

# Every benchmark module in turn, then docs/benchmarks.md regenerated from bench/benchmarks.md.in.
bench: setup
	$(PY) bench/suite.py

# The same at toy sizes (bench/out/benchmarks-quick.md): a smoke run of every module.
bench-quick: setup
	$(PY) bench/suite.py --quick

clean:
	rm -rf .demo .demo-lake .pytest_cache .mypy_cache .ruff_cache
