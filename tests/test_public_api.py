"""The public surface is small, explicit and pinned: what ``__all__`` lists, every name the README tells users to
import, and nothing loaded before it is used."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import otel_toolcall_eval

PUBLIC = [
    "AttributeConvention",
    "ConfigError",
    "Convention",
    "ConventionRegistry",
    "EvalConfig",
    "ToolCallEvalProcessor",
    "ToolSchema",
    "__version__",
    "default_registry",
]


def test_the_exported_names_are_pinned() -> None:
    assert sorted(otel_toolcall_eval.__all__) == PUBLIC
    assert dir(otel_toolcall_eval) == PUBLIC


@pytest.mark.parametrize("name", PUBLIC)
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(otel_toolcall_eval, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Scorer'"):
        otel_toolcall_eval.Scorer  # noqa: B018 - the access is the test


def test_every_top_level_import_in_the_readme_is_public() -> None:
    root = Path(__file__).parents[1]
    readme = "".join(
        p.read_text(encoding="utf-8") for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    )
    names = set()
    for imported in re.findall(r"from otel_toolcall_eval import ([A-Za-z_, ]+)", readme):
        names |= {n.strip() for n in imported.split(",") if n.strip()}
    names |= set(re.findall(r"otel_toolcall_eval\.([A-Za-z_]+)\(", readme))
    assert names and names <= set(PUBLIC)


def test_importing_the_package_loads_no_processor_until_asked() -> None:
    code = (
        "import sys, otel_toolcall_eval\n"
        "before = 'otel_toolcall_eval.processor' in sys.modules\n"
        "otel_toolcall_eval.ToolCallEvalProcessor\n"
        "print(before, 'otel_toolcall_eval.processor' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
