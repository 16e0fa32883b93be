"""Issue 18 (without sessions): recovery after an error, cost and latency, the tool-list fingerprint, the first
failing step. Pure checks first, then the processor with real SDK spans."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.checks.cost import Price, TraceCost, model_usage, price_for
from otel_toolcall_eval.checks.recovery import (
    CARRIED_ON,
    CORRECTED_RETRY,
    HANDED_BACK,
    REPEATED,
    SWITCHED_TOOL,
    CallStep,
    TurnStep,
    classify_recoveries,
    count_classes,
    react,
)
from otel_toolcall_eval.checks.tool_list import tool_list_fingerprint
from otel_toolcall_eval.config import ConfigError
from otel_toolcall_eval.engine.tally import tool_latency
from otel_toolcall_eval.online.trace_stats import ToolListChanges
from otel_toolcall_eval.records import ToolDefinition
from tests.helpers import LOOKUP_TOOL, WEATHER_TOOL, chat_turn, make_pipeline, scores, tool_span

FAIL = CallStep("search", "k1", True, 1, 1)


# --- recovery: the pure check ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("following", "expected"),
    [
        ([CallStep("search", "k2", False, 2, 2)], CORRECTED_RETRY),
        ([CallStep("search", "k2", True, 2, 2)], CARRIED_ON),  # changed arguments, failed again
        ([CallStep("search", "k1", True, 2, 2)], REPEATED),
        ([CallStep("search", "k1", False, 2, 2)], REPEATED),  # the same call again, whatever it returned
        ([CallStep("lookup", "k9", False, 2, 2)], SWITCHED_TOOL),
        ([TurnStep()], HANDED_BACK),
        ([TurnStep(("lookup",))], SWITCHED_TOOL),  # asked for another tool, whether or not it then ran
        ([TurnStep(("search",)), CallStep("search", "k1", True, 2, 2)], REPEATED),  # the call it asked for decides
        ([TurnStep((None,)), CallStep("lookup", None, False, 2, 2)], SWITCHED_TOOL),  # an unnamed request: the call
        ([], CARRIED_ON),
    ],
)
def test_recovery_class_of_what_followed(following: list[Any], expected: str) -> None:
    assert classify_recoveries([FAIL, *following])[0] == (FAIL, expected)


def test_a_call_of_the_same_parallel_batch_is_no_reaction() -> None:
    steps = [FAIL, CallStep("lookup", "x", False, 2, 1), CallStep("search", "k2", False, 3, 2)]
    assert classify_recoveries(steps) == [(FAIL, CORRECTED_RETRY)]


def test_unrecorded_arguments_are_never_the_same_call() -> None:
    failed = CallStep("search", None, True, 1)
    assert classify_recoveries([failed, CallStep("search", None, False, 2)]) == [(failed, CORRECTED_RETRY)]


def test_each_failure_is_classified_and_counted() -> None:
    second = CallStep("search", "k1", True, 2, 2)
    steps = [FAIL, second, TurnStep()]
    assert classify_recoveries(steps) == [(FAIL, REPEATED), (second, HANDED_BACK)]
    assert count_classes([REPEATED, HANDED_BACK, REPEATED]) == {
        CORRECTED_RETRY: 0,
        SWITCHED_TOOL: 0,
        HANDED_BACK: 1,
        REPEATED: 2,
        CARRIED_ON: 0,
    }


def test_react_decides_the_waiting_failures_a_step_reacts_to_and_keeps_the_others() -> None:
    """``react``, the running form the online tally uses: the same classes as ``classify_recoveries`` gives the
    same steps, one step at a time."""
    other = CallStep("lookup", "k9", True, 2, 2)  # same batch as the step below: not its reaction
    still, now = react([FAIL, other], CallStep("search", "k2", False, 3, 2))
    assert still == [other] and now == [(1, "search", CORRECTED_RETRY)]
    assert react(still, TurnStep()) == ([], [(2, "lookup", HANDED_BACK)])
    assert react([], TurnStep()) == ([], [])


# --- cost: the pure check ----------------------------------------------------------------------------------
def test_usage_prefers_the_current_names_and_skips_agent_spans() -> None:
    strands_chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.prompt_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.usage.completion_tokens": 5,
    }
    assert model_usage(strands_chat) == ("m", 10, 5)
    old = {"gen_ai.operation.name": "chat", "gen_ai.usage.prompt_tokens": 7, "gen_ai.usage.completion_tokens": 3}
    assert model_usage(old) == (None, 7, 3)
    openinference = {"openinference.span.kind": "LLM", "llm.model_name": "x", "llm.token_count.prompt": "12"}
    assert model_usage(openinference) == ("x", 12, None)
    assert model_usage({"gen_ai.operation.name": "invoke_agent", "gen_ai.usage.input_tokens": 60}) is None
    assert model_usage({"openinference.span.kind": "AGENT", "llm.token_count.prompt": 60}) is None
    assert model_usage({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": -1}).input_tokens is None  # type: ignore[union-attr]
    assert model_usage({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": True}).input_tokens is None  # type: ignore[union-attr]


def test_price_by_exact_name_then_by_versioned_prefix() -> None:
    prices = {"gpt-4o": Price(2.5, 10.0), "gpt-4o-mini": Price(0.15, 0.6)}
    assert price_for(prices, "gpt-4o-mini-2024-07-18") == Price(0.15, 0.6)
    assert price_for(prices, "gpt-4o-2024-08-06") == Price(2.5, 10.0)
    assert price_for(prices, "gpt-4") is None
    assert price_for(prices, "gpt-4omni") is None
    cost = TraceCost()
    cost.add_model_call(model_usage({"gen_ai.operation.name": "chat", "gen_ai.response.model": "gpt-4o",  # type: ignore[arg-type]
                                     "gen_ai.usage.input_tokens": 1_000_000, "gen_ai.usage.output_tokens": 100_000}),
                        prices)  # fmt: skip
    cost.add_model_call(model_usage({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5}), prices)  # type: ignore[arg-type]
    assert (cost.model_calls, cost.input_tokens, cost.output_tokens, cost.unpriced_calls) == (2, 1_000_005, 100_000, 1)
    assert cost.cost == pytest.approx(2.5 + 1.0)
    assert tool_latency(1_000, 501_000) == pytest.approx(0.0005)
    assert tool_latency(2, 1) is None


def test_pricing_config_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"pricing\.models\.gpt-4o\.input_per_million"):
        EvalConfig.from_dict({"pricing": {"models": {"gpt-4o": {"input_per_million": -1, "output_per_million": 1}}}})
    with pytest.raises(ConfigError, match=r"pricing\.models\.gpt-4o\.output_per_milion: unknown key"):
        EvalConfig.from_dict({"pricing": {"models": {"gpt-4o": {"input_per_million": 1, "output_per_milion": 1}}}})


# --- the tool list ------------------------------------------------------------------------------------------
def test_fingerprint_is_order_free_and_sees_schemas_not_descriptions() -> None:
    a = ToolDefinition("a", {"type": "object"}, "one", '{"type":"object"}')
    b = ToolDefinition("b", None, None, None)
    assert tool_list_fingerprint({"a": a, "b": b}) == tool_list_fingerprint({"b": b, "a": a})
    reworded = ToolDefinition("a", {"type": "object"}, "other words", '{"type":"object"}')
    assert tool_list_fingerprint({"a": reworded, "b": b}) == tool_list_fingerprint({"a": a, "b": b})
    changed = ToolDefinition("a", {"type": "string"}, "one", '{"type":"string"}')
    assert tool_list_fingerprint({"a": changed, "b": b}) != tool_list_fingerprint({"a": a, "b": b})
    assert tool_list_fingerprint({"a": a}) != tool_list_fingerprint({"a": a, "b": b})
    assert len(tool_list_fingerprint({"a": a})) == 16


def test_the_root_fingerprint_is_the_tool_lists_whether_or_not_it_was_seen_before() -> None:
    """The root's fingerprint is taken once per tool list (memoised by its definition objects): a repeated list,
    an equal list of other objects, a changed one and more lists than the memo keeps all get
    ``tool_list_fingerprint`` of their own tools, and the memo stays bounded in entries and in bytes."""
    from otel_toolcall_eval.online.trace_stats import Fingerprints, root_attributes

    memo = Fingerprints(max_bytes=64 * 1024, max_entries=8)

    def root_fingerprint(tools: dict[str, ToolDefinition]) -> Any:
        return root_attributes(None, tools, 1, 0, False, memo)[A.TRACE_TOOL_LIST_FINGERPRINT]

    a = ToolDefinition("a", {"type": "object"}, "one", '{"type":"object"}')
    b = ToolDefinition("b", None, None, None)
    listed = {"a": a, "b": b}
    assert root_fingerprint(listed) == root_fingerprint(dict(listed)) == tool_list_fingerprint(listed)
    assert len(memo) == 1
    twin = {"a": ToolDefinition("a", {"type": "object"}, "one", '{"type":"object"}'), "b": b}
    assert root_fingerprint(twin) == tool_list_fingerprint(listed)
    changed = {"a": ToolDefinition("a", {"type": "string"}, "one", '{"type":"string"}'), "b": b}
    assert root_fingerprint(changed) == tool_list_fingerprint(changed) != tool_list_fingerprint(listed)
    many = [{f"t{i}": ToolDefinition(f"t{i}", None, None, None)} for i in range(30)]
    assert [root_fingerprint(t) for t in many] == [tool_list_fingerprint(t) for t in many]
    assert len(memo) <= 8
    big = {"s": ToolDefinition("s", {"type": "object"}, None, "x" * 100_000)}  # a schema larger than the memo
    assert root_fingerprint(big) == tool_list_fingerprint(big)
    assert memo.bytes <= 64 * 1024
    assert root_fingerprint(listed) == tool_list_fingerprint(listed)


def test_tool_list_changes_are_per_source_and_bounded() -> None:
    changes = ToolListChanges(max_sources=2)
    assert not changes.changed(("svc", ""), "f1")  # first sighting
    assert not changes.changed(("svc", ""), "f1")
    assert changes.changed(("svc", ""), "f2")
    assert not changes.changed(("other", ""), "f9")
    assert not changes.changed(("third", ""), "f0")  # evicts the least recently seen source ("svc")
    assert len(changes) == 2
    assert not changes.changed(("svc", ""), "f3")  # forgotten: a first sighting again


# --- the processor, real SDK spans ---------------------------------------------------------------------------
PRICED = {"pricing": {"models": {"gpt-4o": {"input_per_million": 2.5, "output_per_million": 10}}}}


def test_root_carries_cost_latency_fingerprint_first_failure_and_recovery() -> None:
    p = make_pipeline(EvalConfig.from_dict({**PRICED, "metrics": {"histograms": True}}))
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat_turn(t, tools=[WEATHER_TOOL, LOOKUP_TOOL], calls=[("c1", "get_weather", {"city": "Paris"})])
        tool_span(t, "get_weather", {"city": "Paris"}, call_id="c1", error=RuntimeError("timeout"))
        chat_turn(t, calls=[("c2", "get_weather", {"city": "Paris"})])
        tool_span(t, "get_weather", {"city": "Paris"}, call_id="c2", error=RuntimeError("timeout"))  # repeated
        chat_turn(t, calls=[("c3", "get_weather", {"city": "Paris", "days": 1})])
        tool_span(t, "get_weather", {"city": "Paris", "days": 1}, call_id="c3", result="sunny")  # corrected
        chat_turn(t, answer="sunny", model="unpriced-model")
    root = scores(p.one("invoke_agent"))
    assert root["trace.model_calls"] == 4
    assert (root["trace.input_tokens"], root["trace.output_tokens"]) == (400, 80)
    assert root["trace.cost"] == pytest.approx((300 * 2.5 + 60 * 10) / 1e6)
    assert root["trace.unpriced_model_calls"] == 1
    assert root["trace.tool_latency.total"] >= root["trace.tool_latency.max"] > 0
    assert root["trace.tool_error_rate"] == pytest.approx(2 / 3)
    assert root["trace.tool_list.count"] == 2
    assert len(root["trace.tool_list.fingerprint"]) == 16
    assert (root["trace.first_failure.step"], root["trace.first_failure.tool"]) == (1, "get_weather")
    assert root["trace.recovery.steps"] == [1, 2]
    assert root["trace.recovery.classes"] == [REPEATED, CORRECTED_RETRY]
    assert (root["trace.recovery.repeated"], root["trace.recovery.corrected_retry"]) == (1, 1)
    assert root["trace.recovery.handed_back"] == 0
    assert p.metric_sum("toolcall_eval.recoveries", tool="get_weather", **{"class": REPEATED}) == 1
    assert p.metric_sum("toolcall_eval.recoveries", tool="get_weather", **{"class": CORRECTED_RETRY}) == 1
    assert p.metric_sum("toolcall_eval.tool.latency", tool="get_weather") == 3  # a histogram: its count
    assert p.metric_sum("toolcall_eval.trace.model_calls") == 1
    assert p.metric_sum("toolcall_eval.trace.tokens", type="input") == 1
    assert p.metric_sum("toolcall_eval.trace.cost", currency="USD") == 1
    # each failed span carries its own class too (held until it was decided); the successful one none
    spans = p.by_name("execute_tool get_weather")
    assert [(s.attributes or {}).get(A.RECOVERY_CLASS) for s in spans] == [REPEATED, CORRECTED_RETRY, None]


def test_switched_tool_and_handed_back() -> None:
    p = make_pipeline()
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat_turn(t, tools=[WEATHER_TOOL, LOOKUP_TOOL], calls=[("c1", "get_weather", {"city": "X"})])
        tool_span(t, "get_weather", {"city": "X"}, call_id="c1", error=RuntimeError("down"))
        chat_turn(t, calls=[("c2", "lookup", {"q": "X"})])
        tool_span(t, "lookup", {"q": "X"}, call_id="c2", error=RuntimeError("down"))
        chat_turn(t, answer="sorry, both services are down")
    root = scores(p.one("invoke_agent"))
    assert root["trace.recovery.classes"] == [SWITCHED_TOOL, HANDED_BACK]
    assert "trace.cost" not in root  # no price table
    assert root["trace.input_tokens"] == 300


def test_a_turn_without_recorded_output_is_no_hand_back() -> None:
    """Content capture off: the model turn after the failure recorded no output, so it proves nothing."""
    p = make_pipeline()
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat_turn(t, tools=[WEATHER_TOOL])
        tool_span(t, "get_weather", {"city": "X"}, error=RuntimeError("down"))
        chat_turn(t)
    assert scores(p.one("invoke_agent"))["trace.recovery.classes"] == [CARRIED_ON]


def test_first_failure_is_a_wrong_call_too_and_clean_traces_have_none() -> None:
    p = make_pipeline()
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat_turn(t, tools=[WEATHER_TOOL])
        tool_span(t, "get_weather", {"city": "Paris"}, result="ok")
        tool_span(t, "get_weather", {"city": "paris"}, result="ok")  # a duplicate: wrong, but no error
    root = scores(p.one("invoke_agent"))
    assert (root["trace.first_failure.step"], root["trace.first_failure.tool"]) == (2, "get_weather")
    assert "trace.recovery.classes" not in root and root["trace.errors"] == 0  # nothing failed
    p = make_pipeline()
    with p.tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        tool_span(p.tracer, "get_weather", {"city": "Paris"}, result="ok")
    root = scores(p.one("invoke_agent"))
    assert "trace.first_failure.step" not in root and root["trace.tool_error_rate"] == 0


def test_tool_list_change_is_counted_per_service_and_agent_with_its_source() -> None:
    p = make_pipeline()
    provider = TracerProvider(resource=Resource.create({"service.name": "travel", "service.version": "2.0"}))
    provider.add_span_processor(p.processor)
    t = provider.get_tracer("test")

    def trace(tools: list[dict[str, Any]], agent: str = "planner") -> dict[str, Any]:
        root = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
        with t.start_as_current_span("invoke_agent", attributes=root):
            chat_turn(t, tools=tools)
            tool_span(t, "get_weather", {"city": "Paris"}, result="ok")
        return scores(p.spans()[-1])

    first = trace([WEATHER_TOOL, LOOKUP_TOOL])
    assert trace([LOOKUP_TOOL, WEATHER_TOOL])["trace.tool_list.fingerprint"] == first["trace.tool_list.fingerprint"]
    assert p.metric_sum("toolcall_eval.tool_list.changes") == 0
    dropped = trace([WEATHER_TOOL])  # the MCP server stopped advertising `lookup`
    assert dropped["trace.tool_list.count"] == 1
    assert dropped["trace.tool_list.fingerprint"] != first["trace.tool_list.fingerprint"]
    source = {"service.name": "travel", "gen_ai.agent.name": "planner", "service.version": "2.0"}
    assert p.metric_sum("toolcall_eval.tool_list.changes", **source) == 1
    trace([WEATHER_TOOL, LOOKUP_TOOL], agent="booker")  # another agent's first list: no change of planner's
    assert p.metric_sum("toolcall_eval.tool_list.changes") == 1


# --- what real frameworks recorded (tests/fixtures/frameworks), replayed ------------------------------------
# (model calls, input tokens, first failing step, recovery classes): agent spans that repeat their turns' sums
# (Strands' invoke_agent, smolagents' AGENT root) and ADK's legacy call_llm (its generate_content's usage again)
# are not counted twice; a turn without recorded output messages proves no hand-back (autogen-default: carried_on)
FRAMEWORK_STATS: dict[str, tuple[int, int | None, int, list[str]]] = {
    "adk-legacy": (5, 50, 3, ["switched_tool", "switched_tool", "carried_on"]),
    # the unknown tool, which ran on no span, is a failed call scored from the requests (issue 26): its own class
    "autogen-capture": (6, 60, 3, ["switched_tool", "switched_tool", "handed_back"]),
    "autogen-default": (6, 60, 3, ["switched_tool", "carried_on"]),
    # its preparation step is no model call; its mock LLM reports no usage: no token count (not 0); the unknown tool
    # scored from the requests, as above
    "llama_index-content": (6, None, 3, ["switched_tool", "switched_tool", "handed_back"]),
    "openai_agents-content": (5, 50, 3, ["switched_tool", "switched_tool"]),  # book_flight asked for, never run
    "smolagents-content": (6, 60, 3, ["switched_tool", "switched_tool"]),  # final_answer is a tool call
    "strands-default": (6, 60, 3, ["switched_tool", "switched_tool", "carried_on"]),
}


@pytest.mark.parametrize("name", sorted(FRAMEWORK_STATS))
def test_recorded_frameworks_get_their_numbers(name: str) -> None:
    from otel_toolcall_eval.replay import replay_spans
    from tests.framework_scenario import recorded, roots_with_verdict

    (root,) = roots_with_verdict(replay_spans(recorded(name)).spans)
    got = scores(root)
    model_calls, input_tokens, first_step, classes = FRAMEWORK_STATS[name]
    assert (got["trace.model_calls"], got.get("trace.input_tokens")) == (model_calls, input_tokens)
    assert got["trace.first_failure.step"] == first_step
    assert got["trace.recovery.classes"] == classes


# --- offline: run files ------------------------------------------------------------------------------------
def test_offline_recovery_per_case() -> None:
    from tests.helpers import ORDER_TOOLS, dataset_case, score_run_calls

    case = dataset_case([{"name": "get_order", "args": {"order_id": "12345"}}], available_tools=ORDER_TOOLS)
    broken = {"name": "get_order", "arguments": '{"order_id": 12345'}  # does not parse: malformed
    fixed = {"name": "get_order", "arguments": {"order_id": "12345"}}
    assert list(score_run_calls(case, [broken, fixed]).recovery) == [CORRECTED_RETRY]
    assert list(score_run_calls(case, [broken, broken, fixed]).recovery) == [REPEATED, CORRECTED_RETRY]
    assert list(score_run_calls(case, [broken]).recovery) == [HANDED_BACK]  # the run ended with the agent's answer
    assert list(score_run_calls(case, [broken], error="timeout").recovery) == [
        CARRIED_ON
    ]  # every call counts as failed
    assert list(score_run_calls(case, [fixed]).recovery) == []


def test_offline_recovery_in_the_report(tmp_path: Any) -> None:
    from otel_toolcall_eval.cli import main
    from otel_toolcall_eval.dataset import template_cases, write_cases
    from tests.helpers import GOOD, write_run

    dataset = tmp_path / "dataset.jsonl"
    write_cases(dataset, template_cases())
    runs = {
        **GOOD,
        "order-status": [
            {"name": "get_order", "arguments": '{"order_id": 12345'},
            {"name": "get_order", "arguments": '{"order_id": "12345"}'},
        ],
    }
    out = tmp_path / "report.json"
    main(["eval", "--dataset", str(dataset), "--runs", str(write_run(tmp_path, runs)), "--json", str(out)])
    report = json.loads(out.read_text())
    cases = {c["id"]: c for c in report["cases"]}
    assert cases["order-status"]["recovery"] == {CORRECTED_RETRY: 1}
    assert cases["order-status"]["call_recovery"] == [CORRECTED_RETRY, None]  # per call, as `actual`
    assert cases["thanks"]["recovery"] == {}
    assert all(c is None for c in cases["thanks"]["call_recovery"])
    assert report["summary"]["recovery"] == {
        CORRECTED_RETRY: 1,
        SWITCHED_TOOL: 0,
        HANDED_BACK: 0,
        REPEATED: 0,
        CARRIED_ON: 0,
    }


def test_model_calls_that_recorded_no_token_count_leave_the_tokens_unknown_not_zero() -> None:
    """A model that reports no usage (LlamaIndex's mock LLM, DSPy's LM spans): the root counts the calls but says
    nothing of tokens, and the token histogram gets no point of 0; one call with a count gives the tokens again."""
    p = make_pipeline(EvalConfig.from_dict({"metrics": {"histograms": True}}))
    t = p.tracer
    bare = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    with t.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with t.start_as_current_span("chat m", attributes=bare):
            pass
        tool_span(t, "get_weather", {"city": "X"})
    root = scores(p.one("invoke_agent"))
    assert root["trace.model_calls"] == 1
    assert "trace.input_tokens" not in root and "trace.output_tokens" not in root
    assert p.metric_points("toolcall_eval.trace.tokens") == []
    assert p.metric_points("toolcall_eval.trace.model_calls") != []
    with t.start_as_current_span("invoke_agent 2", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with t.start_as_current_span("chat m", attributes=bare):
            pass
        chat_turn(t, tokens=(7, 3))
        tool_span(t, "get_weather", {"city": "X"})
    root = scores(p.one("invoke_agent 2"))
    assert (root["trace.model_calls"], root["trace.input_tokens"], root["trace.output_tokens"]) == (2, 7, 3)


def test_histograms_are_off_by_default_and_the_root_keeps_its_numbers() -> None:
    p = make_pipeline(EvalConfig.from_dict(PRICED))
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat_turn(t, tools=[WEATHER_TOOL], calls=[("c1", "get_weather", {"city": "X"})])
        tool_span(t, "get_weather", {"city": "X"}, call_id="c1", error=RuntimeError("down"))
        chat_turn(t, answer="sorry")
    root = scores(p.one("invoke_agent"))
    assert root["trace.cost"] > 0 and root["trace.tool_latency.total"] > 0
    assert root["trace.recovery.classes"] == [HANDED_BACK]
    assert p.metric_points("toolcall_eval.tool.latency") == []
    assert p.metric_points("toolcall_eval.trace.cost") == []
    assert p.metric_sum("toolcall_eval.recoveries", tool="get_weather") == 1  # counters still count
    with pytest.raises(ConfigError, match=r"metrics\.histogram: unknown key"):
        EvalConfig.from_dict({"metrics": {"histogram": False}})


def test_the_terminal_summary_counts_recoveries() -> None:
    from otel_toolcall_eval.commands._summary import SummaryExporter

    p = make_pipeline()
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat_turn(t, tools=[WEATHER_TOOL], calls=[("c1", "get_weather", {"city": "X"})])
        tool_span(t, "get_weather", {"city": "X"}, call_id="c1", error=RuntimeError("down"))
        chat_turn(t, answer="sorry")
    summary = SummaryExporter()
    summary.export(p.spans())
    assert summary.recoveries == {HANDED_BACK: 1}


def test_answered_requests_leave_no_per_request_state() -> None:
    """memory.growth: a trace whose requests were all answered keeps no per-request entries (the requested
    arguments, the pending names, the id maps) and a clean trace no recovery state."""
    p = make_pipeline()
    t = p.tracer
    with t.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        chat_turn(t, tools=[WEATHER_TOOL], calls=[("c1", "get_weather", {"city": "Paris"}), ("c2", "get_weather", {})])
        tool_span(t, "get_weather", {"city": "Paris"}, call_id="c1", result="ok")  # its own arguments recorded
        tool_span(t, "get_weather", {"city": "Oslo"}, call_id="c2", result="ok")
        state = p.processor._pipeline.store.get(root.get_span_context().trace_id, create=False)
        assert state is not None
        requests = state.requests
        assert requests is not None and requests.call_arguments is None
        assert requests.pending_names == {} and requests.call_batches == {}
        assert requests.call_names == {} and requests.unexecuted_calls == 0
        assert state.stats is not None and state.stats.pending is None
