"""The layout shows the architecture, one way: records and policy objects <- pure checks <- engine <- adapters <- CLI.

Checked on the import graph grimp builds from the source (every import, including function-level and
``TYPE_CHECKING`` ones): no module imports a layer above its own, no two modules import each other (directly or
around a cycle), and the checks and the engine load neither OpenTelemetry nor pydantic nor the config.
"""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

import grimp
import pytest

from otel_toolcall_eval.online import LAYERS as ONLINE_LAYERS

PACKAGE = "otel_toolcall_eval"

# top to bottom; a unit (a top-level module or package of the project) may import its own layer or any below it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__", "cli", "commands", "_docs", "demo"),  # the command line and what only it uses
    ("serve",),  # the scoring service: OTLP receivers around the processor, built on replay's decoding
    ("replay", "harvest", "configurator", "span_exporter"),  # adapters built on the processor (zero-code, exporter)
    ("processor", "offline", "guard"),  # the online adapter's public face, the offline adapter, the pre-execution guard
    # the online pipeline, a layer per ``online.LAYERS`` entry (its modules, top down); the judge plugs in beside
    # the features (held spans, sessions); "online": the package itself, which imports nothing
    *(tuple(f"online.{m}" for m in layer) + (("judge",) if "sessions" in layer else ()) for layer in ONLINE_LAYERS),
    ("online",),
    ("config",),  # the file format (pydantic), compiled to policy objects
    ("conventions", "dataset"),  # reading spans and dataset rows into records
    ("_sdk",),  # every private SDK access (probed at import): the readers' and the processor's span fields
    ("engine",),  # per-call scoring, once for every adapter
    ("checks",),  # pure checks
    ("records", "policy", "attributes", "slices", "_json", "_version"),  # plain records, policy objects, names
    # user-facing errors and exit codes, atomic outputs, untrusted text; the fork registry, deadlines, the
    # byte-bounded cache (stdlib only); which extra brings which module, the terminal with or without rich
    ("errors", "_files", "_text", "_fork", "_deadline", "_lru", "_ticker", "extras", "_console"),
)
LAYER_OF = {unit: i for i, units in enumerate(LAYERS) for unit in units}
PURE = ("checks", "engine", "records", "policy")
NOT_IN_PURE = ("opentelemetry", "pydantic", "yaml")


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, include_external_packages=True)


def _unit(module: str) -> str:
    """The top-level module or package; inside ``online/``, each module is a unit of its own (its layers)."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "online":
        return "online." + parts[2]
    return parts[1] if len(parts) > 1 else ""


def _own_modules() -> list[str]:
    return sorted(m for m in graph().modules if m == PACKAGE or m.startswith(PACKAGE + "."))


def test_every_unit_has_a_layer() -> None:
    units = {_unit(m) for m in _own_modules()} - {""}
    assert sorted(units - set(LAYER_OF)) == [], "add the new module to LAYERS (and to the README layout table)"


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = []
    for module in _own_modules():
        unit = _unit(module)
        for imported in graph().find_modules_directly_imported_by(module):
            target = _unit(imported) if imported.startswith(PACKAGE + ".") else None
            if target is None or unit == "" or target == unit:
                continue
            if LAYER_OF[target] < LAYER_OF[unit]:
                upward.append(f"{module} -> {imported}")
    assert upward == []


def test_no_import_cycles() -> None:
    """Strongly connected components of the module graph (Tarjan, iteratively): each must be one module."""
    g = graph()
    nodes = _own_modules()
    edges = {m: sorted(d for d in g.find_modules_directly_imported_by(m) if d.startswith(PACKAGE)) for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = edges.get(node, [])
            if i < len(targets):
                work.append((node, i + 1))
                nxt = targets[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    assert cycles == []


@pytest.mark.parametrize("unit", PURE)
def test_checks_and_engine_import_no_sdk_no_pydantic_no_config(unit: str) -> None:
    g = graph()
    found = []
    for module in _own_modules():
        if _unit(module) != unit:
            continue
        for imported in g.find_modules_directly_imported_by(module):
            if imported.split(".")[0] in NOT_IN_PURE or _unit(imported) == "config":
                found.append(f"{module} -> {imported}")
    assert found == []


def test_importing_a_check_loads_only_what_it_needs() -> None:
    """At run time too (the top level imports lazily): a check loads a handful of the project's modules."""
    code = (
        "import sys, otel_toolcall_eval.checks.selection, otel_toolcall_eval.engine\n"
        "own = [m for m in sys.modules if m.startswith('otel_toolcall_eval')]\n"
        "heavy = [m for m in ('pydantic', 'yaml', 'opentelemetry.sdk') if m in sys.modules]\n"
        "print(len(own), heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(" ", 1)
    assert int(out[0]) < 25 and out[1].strip() == "[]"


# what the processor's import must not load: only a command, the guard or a config that uses it needs them
# (the footprint suite's import figure; each was ~3-4 % of it, docs/performance.md)
NOT_AT_THE_PROCESSORS_IMPORT = (
    "otel_toolcall_eval.dataset.models",  # the case models: the config needs only the slice names
    "otel_toolcall_eval.dataset.io",
    "otel_toolcall_eval.engine.guard",  # config.guard checks policy names against it when guard.actions is set
    "yaml",  # EvalConfig.load reads YAML; from_dict and the defaults do not
)


def test_importing_the_processor_loads_neither_the_dataset_nor_the_guard_nor_yaml() -> None:
    code = (
        "import sys, otel_toolcall_eval.processor\n"
        f"print([m for m in {NOT_AT_THE_PROCESSORS_IMPORT!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# the SDK's private span, processor and exporter fields the project reads (``_sdk`` probes them at import)
_SDK_PRIVATE = frozenset(
    {
        "_attributes",
        "_dict",
        "_parent",
        "_events",
        "_links",
        "_context",
        "_resource",
        "_instrumentation_scope",
        "_status",
        "_start_time",
        "_end_time",
        "_status_code",
        "_dq",
        "_on_ending",
        "_translate_data",
        "_active_span_processor",
    }
)


def test_private_sdk_fields_are_read_only_in_the_sdk_module() -> None:
    """'Every private SDK access in one module': an SDK upgrade means reading ``_sdk.py``, nothing else."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "src" / PACKAGE
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "_sdk.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in _SDK_PRIVATE
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}: .{node.attr}")
    assert not found, "private SDK fields read outside _sdk.py:\n" + "\n".join(found)


# --- the test tree ----------------------------------------------------------------------------------------------


def _imported_test_modules(source: str, module: str) -> list[tuple[int, str]]:
    """The test modules (``test_*``) that ``source``, the module named ``module`` (``tests.guard.test_x``), imports,
    at any level (function-level imports too), relative imports resolved: (line, imported module)."""
    import ast

    package = module.rsplit(".", 1)[0].split(".")
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            stem = ".".join([*base, *([node.module] if node.module else [])])
            targets = [stem, *(f"{stem}.{alias.name}" for alias in node.names)]
        else:
            continue
        found += [(node.lineno, t) for t in targets if t.rsplit(".", 1)[-1].startswith("test_")]
    return found


@pytest.mark.parametrize(
    "source",
    [
        "from .test_serve import wait_until",
        "from tests.offline.test_eval import GOOD",
        "from ..test_engine_parity import CONFIG",
        "from . import test_serve",
        "import tests.integration.test_serve",
        "def f():\n    from .test_serve import DEMO_CONFIG",
    ],
)
def test_an_import_of_a_test_module_is_found(source: str) -> None:
    assert _imported_test_modules(source, "tests.integration.test_other"), source


def test_test_modules_do_not_import_each_other() -> None:
    """Shared test code lives in ``tests/helpers.py`` (and the fakes and receivers beside the tests that use them:
    ``tests/framework_scenario.py``, ``tests/integration/otlp_receiver.py``, ...), never in a test module another
    imports: importing a test module runs its module-level code and collects its tests twice under another name."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = []
    for path in sorted((root / "tests").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for line, imported in _imported_test_modules(path.read_text(encoding="utf-8"), module):
            found.append(f"{path.relative_to(root)}:{line}: imports {imported}")
    assert not found, "test modules importing test modules (move the shared part to tests/helpers.py):\n" + "\n".join(
        found
    )


def _fixtures(source: str) -> list[tuple[int, str, str]]:
    """The pytest fixtures ``source`` defines: (line, name, what makes it: decorator, arguments and body, docstring
    left out)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = [ast.unparse(d) for d in node.decorator_list]
            if any(d.split("(")[0].endswith("fixture") for d in decorators):
                body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                made = "\n".join([*decorators, ast.unparse(node.args), *map(ast.unparse, body)])
                found.append((node.lineno, node.name, made))
    return found


def test_a_fixture_that_tests_share_is_defined_once() -> None:
    """A fixture two test files define alike lives once in ``tests/conftest.py`` (pytest hands it to every test):
    copies drift apart, and a fix to one leaves the others as they were."""
    from collections import defaultdict

    root = Path(__file__).resolve().parents[1]
    places: defaultdict[str, list[str]] = defaultdict(list)
    for path in sorted((root / "tests").rglob("*.py")):
        for line, name, made in _fixtures(path.read_text(encoding="utf-8")):
            places[made].append(f"{path.relative_to(root)}:{line}: {name}")
    copies = [" ~ ".join(where) for where in places.values() if len(where) > 1]
    assert not copies, "fixtures defined more than once (move one to tests/conftest.py):\n" + "\n".join(copies)


def test_a_copied_fixture_is_found() -> None:
    source = "@pytest.fixture\ndef a(tmp_path):\n    return tmp_path / 'x'\n"
    ((line, name, made),) = _fixtures(source)
    assert (line, name) == (2, "a")
    assert (
        _fixtures(source.replace("def a", "def b").replace("\n    return", '\n    """Why."""\n    return'))[0][2]
        == made
    )
    assert _fixtures(source.replace("'x'", "'y'"))[0][2] != made


# The test tree mirrors the source tree: a unit test module sits in the directory of the source package it tests
# (tests/checks/ for otel_toolcall_eval/checks/, tests/offline/reports/ for offline/reports/) and imports from that
# package; a test module at the top of tests/ is named after the top-level module it tests (test_processor*.py for
# processor.py, test_sdk_*.py for _sdk.py). tests/integration/ holds the end-to-end tests (real frameworks and
# peers) and tests/fixtures/ recorded data; what tests no one module is listed below with why.
TESTS_OUTSIDE_THE_MIRROR = ("integration", "fixtures")
CROSS_CUTTING = {
    "test_architecture.py": "the layering of the whole package and the test tree",
    "test_bench_smoke.py": "benchmarks/ (make bench) in its --quick sizes",
    "test_compiled_build.py": "the mypyc build of setup.py's COMPILED modules",
    "test_deploy_config.py": "deploy/ and docker-compose.yml against the metric and attribute names",
    "test_docs.py": "docs/ and the README against the code they are generated from",
    "test_docs_site.py": "the mkdocs site, built --strict",
    "test_fuzz_inputs.py": "every reader of an untrusted file (replay, dataset, run files)",
    "test_gateway_config.py": "collector-config/ (the Collector's routing in front of serve)",
    "test_pictures.py": "docs/ pictures against the code that draws them",
    "test_public_api.py": "the package's __all__ and the names the README imports",
    "test_release.py": "the release workflow, cibuildwheel's settings and the Makefile",
    # through the public face (ToolCallEvalProcessor) or the helpers, importing nothing of the package they test
    "harvest/test_parity.py": "harvest through the CLI's commands: processor, OTLP file, harvest, eval agree",
    "offline/reports/test_escaping.py": "the reports through `eval` and `pr-comment` (the CLI)",
    "online/test_fuzz_span_path.py": "the online pipeline through ToolCallEvalProcessor",
    "online/test_lifecycle.py": "the online pipeline's flush and shutdown through ToolCallEvalProcessor",
    "online/test_memory_bounds.py": "the online pipeline's memory through ToolCallEvalProcessor",
    "online/test_plain_span_path.py": "the online pipeline's plain span path through ToolCallEvalProcessor",
    "online/test_remote_parents.py": "the online pipeline through ToolCallEvalProcessor",
    "conventions/test_vercel_ai.py": "a recorded shape through replay and ToolCallEvalProcessor",
    "engine/test_parity.py": "the engine's one scorer through its adapters: processor, replay, offline eval",
    "guard/test_mcp.py": "the guard's MCP proxy run as a user runs it (a subprocess)",
}


def _imported_package_modules(source: str) -> set[str]:
    """Every ``otel_toolcall_eval`` module ``source`` imports, at any level (``from otel_toolcall_eval import x``
    gives ``otel_toolcall_eval.x``)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] == PACKAGE}


def _misplaced_test_modules(tests: Path, source: Path) -> list[str]:
    top_modules = {p.stem.lstrip("_") for p in source.glob("*.py") if p.stem != "__init__"}
    found = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        if rel.parts[0] in TESTS_OUTSIDE_THE_MIRROR or rel.as_posix() in CROSS_CUTTING:
            continue
        folder = rel.parts[:-1]
        if not folder:
            stem = path.stem.removeprefix("test_")
            if not any(stem == m or stem.startswith(m + "_") for m in top_modules):
                found.append(f"{rel}: no top-level module {stem}.py: move it to the package it tests, or list it")
            continue
        if not source.joinpath(*folder, "__init__.py").exists():
            found.append(f"{rel}: tests/{'/'.join(folder)}/ mirrors no package of src/{PACKAGE}/")
            continue
        package = ".".join((PACKAGE, *folder))
        imported = _imported_package_modules(path.read_text(encoding="utf-8"))
        if not any(name == package or name.startswith(package + ".") for name in imported):
            found.append(f"{rel}: imports nothing of {package}: move it to the package it tests, or list it")
    return found


def test_the_test_tree_mirrors_the_source_tree() -> None:
    root = Path(__file__).resolve().parents[1]
    found = _misplaced_test_modules(root / "tests", root / "src" / PACKAGE)
    assert not found, "test modules outside the mirror of src/ (see CROSS_CUTTING):\n" + "\n".join(found)
    listed = [name for name in CROSS_CUTTING if not (root / "tests" / name).exists()]
    assert not listed, f"CROSS_CUTTING lists test modules that do not exist: {listed}"


def test_a_misplaced_test_module_is_found(tmp_path: Path) -> None:
    source = tmp_path / "src"
    for folder in ("checks", "serve"):
        (source / folder).mkdir(parents=True)
        (source / folder / "__init__.py").write_text("")
    (source / "processor.py").write_text("")
    tests = tmp_path / "tests"
    for folder in ("checks", "serve", "nowhere"):
        (tests / folder).mkdir(parents=True)
    (tests / "test_processor_fuzz.py").write_text("")  # named after processor.py: in place
    (tests / "test_schema.py").write_text("")  # a check's test at the top
    (tests / "checks" / "test_schema.py").write_text(f"from {PACKAGE}.checks.schema import x\n")  # in place
    (tests / "serve" / "test_encode.py").write_text(f"from {PACKAGE}.checks import schema\n")  # tests checks/
    (tests / "nowhere" / "test_x.py").write_text(f"import {PACKAGE}.checks\n")
    found = _misplaced_test_modules(tests, source)
    assert [line.split(":")[0] for line in found] == ["nowhere/test_x.py", "serve/test_encode.py", "test_schema.py"]
