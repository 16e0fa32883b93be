"""The opt-in compiled build: with ``OTEL_TOOLCALL_EVAL_COMPILE=1`` the hot path is compiled with mypyc.

pyproject.toml stays the metadata source; this file only adds extension modules, and only when asked, the way
black and mypy ship mypyc wheels: the same source, compiled where it pays, and each compiled module's source
installed beside its extension for type checkers and readers (as ``.pyi``: ``_BuildPy`` below says why). Without the
variable the package builds pure Python exactly as before, and editable installs (``pip install -e``, ``make
test``'s ``.venv``) stay pure. mypy (which ships mypyc) is a build requirement of the compiled build only, with the
run-time dependencies and stubs the type check needs: setuptools' PEP 517 backend asks for ``setup_requires`` before
it runs the build, so the first pass below names them without importing mypyc.

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
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

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
    extensions = list(
        mypycify(
            [
                "--config-file",
                "pyproject.toml",
                "--follow-imports",
                "silent",
                *(os.path.join("src", path) for path in COMPILED),
            ],
            opt_level=os.environ.get("MYPYC_OPT_LEVEL", "3"),
            debug_level=_debug_level(),
            group_name="otel_toolcall_eval",
        )
    )
    group = "otel_toolcall_eval__mypyc"
    for extension in extensions:
        extension.extra_compile_args = [*extension.extra_compile_args, *_size_compile_flags()]
        extension.extra_link_args = [*extension.extra_link_args, *_size_link_flags(stub=extension.name != group)]
    return extensions


# What the compiled build installs for every user on Linux, macOS and Windows counts against the core install's
# 40 MB (benchmarks/footprint.py, footprint.size_compiled): 44.4 MB with mypyc's defaults (this package's extensions
# 7.8 MB of it), 39.8 MB with the settings below (Linux x86_64, CPython 3.11). The optimisation level stays -O3.


def _debug_level() -> str:
    """mypyc's ``-g`` level (its own default is 1): 0, no debug information in the extensions, as black and mypy
    build their wheels. At 1 the group's shared library carried 2.8 MB of DWARF (of 7.0 MB) into every install, for
    a debugger nobody attaches to a user's process; ``MYPYC_DEBUG_LEVEL=1`` (or 2, 3) builds it back for one, and
    then none of the flags below are used."""
    return os.environ.get("MYPYC_DEBUG_LEVEL", "0")


def _size_compile_flags() -> list[str]:
    """``-fvisibility=hidden`` on macOS (Clang): the group's library exports only its ``PyInit_`` function (CPython's
    ``PyMODINIT_FUNC`` marks it visible), not its 3,300 functions and tables: the per-module stubs reach the library
    through a capsule, never through a symbol, so nothing else is looked up. On Linux the link's version script
    below does the same without changing the code (measured with GCC: hidden visibility saved 0.3 MB of dynamic
    symbols and cost 0.34 MB more code, as GCC inlines more of what can no longer be interposed). MSVC exports only
    what is marked ``dllexport`` already."""
    if _debug_level() != "0" or sys.platform != "darwin":
        return []
    return ["-fvisibility=hidden"]


def _size_link_flags(*, stub: bool) -> list[str]:
    """Link flags: no local symbol table (0.5 MB of the library; GNU ld and lld on Linux, ``-x`` for macOS's linker,
    which keeps no DWARF in the binary anyway); and on Linux, for each compiled module's stub (one small function),
    one loadable segment instead of page-aligned code and data segments (14 KB -> 6 KB each, 0.45 MB over the
    stubs: the separation hardens code pages against gadgets, and a stub's code is its one ``PyInit_`` call).
    Windows' linker keeps debug information in a separate ``.pdb`` that is not packaged."""
    if _debug_level() != "0":
        return []
    if sys.platform.startswith("linux"):
        exports = f"-Wl,--version-script={_exports_script()}"
        return ["-Wl,--strip-all", exports, *(["-Wl,-z,noseparate-code"] if stub else [])]
    if sys.platform == "darwin":
        return ["-Wl,-x"]
    return []


def _exports_script() -> str:
    """A GNU ld / lld version script that exports the ``PyInit_`` functions only (the import system's one entry into
    an extension; the stubs reach the group's library through a capsule): the library's 3,300 other functions and
    tables stay out of its dynamic symbol table (3.73 -> 3.40 MB), the code as compiled. Written into ``build/``,
    which the wheel target empties first."""
    path = os.path.abspath(os.path.join("build", "mypyc-exports.map"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("{ global: PyInit_*; local: *; };\n")
    return path


class _BuildPy(build_py):
    """The compiled build installs each compiled module's source as ``.pyi``, not ``.py``.

    The source ships for what reads it without importing it: type checkers (the package is typed, ``py.typed``, and
    a checker reads ``.py`` or ``.pyi``, never an extension; mypyc's authors advise shipping it) and readers. As
    ``.py`` it cost 1.35 MB of the compiled install: 0.57 MB of source and 0.77 MB of bytecode pip compiles from it
    at install and nothing ever loads (the importer takes the extension; without one the install is broken anyway).
    As ``.pyi`` it is the same text, read by the same checkers as the module's stub, and pip compiles nothing from
    it. Nothing at run time reads it: a compiled function has no source for ``inspect``, and a traceback through
    compiled code names ``src/...`` (the build's path), which no install has. ``stubgen``'s stubs would be smaller
    but lose types (``Incomplete`` for type aliases and constants, 400 times over these modules)."""

    def run(self) -> None:
        super().run()
        for path in COMPILED:
            source = os.path.join(self.build_lib, path)
            if os.path.exists(source):
                os.replace(source, source + "i")


if _compile():
    setup(ext_modules=_ext_modules(), setup_requires=_build_requires(), cmdclass={"build_py": _BuildPy})
else:
    setup()
