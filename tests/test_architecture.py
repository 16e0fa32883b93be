"""The layout shows the architecture, one way: records and policy objects <- pure checks <- engine <- adapters <- CLI.

Checked on the import graph grimp builds from the source (every import, including function-level and
``TYPE_CHECKING`` ones): no module imports a layer above its own, no two modules import each other (directly or
around a cycle), and the checks and the engine load neither OpenTelemetry nor pydantic nor the config.
"""

from __future__ import annotations

import subprocess
import sys
from functools import cache

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
    ("records", "policy", "attributes", "_json", "_version"),  # plain records, policy objects, names
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
        "from tests.test_offline_eval import GOOD",
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
