"""The one table of extras (``extras.py``) against pyproject.toml, and the CLI's exit 2 for a missing one."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from otel_toolcall_eval import extras

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _closure(extra: str) -> set[str]:
    """The distribution names an extra installs, extras of this project it includes expanded."""
    out: set[str] = set()
    for requirement in PROJECT["optional-dependencies"][extra]:
        name = requirement.split("[", 1)[0].split(">", 1)[0].split("=", 1)[0].split("<", 1)[0].strip()
        if name == PROJECT["name"]:
            for included in requirement.split("[", 1)[1].rstrip("]").split(","):
                out |= _closure(included)
        else:
            out.add(importlib.metadata.distribution(name).metadata["Name"].lower().replace("_", "-"))
    return out


def _requires(dist: str) -> set[str]:
    """A distribution and everything it installs (its unconditional requirements, transitively)."""
    seen: set[str] = set()
    todo = [dist]
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo.extend(
            r.split(";")[0]
            .split("[")[0]
            .split(" ")[0]
            .split(">")[0]
            .split("=")[0]
            .split("<")[0]
            .split("~")[0]
            .split("!")[0]
            for r in requires
            if "extra ==" not in r
        )
    return seen


@pytest.mark.parametrize("extra", sorted(set(extras.EXTRAS) - {"semantic"}))  # semantic: its own venv (torch)
def test_every_module_of_an_extra_comes_from_that_extra(extra: str) -> None:
    brought: set[str] = set()
    for dist in _closure(extra):
        brought |= _requires(dist)
    providers = importlib.metadata.packages_distributions()
    for module in extras.EXTRAS[extra]:
        top = module.split(".")[0]
        if top == "opentelemetry":  # a namespace package: every opentelemetry distribution provides it
            assert importlib.util.find_spec(module) is not None
            continue
        dists = {d.lower().replace("_", "-") for d in providers[top]}
        assert dists & brought, f"{module} ({dists}) is not installed by the '{extra}' extra"


def test_every_extra_of_the_table_is_in_pyproject() -> None:
    assert set(extras.EXTRAS) <= set(PROJECT["optional-dependencies"])
    assert {"otlp", "eval", "judge", "serve", "prometheus", "zstd", "redis", "units", "semantic", "all"} <= set(
        PROJECT["optional-dependencies"]
    )


def test_the_core_has_no_optional_library() -> None:
    core = " ".join(PROJECT["dependencies"]).lower()
    for library in ("scipy", "rich", "httpx", "requests", "tenacity", "rapidfuzz", "exporter-otlp", "jsonschema>"):
        assert library not in core


def test_a_missing_module_maps_to_the_smallest_extra_that_brings_it() -> None:
    def missing(name: str) -> str | None:
        found = extras.missing_extra(ModuleNotFoundError(name=name), "x")
        return None if found is None else found.extra

    assert missing("prometheus_client") == "prometheus"
    assert missing("opentelemetry.exporter.otlp.proto.grpc.trace_exporter") == "otlp"
    assert missing("grpc") == "otlp"
    assert missing("google") == "otlp"  # protobuf missing: its namespace package is what the import reports
    assert missing("rich.table") == "cli"
    assert missing("scipy.optimize") == "eval"
    assert missing("zstandard") == "zstd"
    assert missing("no_such_module") is None


def _cli_without(modules: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a child whose ``modules`` cannot be imported (``sys.modules[name] = None``), as without the extra."""
    code = (
        "import sys\n"
        + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
        + "from otel_toolcall_eval.cli import main\n"
        + f"sys.exit(main({list(args)!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("missing", "args", "line"),
    [
        (["prometheus_client", "opentelemetry.exporter.prometheus"], ["serve", "--prometheus-port", "0"], "prometheus"),
        (["prometheus_client", "opentelemetry.exporter.prometheus"], ["demo", "--prometheus-port", "0"], "prometheus"),
        (["scipy"], ["eval", "--dataset", "d.jsonl", "--runs", "r.jsonl"], "eval"),
        (["rich", "rich.console"], ["replay", "t.json"], "eval"),
    ],
)
def test_a_command_or_option_without_its_extra_is_exit_2(missing: list[str], args: list[str], line: str) -> None:
    done = _cli_without(missing, *args)
    assert done.returncode == 2, done.stderr
    assert f"pip install 'otel-toolcall-eval[{line}]'" in done.stderr
    assert "Traceback" not in done.stderr
