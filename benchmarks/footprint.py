"""What ``pip install otel-toolcall-eval`` gives a user: packages, installed size, import time of the processor.

A wheel of this checkout (the pure build: what the sdist installs, and what a platform without a compiled wheel
gets) is installed with its real dependencies into a fresh venv, as a user would (no ``--no-deps``). Counted:
every distribution pip lists there but pip and setuptools (the venv's own), and the bytes of every file under
site-packages that they did not bring, ``.pyc`` files included (pip compiles them at install). The import time
is the median wall time of a fresh interpreter importing ``otel_toolcall_eval.processor``, as a ratio against one
importing the SDK's ``opentelemetry.sdk.trace`` (the part of it every user pays for anyway) in the same round.

Not in ``--quick``: it builds a wheel and a venv (pip's cache makes that ~1 min; the CI smoke run stays short).
tests/integration/test_core_install.py uses ``core_env`` to run the processor and the CLI there.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Figure, Sizes, unavailable

ROOT = Path(__file__).resolve().parents[1]
MAX_MB = 40.0  # the core install's target (issue 30)
VENV_OWN = ("pip", "setuptools", "_distutils_hack", "pkg_resources", "distutils-precedence.pth")


def core_env(workdir: Path) -> Path:
    """A fresh venv under ``workdir`` with a wheel of this checkout and its core dependencies; its python."""
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
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], check=True)
    return python


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def distributions(python: Path) -> list[str]:
    """The distributions installed in the venv, but the venv's own (pip, setuptools)."""
    out = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json"], check=True, capture_output=True, text=True
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


def _import_seconds(python: Path, module: str) -> float:
    started = time.perf_counter()
    subprocess.run([str(python), "-c", f"import {module}"], check=True)
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


def run(sizes: Sizes) -> list[Figure]:
    ids = ("footprint.size", "footprint.import")
    titles = ("core install (pip install otel-toolcall-eval): MB installed", "import of the processor (core install)")
    targets = (f"< {MAX_MB:g} MB", "-")  # the import: reported, no target yet (docs/install.md says where it goes)
    if sizes.name == "quick":
        return [
            unavailable(i, t, g, "not in --quick (builds a wheel and a venv)")
            for i, t, g in zip(ids, titles, targets, strict=True)
        ]
    with tempfile.TemporaryDirectory(prefix="toolcall-footprint-") as tmp:
        python = core_env(Path(tmp))
        dists = distributions(python)
        size = installed_bytes(site_packages(python)) / 1e6
        ours, sdk = import_times(python, min(sizes.rounds, 11))
    ratio = ours / sdk
    return [
        Figure(
            ids[0],
            titles[0],
            f"{size:.1f} MB, {len(dists)} packages",
            f"{MAX_MB:g} MB",
            size / MAX_MB,
            targets[0],
            "met" if size < MAX_MB else "missed",
            note="the pure wheel of this checkout and its dependencies in a fresh venv (pip, setuptools not counted)",
            data={"mb": size, "packages": dists},
        ),
        Figure(
            ids[1],
            titles[1],
            f"{ours * 1000:.0f} ms",
            f"{sdk * 1000:.0f} ms (opentelemetry.sdk.trace)",
            ratio,
            targets[1],
            "info",
            note="a fresh interpreter each, median of interleaved rounds; most of it is building the config's "
            "pydantic models",
            data={"processor_seconds": ours, "sdk_seconds": sdk},
        ),
    ]
