"""The core install as a user gets it: a wheel of this checkout with its real dependencies in a fresh venv.

``pip install otel-toolcall-eval`` must bring what the processor needs and nothing more (the footprint itself is
measured by ``make bench``, benchmarks/footprint.py), the processor must score there, and every command or
option that needs an extra must exit 2 naming its ``pip install`` line, never print a traceback. Needs PyPI (or
pip's cache) for the dependencies, as any install does.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from benchmarks.footprint import ROOT, core_env, distributions, site_packages, venv_env

pytestmark = pytest.mark.integration

# The core's distributions (pyproject.toml's dependencies and theirs): a new one here is a decision, not a drift.
CORE = {
    "annotated-types",
    "jsonschema_rs",
    "mypy_extensions",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "opentelemetry-semantic-conventions",
    "orjson",
    "otel-toolcall-eval",
    "pydantic",
    "pydantic_core",
    "PyYAML",
    "typing-inspection",
    "typing_extensions",
}
# Python < 3.12 only: importlib-metadata (opentelemetry-api), zipp
MAYBE = {"importlib_metadata", "importlib-metadata", "zipp"}


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # as `make bench-pure` runs the footprint suite: the source tree (and the editable install's egg-info beside it)
    # on PYTHONPATH must neither stop the wheel's install nor stand in for it
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPATH", str(ROOT / "src"))
        return core_env(tmp_path_factory.mktemp("core"))


def test_the_wheel_is_installed_into_the_venv_and_imported_from_there(python: Path) -> None:
    site = site_packages(python)
    records = list(site.glob("otel_toolcall_eval-*.dist-info/RECORD"))
    assert len(records) == 1 and "otel_toolcall_eval/processor.py" in records[0].read_text()
    out = subprocess.run(
        [str(python), "-c", "import otel_toolcall_eval.processor as p; print(p.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        env=venv_env(),
    )
    assert Path(out.stdout.strip()).is_relative_to(site)


def _cli(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cli = python.parent / "otel-toolcall-eval"
    return subprocess.run([str(cli), *args], capture_output=True, text=True, timeout=120)


def test_the_core_brings_what_the_processor_needs_and_no_more(python: Path) -> None:
    installed = set(distributions(python))
    assert installed - MAYBE == CORE


def test_the_processor_scores_a_tool_span_with_the_core_alone(python: Path) -> None:
    script = textwrap.dedent(
        """
        import importlib.util, json
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor

        config = EvalConfig.from_dict({"tools": [{"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]})
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(exporter), config))
        tracer = provider.get_tracer("app")
        with tracer.start_as_current_span("invoke_agent"):
            with tracer.start_as_current_span("execute_tool get_weather", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": '{"town": "Paris"}'}):
                pass
        provider.shutdown()
        spans = {s.name: dict(s.attributes) for s in exporter.get_finished_spans()}
        absent = [m for m in ("rich", "scipy", "rapidfuzz", "httpx", "requests", "grpc", "jsonschema", "tenacity")
                  if importlib.util.find_spec(m) is not None]
        print(json.dumps({"spans": spans, "absent": absent}))
        """
    )
    out = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=120, check=True)
    import json

    got = json.loads(out.stdout)
    assert got["absent"] == []
    tool = got["spans"]["execute_tool get_weather"]
    assert tool["toolcall_eval.schema_valid"] is False
    assert tool["toolcall_eval.outcome"] == "malformed_call"
    assert "toolcall_eval.trace.composite_ok" in got["spans"]["invoke_agent"]
    assert len(got["spans"]) == 2  # each span exported once


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["serve", "--prometheus-port", "0"], "serve"),
        (["demo", "--prometheus-port", "0", "--traces", "1"], "prometheus"),
        (["demo", "--otlp-endpoint", "http://127.0.0.1:4317", "--traces", "1"], "otlp"),
        (["demo", "--judge", "--traces", "1"], "judge"),
        (["eval", "--help"], "eval"),
        (["judge", "queue", "x"], "judge"),
        (["replay", "trace.json"], "eval"),
        (["pr-comment", "--no-comment"], "eval"),
    ],
)
def test_a_missing_extra_is_exit_2_naming_the_install_line(python: Path, args: list[str], extra: str) -> None:
    done = _cli(python, *args)
    text = done.stdout + done.stderr
    assert f"pip install 'otel-toolcall-eval[{extra}]'" in text
    assert "Traceback" not in text
    assert done.returncode == (0 if "--help" in args else 2), text


def test_help_lists_every_command_with_the_extra_it_needs(python: Path) -> None:
    done = _cli(python, "--help")
    assert done.returncode == 0
    assert "(needs the 'serve' extra" in done.stdout.replace("\n", " ").replace("  ", " ")
    assert "config" in done.stdout and "demo" in done.stdout


def test_config_check_runs_on_the_core(python: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("policies:\n  step_budget: x\n")
    done = _cli(python, "config", "check", str(config))
    assert done.returncode == 2
    assert "policies.step_budget" in done.stderr and "Traceback" not in done.stderr


def test_the_demo_runs_on_the_core_in_plain_text(python: Path) -> None:
    done = _cli(python, "demo", "--traces", "5", "--show", "1", "--inject", "must_not_call=1")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "Tool calls by outcome" in done.stdout and "composite ok-rate:" in done.stdout
    assert "execute_tool" in done.stdout and "[bold" not in done.stdout  # the trees, markup removed
    assert "apply_guardrail" in done.stdout  # the guard (shadow) ran on the core: its span of the must-not-call
