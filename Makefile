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

# The peers (Ragas, DeepEval) are an optional extra: installed here, not for `make test`.
bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
