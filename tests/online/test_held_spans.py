"""Issue 18: the recovery class on the failed call's own span. The processor holds a failed tool span's enriched
copy until what followed decides its class, then forwards it carrying ``toolcall_eval.recovery.class``; one test
per release path (next call, next model turn, root, eviction, expiry, flush, shutdown, each bound), every span
exactly once, inline and background alike. Hold times are driven by an injected clock, never by sleeping."""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.checks.recovery import CARRIED_ON, CORRECTED_RETRY, HANDED_BACK, REPEATED, SWITCHED_TOOL
from otel_toolcall_eval.config import ConfigError
from otel_toolcall_eval.online.held_spans import HeldSpans, Slot
from otel_toolcall_eval.online.metrics import RECOVERY_UNCLASSIFIED
from tests.helpers import LOOKUP_TOOL, WEATHER_TOOL, Pipeline, chat_turn, make_pipeline, scores, tool_span

AGENT = {"gen_ai.operation.name": "invoke_agent"}
WEATHER = "execute_tool get_weather"


# --- the held table on its own (no processor, no tracer): bare spans, the enriched copy their scores only ------
class _Table:
    def __init__(self, **bounds: Any) -> None:
        self.now = 1000.0
        self.forwarded: list[ReadableSpan] = []
        self.unclassified: list[str] = []
        self.held = HeldSpans(
            max_spans=bounds.get("max_spans", 4),
            max_per_trace=bounds.get("max_per_trace", 2),
            max_seconds=bounds.get("max_seconds", 10.0),
            forward=self.forwarded.append,
            on_unclassified=self.unclassified.append,
            clock=lambda: self.now,
            build=lambda span, extra, attrs: ReadableSpan(name=span.name, attributes=dict(extra)),
        )

    @property
    def out(self) -> list[tuple[str, dict[str, Any]]]:
        return [(s.name, dict(s.attributes or {})) for s in self.forwarded]

    def hold(self, trace_id: int, step: int, name: str) -> Slot | None:
        slot = self.held.reserve(trace_id, step)
        if slot is not None:
            self.held.fill(slot, ReadableSpan(name=name), {"step": step}, None, expire=False)
        return slot


def test_a_held_span_goes_once_with_the_class_its_next_step_decided() -> None:
    t = _Table()
    t.hold(1, 1, "a")
    t.hold(1, 2, "b")
    assert t.out == [] and len(t.held) == 2
    t.held.decide(1, [(2, "search", REPEATED), (9, "other", CARRIED_ON)])  # step 9 was never held: ignored
    assert t.out == [("b", {"step": 2, A.RECOVERY_CLASS: REPEATED})] and len(t.held) == 1
    t.held.decide(1, [(2, "search", HANDED_BACK)])  # decided twice: out once
    assert len(t.out) == 1 and t.unclassified == []


def test_the_bounds_say_no_at_reservation_and_are_counted() -> None:
    t = _Table(max_spans=3, max_per_trace=2)
    assert t.hold(1, 1, "a") and t.hold(1, 2, "b")
    assert t.hold(1, 3, "c") is None  # per trace
    assert t.hold(2, 1, "d") is not None
    assert t.hold(3, 1, "e") is None  # in all
    assert t.unclassified == ["max_held_spans_per_trace", "max_held_spans"] and t.out == []


def test_what_waited_too_long_goes_without_a_class_oldest_first() -> None:
    t = _Table(max_seconds=10.0)
    t.hold(1, 1, "a")
    t.now += 5
    t.hold(2, 1, "b")
    t.now += 6
    t.held.expire()
    assert t.out == [("a", {"step": 1})] and t.unclassified == ["max_hold_seconds"] and len(t.held) == 1
    t.held.release_all("flush")
    assert [span for span, _ in t.out] == ["a", "b"] and t.unclassified[-1] == "flush" and len(t.held) == 0


def test_a_slot_decided_before_it_was_filled_is_forwarded_by_fill() -> None:
    t = _Table()
    slot = t.held.reserve(1, 1)
    assert slot is not None
    t.held.decide(1, [(1, "search", SWITCHED_TOOL)])  # the next step came first (another thread)
    assert t.out == []
    t.held.fill(slot, ReadableSpan(name="a"), {}, None)
    assert t.out == [("a", {A.RECOVERY_CLASS: SWITCHED_TOOL})] and len(t.held) == 0


def _pipeline(limits: dict[str, Any] | None = None, **config: Any) -> tuple[Pipeline, list[float]]:
    p = make_pipeline(EvalConfig.from_dict({"limits": limits or {}, **config}))
    held = p.processor._pipeline.held
    now = [1000.0]
    if held is not None:
        held._clock = lambda: now[0]
    return p, now


def _class(span: ReadableSpan) -> str | None:
    return (span.attributes or {}).get(A.RECOVERY_CLASS)


def _failed_weather(t: Tracer, call_id: str, city: str = "Paris") -> None:
    tool_span(t, "get_weather", {"city": city}, call_id=call_id, error=RuntimeError("timeout"))


def test_the_next_call_decides_and_the_failed_span_waits_for_it() -> None:
    p, _ = _pipeline()
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes=AGENT):
        chat_turn(t, tools=[WEATHER_TOOL], calls=[("c1", "get_weather", {"city": "Paris"})])
        _failed_weather(t, "c1")
        assert p.by_name(WEATHER) == []  # held: its class is not known yet
        chat_turn(t, calls=[("c2", "get_weather", {"city": "Paris"})])
        _failed_weather(t, "c2")  # the same failing call again
        (first,) = p.by_name(WEATHER)  # decided by this call: forwarded before it, with its class
        assert _class(first) == REPEATED and scores(first)["step"] == 1
        chat_turn(t, calls=[("c3", "get_weather", {"city": "Paris", "days": 1})])
        tool_span(t, "get_weather", {"city": "Paris", "days": 1}, call_id="c3", result="sunny")
    spans = p.by_name(WEATHER)
    assert [_class(s) for s in spans] == [REPEATED, CORRECTED_RETRY, None]  # a successful call has no class
    root = scores(p.one("invoke_agent"))
    assert root["trace.recovery.classes"] == [REPEATED, CORRECTED_RETRY]  # the root's counts stay
    assert p.spans()[-1].name == "invoke_agent"  # the root still goes last
    assert p.metric_sum(RECOVERY_UNCLASSIFIED) == 0


def test_the_next_model_turn_decides() -> None:
    p, _ = _pipeline()
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes=AGENT):
        chat_turn(t, tools=[WEATHER_TOOL, LOOKUP_TOOL], calls=[("c1", "get_weather", {"city": "X"})])
        _failed_weather(t, "c1", "X")
        chat_turn(t, calls=[("c2", "lookup", {"q": "X"})])  # asks for another tool: switched_tool, decided here
        assert [_class(s) for s in p.by_name(WEATHER)] == [SWITCHED_TOOL]
        tool_span(t, "lookup", {"q": "X"}, call_id="c2", error=RuntimeError("down"))
        chat_turn(t, answer="sorry, both are down")  # answers without a tool: handed_back
        assert [_class(s) for s in p.by_name("execute_tool lookup")] == [HANDED_BACK]


def test_the_root_ending_decides_what_nothing_reacted_to() -> None:
    p, _ = _pipeline()
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes=AGENT):
        chat_turn(t, tools=[WEATHER_TOOL])
        _failed_weather(t, "c1")
        assert p.spans()[-1].name == "chat"  # the failed span waits
    assert [s.name for s in p.spans()][-2:] == [WEATHER, "invoke_agent"]
    assert _class(p.one(WEATHER)) == CARRIED_ON


def test_a_root_that_is_itself_a_failed_call_carries_its_class() -> None:
    p, _ = _pipeline()
    _failed_weather(p.tracer, "c1")  # a tool span with no parent: the trace is this call
    assert _class(p.one(WEATHER)) == CARRIED_ON
    assert len(p.processor._pipeline.held or ()) == 0


def test_eviction_decides_the_evicted_trace() -> None:
    p, _ = _pipeline({"max_traces": 1})
    t = p.tracer
    with t.start_as_current_span("invoke_agent first", attributes=AGENT):
        chat_turn(t, tools=[WEATHER_TOOL])
        _failed_weather(t, "c1")
        assert p.by_name(WEATHER) == []
        with t.start_as_current_span("invoke_agent second", context=Context(), attributes=AGENT):
            chat_turn(t, tools=[WEATHER_TOOL])  # a second trace takes the only place: the first is evicted
            assert [_class(s) for s in p.by_name(WEATHER)] == [CARRIED_ON]
    assert p.metric_sum("toolcall_eval.state.dropped", reason="evicted") >= 1


def test_a_failed_span_held_too_long_goes_without_its_class() -> None:
    p, now = _pipeline({"max_hold_seconds": 30})
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes=AGENT):
        chat_turn(t, tools=[WEATHER_TOOL])
        _failed_weather(t, "c1")
        now[0] += 29
        p.processor._lifecycle.tick()
        assert p.by_name(WEATHER) == []
        now[0] += 2
        p.processor._lifecycle.tick()  # what the timer thread does
        (span,) = p.by_name(WEATHER)
        assert _class(span) is None and scores(span)["outcome"] == "execution_failed"
    assert scores(p.one("invoke_agent"))["trace.recovery.classes"] == [CARRIED_ON]  # the root still counts it
    assert len(p.by_name(WEATHER)) == 1  # forwarded once, not again when the root decided it
    assert p.metric_sum(RECOVERY_UNCLASSIFIED, reason="max_hold_seconds") == 1


def test_the_bounds_release_without_the_class_and_count_it() -> None:
    p, _ = _pipeline({"max_held_spans_per_trace": 1, "max_held_spans": 2})
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes=AGENT):
        chat_turn(t, tools=[WEATHER_TOOL], calls=[("c1", "get_weather", {}), ("c2", "get_weather", {})])
        _failed_weather(t, "c1", "A")
        _failed_weather(t, "c2", "B")  # the same batch: no reaction to c1, and the trace holds one already
        (unheld,) = p.by_name(WEATHER)
        assert _class(unheld) is None and scores(unheld)["step"] == 2
        assert p.metric_sum(RECOVERY_UNCLASSIFIED, reason="max_held_spans_per_trace") == 1
    assert [_class(s) for s in p.by_name(WEATHER)] == [None, CARRIED_ON]
    p2, _ = _pipeline({"max_held_spans": 1})
    t2 = p2.tracer
    with t2.start_as_current_span("a", attributes=AGENT):
        _failed_weather(t2, "c1")  # held: the only slot
        with t2.start_as_current_span("b", attributes=AGENT, context=Context()):
            _failed_weather(t2, "c2")  # another trace: no slot left, forwarded as is
            assert [_class(s) for s in p2.by_name(WEATHER)] == [None]
    assert [_class(s) for s in p2.by_name(WEATHER)] == [None, CARRIED_ON]
    assert p2.metric_sum(RECOVERY_UNCLASSIFIED, reason="max_held_spans") == 1


def test_flush_hands_every_held_span_to_the_exporter() -> None:
    p, _ = _pipeline()
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes=AGENT):
        chat_turn(t, tools=[WEATHER_TOOL])
        _failed_weather(t, "c1")
        assert p.processor.force_flush()
        (span,) = p.by_name(WEATHER)  # out without a class: the trace goes on, the class is not known
        assert _class(span) is None
        chat_turn(t, answer="it timed out")
    assert len(p.by_name(WEATHER)) == 1
    assert scores(p.one("invoke_agent"))["trace.recovery.classes"] == [HANDED_BACK]
    assert p.metric_sum(RECOVERY_UNCLASSIFIED, reason="flush") == 1


def test_shutdown_decides_the_open_traces_and_forwards_their_held_spans() -> None:
    p, _ = _pipeline()
    t = p.tracer
    root = t.start_span("invoke_agent", attributes=AGENT)  # never ends
    from opentelemetry import trace

    with trace.use_span(root, end_on_exit=False):
        chat_turn(t, tools=[WEATHER_TOOL])
        _failed_weather(t, "c1")
    assert p.by_name(WEATHER) == []
    p.provider.shutdown()
    assert [_class(s) for s in p.by_name(WEATHER)] == [CARRIED_ON]


def test_a_span_after_its_root_is_not_held() -> None:
    """A tool call the agent did not wait for ends after the root: nothing is left to decide its class."""
    p, _ = _pipeline()
    t = p.tracer
    root = t.start_span("invoke_agent", attributes=AGENT)
    from opentelemetry import trace

    with trace.use_span(root, end_on_exit=False):
        late = t.start_span("execute_tool get_weather", attributes={"gen_ai.operation.name": "execute_tool",
                                                                     "gen_ai.tool.name": "get_weather"})  # fmt: skip
    root.end()
    late.set_status(trace.Status(trace.StatusCode.ERROR, "boom"))
    late.end()
    (span,) = p.by_name(WEATHER)
    assert _class(span) is None and len(p.processor._pipeline.held or ()) == 0


def test_holding_off_forwards_failed_spans_at_once() -> None:
    p, _ = _pipeline({"max_held_spans": 0})
    assert p.processor._pipeline.held is None
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes=AGENT):
        _failed_weather(t, "c1")
        assert [_class(s) for s in p.by_name(WEATHER)] == [None]


def test_a_failure_while_releasing_forwards_the_span_unscored_once(monkeypatch: pytest.MonkeyPatch) -> None:
    p, _ = _pipeline()
    t = p.tracer

    def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("copy failed")

    with t.start_as_current_span("invoke_agent", attributes=AGENT):
        _failed_weather(t, "c1")
        monkeypatch.setattr(p.processor._pipeline.held, "_build", broken)
        _failed_weather(t, "c2", "Oslo")  # decides c1: its copy cannot be built, the original goes instead
        monkeypatch.undo()
    spans = p.by_name(WEATHER)
    assert len(spans) == 2 and scores(spans[0]) == {}  # the original span, as the application ended it


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"max_held_spans": -1}, "limits.max_held_spans"),
        ({"max_held_spans_per_trace": 0}, "limits.max_held_spans_per_trace"),
        ({"max_hold_seconds": 0}, "limits.max_hold_seconds"),
        ({"max_hold_seconds": 7200}, "limits.max_hold_seconds"),
    ],
)
def test_bad_hold_limits_name_the_field(limits: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        EvalConfig.from_dict({"limits": limits})


# --- every span exactly once, inline and background alike ------------------------------------------------
def _random_agent_traces(tracer: Tracer, seed: int, traces: int) -> None:
    """Agent traces whose calls fail often, with retries, switches, hand-backs, batches and abandoned traces."""
    rng = random.Random(seed)
    for n in range(traces):
        with tracer.start_as_current_span(f"invoke_agent {n}", attributes=AGENT):
            chat_turn(tracer, tools=[WEATHER_TOOL, LOOKUP_TOOL])
            for k in range(rng.randint(1, 6)):
                name = rng.choice(["get_weather", "lookup"])
                args = rng.choice([{"city": "Paris"}, {"city": "Oslo"}, {"q": "x"}])
                error = RuntimeError("boom") if rng.random() < 0.5 else None
                tool_span(tracer, name, args, call_id=f"c{n}_{k}", result=None if error else "ok", error=error)
                if rng.random() < 0.3:
                    chat_turn(tracer, answer="done" if rng.random() < 0.5 else None)


def _run(mode: str, limits: dict[str, Any]) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    downstream = BatchSpanProcessor(exporter) if mode == "background" else SimpleSpanProcessor(exporter)
    config = EvalConfig.from_dict({"evaluation": {"mode": mode}, "limits": limits})
    processor = ToolCallEvalProcessor(downstream, config, judge=False)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    _random_agent_traces(provider.get_tracer("test"), seed=3, traces=80)
    assert provider.force_flush()
    spans = list(exporter.get_finished_spans())
    provider.shutdown()
    return spans


@pytest.mark.parametrize("limits", [{}, {"max_held_spans": 3, "max_held_spans_per_trace": 2}])
def test_every_span_once_and_background_classes_match_inline(limits: dict[str, Any]) -> None:
    inline, background = _run("inline", limits), _run("background", limits)
    for spans in (inline, background):
        ids = Counter(s.context.span_id for s in spans if s.context is not None)
        assert ids and max(ids.values()) == 1  # exactly once
        assert len(spans) == len(inline)

    def classes(spans: list[ReadableSpan]) -> list[tuple[str, int, str]]:
        """(the trace's root name, step, class) per tool span: span ids differ between two runs, names do not."""
        roots = {s.context.trace_id: s.name for s in spans if s.parent is None and s.context is not None}
        return sorted(
            (roots[s.context.trace_id], scores(s).get("step", 0), _class(s) or "-")
            for s in spans
            if s.name.startswith("execute") and s.context is not None
        )

    assert classes(background) == classes(inline)
    got = Counter(c for _, _, c in classes(inline))
    assert got["-"] and got[CARRIED_ON] and got[REPEATED] + got[CORRECTED_RETRY] + got[SWITCHED_TOOL]
    if not limits:  # unbounded: every failed span carries the class its root counted
        for s in inline:
            sc = scores(s)
            if s.name.startswith("execute") and sc.get("outcome") not in (None, "success"):
                assert _class(s) is not None


def test_inline_release_from_several_threads_forwards_each_span_once() -> None:
    """Spans of one trace ending on several threads (parallel tool calls): reserve and release race."""
    p, _ = _pipeline()
    t = p.tracer
    from opentelemetry import context as otel_context

    with t.start_as_current_span("invoke_agent", attributes=AGENT):
        ctx = otel_context.get_current()

        def worker(i: int) -> None:
            token = otel_context.attach(ctx)
            try:
                for k in range(20):
                    _failed_weather(t, f"c{i}_{k}", rng_city[(i + k) % 3])
            finally:
                otel_context.detach(token)

        rng_city = ["A", "B", "C"]
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    spans = p.by_name(WEATHER)
    assert len(spans) == 80 and len({s.context.span_id for s in spans if s.context}) == 80
    assert all(_class(s) is not None for s in spans)
    assert len(p.processor._pipeline.held or ()) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (not on Windows)")
def test_a_forked_child_holds_none_of_the_parents_spans() -> None:
    p, _ = _pipeline()
    t = p.tracer
    root = t.start_span("invoke_agent", attributes=AGENT)
    from opentelemetry import trace

    with trace.use_span(root, end_on_exit=False):
        _failed_weather(t, "c1")
    assert len(p.processor._pipeline.held or ()) == 1
    pid = os.fork()
    if pid == 0:
        os._exit(0 if len(p.processor._pipeline.held or ()) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    root.end()
    assert _class(p.one(WEATHER)) == CARRIED_ON
