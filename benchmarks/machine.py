"""The machine a run came from: figures are ratios, but the reader still needs to know what ran them."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path
from typing import Any

PACKAGES = (
    "otel-toolcall-eval",
    "opentelemetry-sdk",
    "orjson",
    "jsonschema-rs",
    "pydantic",
    "ragas",
    "langchain-community",
    "deepeval",
)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def package_build() -> str:
    """Which build of the package ran: the opt-in compiled one (setup.py, mypyc extensions installed beside the
    source) or pure Python (an editable or plain install), told by the files the package imports from."""
    import importlib.machinery

    import otel_toolcall_eval

    root = Path(otel_toolcall_eval.__file__ or "").parent
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    extensions = [p for p in root.rglob("*") if p.name.endswith(suffixes)]
    return f"compiled (mypyc, {len(extensions)} modules)" if extensions else "pure Python"


def machine_info() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "nproc": usable_cores(),
        "cpu_model": cpu_model(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "packages": versions,
        "build": package_build(),
    }
