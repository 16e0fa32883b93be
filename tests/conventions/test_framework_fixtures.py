"""The spans real agent frameworks recorded (``tests/fixtures/frameworks/``), re-enacted through the processor.

The integration tests (``tests/integration/test_agent_frameworks*.py``) run the frameworks and write these
fixtures; this suite needs none of them installed and asserts the same verdicts (``framework_scenario.EXPECTED``),
both through ``replay`` and through a live ``TracerProvider``-less processor in each evaluation mode, so a change
to a convention that breaks a framework fails here, in the unit suite, too.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval.replay import replay_spans
from otel_toolcall_eval.replay.engine import end_order
from tests.framework_scenario import EXPECTED, check, fixture_path, recorded


def test_every_expectation_has_its_fixture() -> None:
    assert sorted(p.stem for p in fixture_path("x").parent.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replayed_fixture_gets_the_frameworks_verdicts(name: str) -> None:
    check(replay_spans(recorded(name)).spans, EXPECTED[name])


@pytest.mark.parametrize("mode", ["inline", "background"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_processor_in_each_mode_gets_the_frameworks_verdicts(name: str, mode: str) -> None:
    exporter = InMemorySpanExporter()
    downstream = BatchSpanProcessor(exporter) if mode == "background" else SimpleSpanProcessor(exporter)
    processor = ToolCallEvalProcessor(downstream, EvalConfig.from_dict({"evaluation": {"mode": mode}}), judge=False)
    spans = [span for group in end_order(recorded(name)) for span in group]  # the order they ended in
    for span in spans:
        processor.on_end(span)
    processor.shutdown()
    out = list(exporter.get_finished_spans())
    assert sorted(s.context.span_id for s in out) == sorted(s.context.span_id for s in spans)  # each once
    check(out, EXPECTED[name])


def test_every_framework_row_of_the_readme_names_a_real_integration_test() -> None:
    import re
    from pathlib import Path

    from otel_toolcall_eval.conventions.frameworks import FRAMEWORKS

    integration = Path(__file__).parents[1] / "integration"
    for row in FRAMEWORKS:
        file, _, name = row.test.split(" ")[0].partition("::")
        source = (integration / file).read_text()
        if name:
            assert re.search(rf"^def {re.escape(name.rstrip('*'))}", source, re.M), row.test


def test_every_framework_scope_has_its_row_in_the_shape_table() -> None:
    """The framework table's content switches come from the shape table: a scope without a row would have none."""
    from otel_toolcall_eval.conventions.frameworks import FRAMEWORKS
    from otel_toolcall_eval.conventions.shapes import shape_named

    missing = [scope for row in FRAMEWORKS for scope in row.scopes if shape_named(scope) is None]
    assert missing == []
    assert all(row.capture for row in FRAMEWORKS if row.scopes)


def test_a_framework_whose_unknown_tool_counts_only_on_the_root_says_so_in_its_row() -> None:
    """A recorded call of a tool the agent lacks that no reply answers (smolagents, the OpenAI Agents SDK) is no call
    of the verdict, only ``trace.unknown_tool_requests``: the framework table must say so for its scopes."""
    from otel_toolcall_eval.conventions.frameworks import FRAMEWORKS, UNKNOWN_COUNTED_ONLY

    count_only = [name for name, expected in EXPECTED.items() if expected.unknown_tool_requests]
    assert count_only  # the recordings still hold such a case
    for name in count_only:
        scopes = {s.instrumentation_scope.name for s in recorded(name) if s.instrumentation_scope is not None}
        rows = [row for row in FRAMEWORKS if scopes & set(row.scopes)]
        assert rows, name
        assert all(UNKNOWN_COUNTED_ONLY in row.default + row.other for row in rows), name
