"""What ``pip install otel-toolcall-eval`` gives a user: packages, installed size, import time of the processor.

Both builds a user can get are installed, each with its real dependencies into a fresh venv, as a user would (no
``--no-deps``): the pure wheel of this checkout (what the sdist installs, and what a platform without a compiled
wheel gets) and the compiled one (what pip takes on Linux, macOS and Windows with CPython 3.10-3.14: the mypyc
wheel ``make`` builds into ``dist/compiled`` for ``make bench`` and ``make test-compiled``, the way the release
builds it). Counted: every distribution pip lists there but pip and setuptools (the venv's own), and the bytes of
every file under site-packages that they did not bring, ``.pyc`` files included (pip compiles them at install). The
import time is the median wall time of a fresh interpreter importing ``otel_toolcall_eval.processor``, as a ratio
against one importing the SDK's ``opentelemetry.sdk.trace`` (the part of it every user pays for anyway) in the same
round.

The compiled wheel is not built here (a few minutes of mypyc and C compiler): without one in ``dist/compiled``, or
with one older than the source it was built from, its rows say so instead of measuring a wheel of other code.
Not in ``--quick``: it builds a wheel and two venvs (pip's cache makes that ~2 min; the CI smoke run stays short).
tests/integration/test_core_install.py uses ``core_env`` to run the processor and the CLI there.
"""

from __future__ import annotations

import functools
import importlib.machinery
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Figure, Sizes, part, unavailable

ROOT = Path(__file__).resolve().parents[1]
MAX_MB = 40.0  # the core install's target (issue 30), for each build
COMPILED_WHEELS = ROOT / "dist" / "compiled"  # the Makefile's WHEEL_DIR
# what the Makefile rebuilds that wheel from (its PACKAGE_SOURCES)
SOURCES = ("setup.py", "pyproject.toml", "src/**/*.py", "src/**/*.yaml")
VENV_OWN = ("pip", "setuptools", "_distutils_hack", "pkg_resources", "distutils-precedence.pth")


def venv_env() -> dict[str, str]:
    """The environment for the venv's own python: this one's without ``PYTHONPATH`` and ``PYTHONHOME``.

    ``make bench-pure`` puts ``src/`` on ``PYTHONPATH``, where the dev venv's editable install left
    ``otel_toolcall_eval.egg-info``: pip in the fresh venv then took the package for installed and skipped the wheel
    ("already installed with the same version"), ``pip list`` still counted it, and the processor was imported from
    ``src/``; the core install measured 4.1 MB (this package) short, 32.3 MB for 36.4 on ``07617d2``."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def core_env(workdir: Path, wheel: Path | None = None) -> Path:
    """A fresh venv under ``workdir`` with ``wheel`` (by default a pure wheel of this checkout, built here) and its
    core dependencies; its python."""
    if wheel is None:
        wheels = workdir / "wheels"
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(ROOT)],
            check=True,
            env={**os.environ, "OTEL_TOOLCALL_EVAL_COMPILE": "0"},  # the pure build
            cwd=workdir,
        )
        (wheel,) = wheels.glob("otel_toolcall_eval-*.whl")
    venv = workdir / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], check=True, env=venv_env())
    if not (site_packages(python) / "otel_toolcall_eval").is_dir():  # a size without the package is no figure
        raise RuntimeError(f"pip did not install {wheel.name} into {venv}")
    return python


def compiled_wheel() -> tuple[Path | None, str]:
    """The compiled wheel of this checkout for this interpreter in ``dist/compiled``, or None and why not."""
    tag = f"-cp{sys.version_info.major}{sys.version_info.minor}-"
    wheels = sorted(w for w in COMPILED_WHEELS.glob("otel_toolcall_eval-*.whl") if tag in w.name)
    if not wheels:
        return None, f"no compiled wheel for this interpreter in {COMPILED_WHEELS.relative_to(ROOT)}: "
    newest_source = max(p.stat().st_mtime for pattern in SOURCES for p in ROOT.glob(pattern))
    if wheels[-1].stat().st_mtime < newest_source:
        return None, f"{wheels[-1].name} is older than the source: "
    return wheels[-1], ""


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        env=venv_env(),
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def distributions(python: Path) -> list[str]:
    """The distributions installed in the venv, but the venv's own (pip, setuptools)."""
    out = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json"], check=True, capture_output=True, text=True, env=venv_env()
    )
    return sorted(d["name"] for d in json.loads(out.stdout) if d["name"].lower() not in ("pip", "setuptools"))


def installed_bytes(site: Path) -> int:
    total = 0
    for entry in site.iterdir():
        if entry.name.split("-")[0] in VENV_OWN or entry.name in VENV_OWN:
            continue
        paths = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
        total += sum(p.stat().st_size for p in paths)
    return total


def own_bytes(site: Path) -> dict[str, int]:
    """This package's share of the install by kind: its extension modules (the mypyc group's shared library sits
    beside the package, one stub per compiled module inside it), sources (``.pyi`` too), the bytecode pip compiled,
    the rest."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    kinds = {"extensions": 0, "sources": 0, "bytecode": 0, "other": 0}
    files = [p for p in (site / "otel_toolcall_eval").rglob("*") if p.is_file()]
    for path in [*files, *site.glob("otel_toolcall_eval__mypyc*")]:
        kind = (
            "extensions"
            if path.name.endswith(suffixes)
            else {".py": "sources", ".pyi": "sources", ".pyc": "bytecode"}.get(path.suffix, "other")
        )
        kinds[kind] += path.stat().st_size
    return kinds


def _import_seconds(python: Path, module: str) -> float:
    started = time.perf_counter()
    subprocess.run([str(python), "-c", f"import {module}"], check=True, env=venv_env())
    return time.perf_counter() - started


def import_times(python: Path, rounds: int) -> tuple[float, float]:
    """Median seconds to import the processor and the SDK's trace module, each in a fresh interpreter,
    interleaved; one warm-up of each first (the ``.pyc`` files are written at install, the disk cache is not)."""
    _import_seconds(python, "otel_toolcall_eval.processor")
    _import_seconds(python, "opentelemetry.sdk.trace")
    ours, sdk = [], []
    for _ in range(rounds):
        ours.append(_import_seconds(python, "otel_toolcall_eval.processor"))
        sdk.append(_import_seconds(python, "opentelemetry.sdk.trace"))
    return statistics.median(ours), statistics.median(sdk)


BUILDS = {
    # id suffix: (which build, how the row says where its wheel came from)
    "": ("pure", "the pure wheel of this checkout"),
    "_compiled": ("compiled", "the compiled wheel of this checkout (dist/compiled, as make bench installs it)"),
}


def rows(suffix: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """The ids and titles of one build's two figures."""
    build = BUILDS[suffix][0]
    return (
        (f"footprint.size{suffix}", f"core install, {build} build (pip install otel-toolcall-eval): MB installed"),
        (f"footprint.import{suffix}", f"import of the processor (core install, {build} build)"),
    )


def measure(suffix: str, wheel: Path | None, rounds: int) -> list[Figure]:
    """``footprint.size`` and ``footprint.import`` of one build (ids suffixed ``_compiled`` for the compiled one)."""
    where = BUILDS[suffix][1]
    (size_id, size_title), (import_id, import_title) = rows(suffix)
    with tempfile.TemporaryDirectory(prefix="toolcall-footprint-") as tmp:
        python = core_env(Path(tmp), wheel)
        dists = distributions(python)
        site = site_packages(python)
        size = installed_bytes(site) / 1e6
        own = own_bytes(site)
        ours, sdk = import_times(python, rounds)
    own_mb = {kind: round(n / 1e6, 3) for kind, n in own.items()}
    return [
        Figure(
            size_id,
            size_title,
            f"{size:.1f} MB, {len(dists)} packages",
            f"{MAX_MB:g} MB",
            size / MAX_MB,
            f"< {MAX_MB:g} MB",
            "met" if size < MAX_MB else "missed",
            note=f"{where} and its dependencies in a fresh venv (pip, setuptools not counted); this package "
            f"{sum(own.values()) / 1e6:.1f} MB of it, extension modules {own['extensions'] / 1e6:.1f} MB",
            data={"mb": size, "packages": dists, "own_mb": own_mb, "wheel": wheel.name if wheel else None},
        ),
        Figure(
            import_id,
            import_title,
            f"{ours * 1000:.0f} ms",
            f"{sdk * 1000:.0f} ms (opentelemetry.sdk.trace)",
            ours / sdk,
            "-",  # reported, no target yet (docs/install.md says where it goes)
            "info",
            note="a fresh interpreter each, median of interleaved rounds; the SDK's import is a fifth of it, "
            "pydantic's own a third, the config's pydantic models an eighth (docs/install.md)",
            data={"processor_seconds": ours, "sdk_seconds": sdk},
        ),
    ]


def run(sizes: Sizes) -> list[Figure]:
    figures: list[Figure] = []
    rounds = min(sizes.rounds, 11)
    for suffix, (build, _) in BUILDS.items():
        targets = (f"< {MAX_MB:g} MB", "-")
        wheel, why = None, ""
        if sizes.name == "quick":
            why = "not in --quick (builds a wheel and a venv)"
        elif build == "compiled":
            wheel, why = compiled_wheel()
            why += "`make .venv-bench/.stamp-installed` builds it" if wheel is None else ""
        if why:
            figures += [unavailable(i, t, g, why) for (i, t), g in zip(rows(suffix), targets, strict=True)]
        else:
            figures += part(rows(suffix), functools.partial(measure, suffix, wheel, rounds))
    return figures
