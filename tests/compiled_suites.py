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
# lifecycle, parity with the engine, memory bounds, replay's engine, offline scoring, the public API.
SUITES = (
    "tests/test_compiled_build.py",
    "tests/test_checks.py",
    "tests/test_processor.py",
    "tests/test_conventions.py",
    "tests/online",
    "tests/test_lifecycle.py",
    "tests/test_engine_parity.py",
    "tests/test_memory_bounds.py",
    "tests/test_replay_engine.py",
    "tests/test_fuzz_span_path.py",
    "tests/test_offline_eval.py",
    "tests/test_offline_fast_paths.py",
    "tests/test_public_api.py",
    "tests/test_sdk_fields.py",
    "tests/test_late_spans.py",
    "tests/test_serve_encode.py",
)


def main(argv: list[str]) -> int:
    import pytest

    os.chdir(Path(__file__).resolve().parents[1])  # the suites' paths, and pyproject.toml's pytest settings
    os.environ["OTEL_TOOLCALL_EVAL_EXPECT_COMPILED"] = "1"
    return int(pytest.main(["-p", "no:cacheprovider", *SUITES, *argv]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
