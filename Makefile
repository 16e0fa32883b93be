# The two set-up commands of the README: `make demo` and `make test`. Both work on a fresh clone:
# they create .venv and install the project into it first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp-installed

.PHONY: demo test lint typecheck unit bench bench-smoke clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/otel-toolcall-eval demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck unit

# The peers (Ragas, DeepEval) are an optional extra in a venv of their own: their pins (openai<2, rich<14)
# conflict with the test extras, so installing them into .venv would break `make test`.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.stamp-installed

$(BENCH_STAMP): pyproject.toml
	$(PY) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m benchmarks

clean:
	rm -rf $(VENV) $(BENCH_VENV) .mypy_cache .ruff_cache .pytest_cache
