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
import struct
import sys
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


def _extensions() -> list[Path]:
    """The installed package's extension modules: one stub per compiled module and the mypyc group's shared library
    beside the package."""
    import otel_toolcall_eval

    root = Path(otel_toolcall_eval.__file__ or "").parent
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return [p for p in [*root.rglob("*"), *root.parent.glob("otel_toolcall_eval__mypyc*")] if p.name.endswith(suffixes)]


def elf_sections(path: Path) -> set[str]:
    """The section names of an ELF file, from its section header table (the standard library reads no ELF)."""
    data = path.read_bytes()
    order = "<" if data[5] == 1 else ">"
    wide = data[4] == 2  # ELFCLASS64
    (table,) = struct.unpack_from(order + ("Q" if wide else "I"), data, 0x28 if wide else 0x20)
    entry, count, names_index = struct.unpack_from(order + "HHH", data, 0x3A if wide else 0x2E)

    def header(i: int) -> tuple[int, int]:
        base = table + i * entry
        (name,) = struct.unpack_from(order + "I", data, base)
        (offset,) = struct.unpack_from(order + ("Q" if wide else "I"), data, base + (0x18 if wide else 0x10))
        return name, offset

    strings = header(names_index)[1]
    return {data[strings + n : data.index(b"\0", strings + n)].decode() for n, _ in map(header, range(count))}


@pytest.mark.skipif(not EXPECT_COMPILED, reason="the compiled build's extensions (make test-compiled)")
@pytest.mark.skipif(os.environ.get("MYPYC_DEBUG_LEVEL", "0") != "0", reason="a debug build was asked for")
def test_the_extensions_ship_without_debug_information_or_local_symbols() -> None:
    """setup.py builds at mypyc's debug level 0 and links with the symbol table stripped (on Linux): 3.3 MB of the
    7.0 MB shared library was DWARF and local symbols, installed for every user (the core install's 40 MB target).
    ELF only (Linux); Mach-O and PE keep their debug information outside the binary anyway."""
    extensions = _extensions()
    assert len(extensions) == len(compiled_paths()) + 1  # a stub each, and the group's library
    if not sys.platform.startswith("linux"):
        pytest.skip("ELF only")
    for path in extensions:
        sections = elf_sections(path)
        assert ".dynsym" in sections and ".text" in sections, (path.name, sections)  # the reader reads sections
        assert not {s for s in sections if s.startswith(".debug") or s == ".symtab"}, (path.name, sorted(sections))


@pytest.mark.skipif(not EXPECT_COMPILED, reason="the compiled build's extensions (make test-compiled)")
def test_the_compiled_modules_ship_their_source_as_stubs_for_type_checkers() -> None:
    """The package is typed (``py.typed``) and a type checker reads ``.py`` or ``.pyi``, never an extension: each
    compiled module's source ships beside it as ``.pyi`` (setup.py's ``_BuildPy``), not as ``.py``, whose bytecode
    pip would compile at install and nothing would load."""
    import otel_toolcall_eval

    site = Path(otel_toolcall_eval.__file__ or "").parent.parent
    assert (site / "otel_toolcall_eval" / "py.typed").is_file()
    for path in compiled_paths():
        assert (site / path).with_suffix(".pyi").read_text(encoding="utf-8") == (ROOT / "src" / path).read_text(
            encoding="utf-8"
        ), path
        assert not (site / path).exists(), path
