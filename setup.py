"""The opt-in compiled build: with ``OTEL_TOOLCALL_EVAL_COMPILE=1`` the hot path is compiled with mypyc.

pyproject.toml stays the metadata source; this file only adds extension modules, and only when asked, the way
black and mypy ship mypyc wheels: the same source, compiled where it pays, with the ``.py`` files installed beside
the extensions (Python's importer prefers the extension; without one, the source runs). Without the variable the
package builds pure Python exactly as before, and editable installs (``pip install -e``, ``make test``'s ``.venv``)
stay pure. mypy (which ships mypyc) is a build requirement of the compiled build only, with the run-time
dependencies and stubs the type check needs: setuptools' PEP 517 backend asks for ``setup_requires`` before it
runs the build, so the first pass below names them without importing mypyc.

Which modules, and why these: docs/performance.md, "A compiled hot path with mypyc". Left interpreted:
``conventions/protocol.py`` (the ``runtime_checkable`` ``Convention`` Protocol: compiled, it raises at import and
rejects ``isinstance``), ``conventions/attribute.py`` (``AttributeConvention``, the frozen slots dataclass users
subclass: a compiled dataclass loses the fields of an interpreted subclass that declares slots of its own; its
methods are one line into the compiled ``conventions/spans.py``), ``conventions/builtin.py`` (subclasses of it, one
by multiple inheritance, which mypyc rejects), ``conventions/base.py`` (the module they are imported from) and
``conventions/frameworks.py`` (data, off the path); everything off the per-span and per-case path (CLI, config,
replay, serve, judge). The processor's face (``processor.py``) is not compiled: it subclasses the SDK's
``SpanProcessor`` and runs nothing per span (the SDK's ``on_end`` is bound to the pipeline's); the pipeline behind it
(``online/pipeline.py``) subclasses nothing, so mypyc compiles it as a native class (attributes in slots).
"""

from __future__ import annotations

import os

from setuptools import Extension, setup

# The mypy release the compiled build is made and measured with (mypyc's generated C depends on it).
MYPY = "mypy==2.4.1"
# mypyc compiles from the types, so the build environment needs what the type check of the compiled modules reads:
# the run-time dependencies (from pyproject.toml) and the stubs the dev environment type-checks with.
STUBS = ("scipy-stubs", "types-PyYAML")

# The per-span path of the processor (records, the per-call checks, the engine, the trace state and what the
# processor calls on every span) and the per-case path of the offline scorer; paths under src/.
COMPILED = (
    "otel_toolcall_eval/records.py",
    "otel_toolcall_eval/attributes.py",
    "otel_toolcall_eval/_json.py",
    "otel_toolcall_eval/_lru.py",
    "otel_toolcall_eval/checks/normalize.py",
    "otel_toolcall_eval/checks/outcome.py",
    "otel_toolcall_eval/checks/parse.py",
    "otel_toolcall_eval/checks/schema.py",
    "otel_toolcall_eval/checks/unknown_tool.py",
    "otel_toolcall_eval/checks/duplicate.py",
    "otel_toolcall_eval/checks/repeated_failure.py",
    "otel_toolcall_eval/checks/must_not_call.py",
    "otel_toolcall_eval/checks/undeclared.py",
    "otel_toolcall_eval/checks/step_budget.py",
    "otel_toolcall_eval/checks/required_steps.py",
    "otel_toolcall_eval/checks/destructive.py",
    "otel_toolcall_eval/checks/argument_rules.py",
    "otel_toolcall_eval/checks/same_call.py",
    "otel_toolcall_eval/checks/cost.py",
    "otel_toolcall_eval/checks/recovery.py",
    "otel_toolcall_eval/checks/tool_list.py",
    "otel_toolcall_eval/checks/verdict.py",
    "otel_toolcall_eval/checks/selection.py",
    "otel_toolcall_eval/checks/argument_match.py",
    "otel_toolcall_eval/checks/order.py",
    "otel_toolcall_eval/checks/pairing.py",
    "otel_toolcall_eval/checks/necessity.py",
    "otel_toolcall_eval/checks/trajectory.py",
    "otel_toolcall_eval/engine/call.py",
    "otel_toolcall_eval/engine/tally.py",
    "otel_toolcall_eval/conventions/llm_spans.py",
    # the conventions' per-span work: reading a span into a record, and the registry that asks the conventions
    # (the Protocol and the dataclass users subclass stay interpreted: conventions/protocol.py, attribute.py)
    "otel_toolcall_eval/conventions/spans.py",
    "otel_toolcall_eval/conventions/registry.py",
    "otel_toolcall_eval/online/trace_state.py",
    "otel_toolcall_eval/online/matching.py",
    "otel_toolcall_eval/online/trace_stats.py",
    "otel_toolcall_eval/online/enrich.py",
    "otel_toolcall_eval/online/metrics.py",
    "otel_toolcall_eval/online/sessions.py",
    "otel_toolcall_eval/_sdk.py",
    "otel_toolcall_eval/online/background.py",
    "otel_toolcall_eval/online/forward.py",
    "otel_toolcall_eval/online/pipeline.py",
    "otel_toolcall_eval/online/gate.py",
    "otel_toolcall_eval/online/call.py",
    "otel_toolcall_eval/online/turn.py",
    "otel_toolcall_eval/online/finish.py",
    "otel_toolcall_eval/online/held_spans.py",
    "otel_toolcall_eval/_ticker.py",
    # the guard's decision before a tool runs and its record (its plug-ins, which import their frameworks, are not)
    "otel_toolcall_eval/engine/precheck.py",
    "otel_toolcall_eval/engine/guard.py",
    "otel_toolcall_eval/guard/guard.py",
    "otel_toolcall_eval/guard/record.py",
    "otel_toolcall_eval/offline/score.py",
    "otel_toolcall_eval/offline/runs.py",
    "otel_toolcall_eval/offline/prepare.py",
    # the offline run's per-case path outside scoring: the dataset line's reader, the case row, the aggregate
    # (offline/reports/junit.py is not: mypyc rejects its surrogate code points in string literals)
    "otel_toolcall_eval/dataset/fast.py",
    "otel_toolcall_eval/offline/cases.py",
    "otel_toolcall_eval/offline/aggregate.py",
)


def _compile() -> bool:
    return os.environ.get("OTEL_TOOLCALL_EVAL_COMPILE", "") not in ("", "0")


def _build_requires() -> list[str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: setuptools' own reader of pyproject.toml
        from setuptools.config.pyprojecttoml import read_configuration

        project = read_configuration("pyproject.toml")["project"]
    else:
        with open("pyproject.toml", "rb") as f:
            project = tomllib.load(f)["project"]
    # the compiled modules import the offline extra's libraries too (scipy, rapidfuzz): the type check reads them
    return [MYPY, *STUBS, *_expand(project, ["eval"])]


def _expand(project: dict, extras: list[str]) -> list[str]:
    """The core dependencies and those of ``extras``, an extra naming this project's own (``[otlp,cli]``) expanded."""
    requirements, seen, todo = list(project["dependencies"]), set(), list(extras)
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in project["optional-dependencies"][extra]:
            if requirement.startswith(project["name"] + "["):
                todo.extend(requirement.split("[", 1)[1].rstrip("]").split(","))
            else:
                requirements.append(requirement)
    return requirements


def _ext_modules() -> list[Extension]:
    try:
        from mypyc.build import mypycify
    except ImportError:  # get_requires_for_build_*: setup_requires below names mypy, installed for the build
        return []
    # mypy's settings of pyproject.toml (strict, the per-module overrides): the build type-checks what it compiles;
    # the modules it only imports are analysed for their types but not reported on (`make typecheck` does that),
    # so an optional extra missing from the build environment (redis, pint) does not stop it.
    return list(
        mypycify(
            [
                "--config-file",
                "pyproject.toml",
                "--follow-imports",
                "silent",
                *(os.path.join("src", path) for path in COMPILED),
            ],
            opt_level=os.environ.get("MYPYC_OPT_LEVEL", "3"),
            group_name="otel_toolcall_eval",
        )
    )


if _compile():
    setup(ext_modules=_ext_modules(), setup_requires=_build_requires())
else:
    setup()
