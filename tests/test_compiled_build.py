"""The opt-in compiled build (setup.py): what it lists exists, and each venv imports the build it was meant to have.

`make test-compiled` installs the package with ``OTEL_TOOLCALL_EVAL_COMPILE=1`` into ``.venv-compiled`` and sets
``OTEL_TOOLCALL_EVAL_EXPECT_COMPILED=1``: there every listed module must be a mypyc extension, or the compiled
suites would silently test the pure source. Everywhere else (``.venv``, an editable install) none may be: an
editable dev install stays pure, so a monkeypatch or a traceback in a test means what it says.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPECT_COMPILED = os.environ.get("OTEL_TOOLCALL_EVAL_EXPECT_COMPILED") == "1"


def compiled_paths() -> tuple[str, ...]:
    """setup.py's ``COMPILED`` tuple, read without running setup.py."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "COMPILED" for t in node.targets):
            paths: tuple[str, ...] = ast.literal_eval(node.value)
            return paths
    raise AssertionError("setup.py has no COMPILED tuple")


def module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def is_extension(module: str) -> bool:
    origin = importlib.import_module(module).__file__ or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def test_every_listed_module_exists_and_the_public_protocol_stays_interpreted() -> None:
    paths = compiled_paths()
    assert len(paths) == len(set(paths))
    for path in paths:
        assert (ROOT / "src" / path).is_file(), path
    # the runtime-checkable Protocol and the dataclass users subclass cannot be compiled (setup.py), and what
    # re-exports them stays with them
    for interpreted in ("conventions/protocol.py", "conventions/attribute.py", "conventions/base.py"):
        assert f"otel_toolcall_eval/{interpreted}" not in paths


@pytest.mark.parametrize("path", compiled_paths())
def test_the_venv_imports_the_build_it_was_installed_with(path: str) -> None:
    module = module_name(path)
    assert is_extension(module) is EXPECT_COMPILED, (module, importlib.import_module(module).__file__)


def test_the_interpreted_modules_still_run_from_source_and_use_the_compiled_ones() -> None:
    """Replay (never compiled) imports the compiled processor and records: a compiled build mixes both, in one
    package."""
    from otel_toolcall_eval import records
    from otel_toolcall_eval.replay import engine

    assert (engine.__file__ or "").endswith(".py")
    assert is_extension(records.__name__) is EXPECT_COMPILED


def test_the_public_convention_classes_keep_their_interpreted_home_and_use_the_compiled_parts() -> None:
    """``AttributeConvention`` and ``Convention`` stay interpreted (users subclass the one and ``isinstance`` the
    other) at their public paths; the registry they go into and the span reading under them are compiled."""
    from otel_toolcall_eval import AttributeConvention, Convention, ConventionRegistry
    from otel_toolcall_eval.conventions import attribute, base, protocol, registry, spans

    assert base.AttributeConvention is AttributeConvention and AttributeConvention.__module__ == attribute.__name__
    assert base.Convention is Convention and base.ConventionRegistry is ConventionRegistry
    assert not is_extension(attribute.__name__) and not is_extension(protocol.__name__)
    assert is_extension(registry.__name__) is EXPECT_COMPILED and is_extension(spans.__name__) is EXPECT_COMPILED
