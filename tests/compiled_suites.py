"""The core suites, run against an installed compiled wheel: one list, one runner, for both places that test one.

`make test-compiled` (CI: the Linux wheel built here) and the release's cibuildwheel ``test-command``
(pyproject.toml's ``[tool.cibuildwheel]``: every wheel it builds, on Linux, macOS and Windows) both run
``python tests/compiled_suites.py`` with the venv holding the wheel; tests/test_release.py checks that they do.
``OTEL_TOOLCALL_EVAL_EXPECT_COMPILED=1`` makes tests/test_compiled_build.py fail unless every module setup.py lists
is an extension there, so the suites cannot silently test the pure source. The package is imported from
site-packages: the source lies under ``src/``, which is never on the path here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# What the compiled modules run under (setup.py's COMPILED): the checks, the processor and its pipeline, conventions,
# lifecycle, parity with the engine, memory bounds, replay's engine, offline scoring, the public API, the guard.
SUITES = (
    "tests/test_compiled_build.py",
    "tests/checks/test_checks.py",
    "tests/test_processor.py",
    "tests/conventions/test_conventions.py",
    "tests/online",
    "tests/online/test_lifecycle.py",
    "tests/engine/test_parity.py",
    "tests/online/test_memory_bounds.py",
    "tests/replay/test_engine.py",
    "tests/online/test_fuzz_span_path.py",
    "tests/offline/test_eval.py",
    "tests/offline/test_fast_paths.py",
    "tests/test_public_api.py",
    "tests/test_sdk_fields.py",
    "tests/online/test_late_spans.py",
    "tests/serve/test_encode.py",
    # the guard's decision and record (compiled), with the plug-in around a plain function
    "tests/guard/test_guard.py",
    "tests/guard/test_parity.py",
    "tests/guard/test_record.py",
    "tests/guard/test_functions.py",
)


def main(argv: list[str]) -> int:
    import pytest

    os.chdir(Path(__file__).resolve().parents[1])  # the suites' paths, and pyproject.toml's pytest settings
    os.environ["OTEL_TOOLCALL_EVAL_EXPECT_COMPILED"] = "1"
    return int(pytest.main(["-p", "no:cacheprovider", *SUITES, *argv]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
