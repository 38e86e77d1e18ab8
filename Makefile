# The two commands a new machine needs: `make demo` and `make test`. Each sets itself up.
.PHONY: setup demo test test-fast lint typecheck bench clean

VENV := .venv
PY := $(VENV)/bin/python
export PYSPARK_PYTHON := $(abspath $(PY))

setup:
	@bash scripts/setup.sh

demo: setup
	@$(PY) scripts/demo.py

lint: setup
	$(VENV)/bin/ruff check lake_core lake_orchestration tests bench scripts

typecheck: setup
	$(VENV)/bin/mypy lake_core

test: setup lint typecheck
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

bench: setup
	$(PY) bench/run.py

clean:
	rm -rf .demo-lake .pytest_cache .mypy_cache .ruff_cache
