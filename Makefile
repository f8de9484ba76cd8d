# Every target builds .venv first; the stamp makes it idempotent (re-run only when pyproject changes).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv docs demo test test-fast bench bench-log bench-broker bench-streams bench-connect bench-spark bench-driver bench-schemas bench-console lint clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark,dask,postgres,mysql,docs]'
	touch $(STAMP)

demo: venv  # make demo DEMO_ARGS=--keep-running: everything stays up, the web console too
	$(BIN)/python -m streamkit.demo $(DEMO_ARGS)

test: venv
	$(BIN)/python -m pytest

test-fast: venv
	$(BIN)/python -m pytest -m "not slow and not integration"

bench: bench-log bench-broker bench-streams bench-connect bench-spark bench-driver bench-schemas bench-console

bench-log: venv
	$(BIN)/python benchmarks/log_bench.py

bench-broker: venv
	$(BIN)/python benchmarks/broker_bench.py

bench-streams: venv
	$(BIN)/python benchmarks/streams_bench.py

bench-connect: venv
	$(BIN)/python benchmarks/connect_bench.py

bench-driver: venv
	$(BIN)/python benchmarks/driver_bench.py

bench-schemas: venv
	$(BIN)/python benchmarks/schemas_bench.py

bench-spark: venv
	$(BIN)/python benchmarks/spark_bench.py

bench-console: venv
	$(BIN)/python benchmarks/console_bench.py

docs: venv
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy streamkit

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
