"""The release (.github/workflows/release.yml, pyproject.toml's ``[tool.cibuildwheel]``) against what CI builds and tests.

cibuildwheel builds Linux wheels in Docker, which this machine does not have, so the release's own builds run only on
GitHub's runners. What can be checked here is checked: that cibuildwheel builds with the switch and the frontend
`make test-compiled` builds CI's Linux wheel with (.ci/run runs it, so the Linux build is tested for real on every
CI run), that it tests each wheel with the same suites and extras, which wheels it selects on each platform of the
workflow (cibuildwheel's own ``--print-build-identifiers``, the version the workflow runs), and that the sdist,
built as the workflow builds it, gives the pure wheel.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
SWITCH = "OTEL_TOOLCALL_EVAL_COMPILE"
# CPython 3.10 (requires-python) to 3.14; 3.15 is left to the pure wheel until orjson ships a wheel for it
COMPILED_PYTHONS = ("cp310", "cp311", "cp312", "cp313", "cp314")


def cibuildwheel_config() -> dict[str, Any]:
    config: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
    return config


def make_recipe(target: str) -> list[str]:
    """The recipe lines of ``target`` in the Makefile (a rule whose target line starts with it)."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def test_cibuildwheel_builds_with_the_switch_and_the_frontend_of_make_test_compiled() -> None:
    config = cibuildwheel_config()
    (build,) = [line for line in make_recipe("$(WHEEL_STAMP)") if " wheel " in line]
    assert build.startswith(f"{SWITCH}=1 ") and "/bin/pip wheel " in build and "--no-deps" in build, build
    # cibuildwheel's pip frontend runs `pip wheel <project> --no-deps`, with its environment table set
    assert config["build-frontend"] == "pip"
    assert config["environment"] == {SWITCH: "1"}
    # and that variable is the one setup.py compiles on (read without running setup.py)
    tree = ast.parse((ROOT / "setup.py").read_text())
    (compile_check,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_compile"]
    assert repr(SWITCH) in ast.unparse(compile_check)


def test_each_wheel_is_tested_with_the_suites_and_extras_of_make_test_compiled() -> None:
    config = cibuildwheel_config()
    assert config["test-command"] == "python {project}/tests/compiled_suites.py"
    # the default encoding on Linux, where CI runs them; on Windows (cp1252) only by this setting
    assert config["test-environment"] == {"PYTHONUTF8": "1"}
    assert make_recipe("test-compiled") == ["$(COMPILED_VENV)/bin/python tests/compiled_suites.py"]
    (extras,) = [line for line in make_recipe("$(COMPILED_STAMP)") if "[" in line]
    installed = re.search(r"\[(\w+)\]\" (.+)$", extras)
    assert installed is not None, extras
    assert config["test-extras"] == [installed[1]]
    assert sorted(config["test-requires"]) == sorted(installed[2].split())


def test_the_workflow_runs_the_cibuildwheel_this_suite_asks() -> None:
    (step,) = [s for s in workflow()["jobs"]["compiled"]["steps"] if "cibuildwheel" in s.get("uses", "")]
    assert step["uses"] == f"pypa/cibuildwheel@v{version('cibuildwheel')}"


def _platform(runner: str) -> str:
    return next(
        p
        for prefix, p in (("ubuntu", "linux"), ("macos", "macos"), ("windows", "windows"))
        if runner.startswith(prefix)
    )


# the wheels each job of the workflow must build: every supported CPython, on each platform tag of its architecture
EXPECTED_TAGS = {
    ("linux", "x86_64"): ("manylinux_x86_64", "musllinux_x86_64"),
    ("linux", "aarch64"): ("manylinux_aarch64", "musllinux_aarch64"),
    ("macos", "x86_64"): ("macosx_x86_64",),
    ("macos", "arm64"): ("macosx_arm64",),
    ("windows", "AMD64"): ("win_amd64",),
}


def test_every_platform_of_the_workflow_builds_cpython_3_10_to_3_14() -> None:
    matrix = workflow()["jobs"]["compiled"]["strategy"]["matrix"]["include"]
    jobs = {(_platform(job["os"]), job["archs"]) for job in matrix}
    assert jobs == set(EXPECTED_TAGS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIBW_")}
    for platform, archs in sorted(jobs):
        printed = subprocess.run(
            [
                sys.executable,
                "-m",
                "cibuildwheel",
                "--platform",
                platform,
                "--archs",
                archs,
                "--print-build-identifiers",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.split()
        expected = {f"{py}-{tag}" for py in COMPILED_PYTHONS for tag in EXPECTED_TAGS[(platform, archs)]}
        assert set(printed) == expected, (platform, archs)


@pytest.mark.parametrize(("platform", "archs"), sorted(EXPECTED_TAGS))
def test_cibuildwheel_reads_each_platforms_build_and_test_settings_as_meant(platform: str, archs: str) -> None:
    """cibuildwheel's own effective options for a wheel of each job (its reader, its per-platform tables and
    defaults), not only the TOML: the version pinned is the workflow's (test above)."""
    from cibuildwheel.options import CommandLineArguments, compute_options

    args = CommandLineArguments.defaults()
    args.package_dir, args.platform, args.archs = ROOT, platform, archs
    options = compute_options(platform=platform, command_line_arguments=args, env={})
    build = options.build_options(f"cp312-{EXPECTED_TAGS[(platform, archs)][0]}")
    assert build.build_frontend is not None and build.build_frontend.name == "pip"
    assert build.environment.as_dictionary({}) == {SWITCH: "1"}
    assert build.test_environment.as_dictionary({}) == {"PYTHONUTF8": "1"}
    assert build.test_command == "python {project}/tests/compiled_suites.py"
    assert build.test_extras == "[all]"


def test_the_workflow_publishes_only_a_release_and_after_every_wheel_passed() -> None:
    loaded = workflow()
    jobs = loaded["jobs"]
    assert set(jobs["publish"]["needs"]) == {"pure", "compiled"}
    assert jobs["publish"]["if"] == "github.event_name == 'release'"
    assert jobs["publish"]["permissions"] == {"id-token": "write"}
    # the pure job builds with the switch unset: not in its steps, nor in the workflow's environment
    assert SWITCH not in yaml.safe_dump(jobs["pure"]) + yaml.safe_dump(loaded.get("env", {}))


@pytest.mark.integration
def test_the_sdist_builds_the_pure_wheel(tmp_path: Path) -> None:
    """As the workflow's pure job builds it (`python -m build`, no switch), and as pip builds it for a user whose
    platform has no compiled wheel: a ``py3-none-any`` wheel without an extension module."""
    env = {k: v for k, v in os.environ.items() if k != SWITCH}
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), str(ROOT)],
        env=env,
        capture_output=True,
        check=True,
        timeout=600,
    )
    (sdist,) = tmp_path.glob("otel_toolcall_eval-*.tar.gz")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp_path), str(sdist)],
        env=env,
        capture_output=True,
        check=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("otel_toolcall_eval-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "otel_toolcall_eval/processor.py" in names
    assert not [n for n in names if n.endswith((".so", ".pyd"))]
