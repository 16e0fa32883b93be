"""The gate on its own (``online/gate.py``): its keys, and which spans carrying only a watched key go on as plain
traffic (no processor)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from otel_toolcall_eval.conventions.llm_spans import LLM_KEYS
from otel_toolcall_eval.online.gate import Gate


class Watch:
    """A ``hooks.KeyWatch`` that records what the gate asks."""

    def __init__(self, noted: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.keys = frozenset({"session.id"})
        self._noted = set(noted)
        self.asked: list[int] = []

    def noted(self, trace_id: int) -> bool:
        self.asked.append(trace_id)
        return trace_id in self._noted

    def note(self, trace_id: int, attrs: Mapping[str, Any]) -> None:
        self._noted.add(trace_id)


def _span(attrs: dict[str, Any], trace_id: int = 1, parent: int | None = 1) -> ReadableSpan:
    parent_context = None if parent is None else SpanContext(trace_id, parent, is_remote=False)
    return ReadableSpan("step", SpanContext(trace_id, 2, is_remote=False), parent_context, attributes=attrs)


def test_the_keys_are_the_conventions_the_llm_checks_and_the_watches() -> None:
    gate = Gate(())
    gate.refresh(frozenset({"tool.name"}))
    assert gate.keys == gate.work == frozenset({"tool.name"}) | LLM_KEYS and gate.of == frozenset({"tool.name"})
    watched = Gate((Watch(),))
    watched.refresh(frozenset({"tool.name"}))
    assert watched.keys == frozenset({"tool.name", "session.id"}) | LLM_KEYS and watched.work == gate.work
    watched.refresh(None)  # a convention that reads every span: no gate
    assert watched.keys is None and watched.work is None


def test_only_a_child_span_whose_trace_noted_its_value_goes_on_as_plain_traffic() -> None:
    watch = Watch(noted={1})
    gate = Gate((watch,))
    gate.refresh(frozenset({"tool.name"}))
    assert gate.only_watched(_span({"session.id": "s"}))
    assert not gate.only_watched(_span({"session.id": "s"}, trace_id=9))  # its trace has not noted one yet
    assert not gate.only_watched(_span({"session.id": "s"}, parent=None))  # a root: evaluated
    assert not gate.only_watched(_span({"session.id": "s", "tool.name": "x"}))  # a tool span: evaluated
    assert not Gate(()).only_watched(_span({"session.id": "s"}))
