"""The guard on its own: enforce and shadow, history per scope, approvals, and the record it leaves."""

from __future__ import annotations

from typing import Any

import pytest

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval.config import ConfigError
from otel_toolcall_eval.guard import Action, ToolCallBlocked
from tests.helpers import GUARD_CONFIG, Recorded


def test_each_policy_stops_its_call_with_a_message_the_agent_can_act_on() -> None:
    r = Recorded()
    g = r.guard
    with g.scope("a"):
        assert g.check("search", {"q": "paris"}).action is Action.ALLOW
        wipe = g.check("wipe", {})
        assert wipe.stops and wipe.policy == "must_not_call" and "'wipe' must never be called" in wipe.message
        send = g.check("send_email", {"to": "x@y.z"})
        assert send.stops and send.policy == "required_steps" and "'login' must succeed" in send.message
        delete = g.check("delete_records", {"filter": {"id": 1}})
        assert delete.action is Action.ASK and delete.stops and "needs approval" in delete.message
        unscoped = g.check("delete_records", {})
        assert {f.policy for f in unscoped.findings} == {"destructive_tools", "argument_rules"}
        assert unscoped.action is Action.BLOCK
        bad = g.check("search", {"q": 3})
        assert bad.policy == "schema" and '/q: 3 is not of type "string"' in bad.message
        assert g.check("search", "{broken").findings[0].rule == "parse:invalid_json"
        extra = g.check("search", {"q": "x", "limit": 3})
        assert extra.policy == "undeclared_arguments" and "limit" in extra.message
        assert g.check("ghost", {}).policy == "unknown_tool"


def test_stopped_calls_never_enter_the_history_and_results_open_the_way() -> None:
    g = Recorded().guard
    with g.scope("a"):
        assert g.check("send_email", {"to": "x"}).stops
        assert g.check("login", {}).action is Action.ALLOW
        g.record_result("login", {}, result="ok")
        assert g.check("send_email", {"to": "x"}).action is Action.ALLOW  # login succeeded first
        g.record_result("send_email", {"to": "x"}, error=RuntimeError("smtp down"))
        again = g.check("send_email", {"to": "x"})
        assert again.policy == "repeated_failure" and again.stops
        assert g.check("send_email", {"to": "y"}).action is Action.ALLOW  # a changed call is not a repeat
        # two calls ran (login, send_email); blocked ones did not count towards the step budget
        assert g.precheck("search", {"q": "a"}).step == 3


def test_a_failed_prerequisite_does_not_count() -> None:
    g = Recorded().guard
    with g.scope("a"):
        g.record_result("login", {}, error="denied")
        assert g.check("send_email", {"to": "x"}).policy == "required_steps"


def test_the_step_budget_blocks_the_call_past_it() -> None:
    g = Recorded().guard
    with g.scope("a"):
        for i in range(5):
            assert g.check("search", {"q": str(i)}).action is Action.ALLOW
            g.record_result("search", {"q": str(i)}, result="ok")
        over = g.check("search", {"q": "six"})
        assert over.policy == "step_budget" and "over the step budget of 5" in over.message


def test_scopes_keep_histories_apart_and_default_to_the_current_trace() -> None:
    r = Recorded()
    g = r.guard
    with r.tracer.start_as_current_span("run 1"):
        g.record_result("login", {}, result="ok")
        assert not g.check("send_email", {"to": "x"}).stops
    with r.tracer.start_as_current_span("run 2"):
        assert g.check("send_email", {"to": "x"}).stops  # another trace: login did not happen there
    with g.scope("c1"):
        g.record_result("login", {}, result="ok")
    assert not g.check("send_email", {"to": "x"}, scope="c1").stops
    assert g.check("send_email", {"to": "x"}).stops  # no scope, no trace: judged alone


def test_shadow_mode_decides_and_records_but_never_stops() -> None:
    r = Recorded(mode="shadow")
    decision = r.guard.check("wipe", {})
    assert decision.action is Action.BLOCK and not decision.stops and not decision.enforced
    (span,) = r.spans()
    assert span.attributes["toolcall_eval.guard.mode"] == "shadow"
    assert span.attributes["gen_ai.guardrail.result.value"] == "block"
    assert span.attributes["toolcall_eval.guard.prevented"] is False
    threat = next(e for e in span.events if e.name == "agent.threat.detection")
    assert threat.attributes["agent.threat.detection.action"] == "warn"  # it proceeded: the concern is recorded


def test_an_ask_goes_to_the_approval_hook() -> None:
    asked = []
    r = Recorded(approve=lambda d: asked.append(d.tool) or True)
    decision = r.guard.check("delete_records", {"filter": {"id": 1}})
    assert asked == ["delete_records"] and decision.approved is True and not decision.stops
    assert r.spans()[0].attributes["toolcall_eval.guard.approved"] is True
    refused = Recorded(approve=lambda d: False).guard.check("delete_records", {"filter": {}})
    assert refused.stops and refused.approved is False

    def broken(decision: Any) -> bool:
        raise RuntimeError("approval service down")

    assert Recorded(approve=broken).guard.check("delete_records", {"filter": {}}).stops  # fails closed


def test_the_record_follows_the_guardrail_convention() -> None:
    r = Recorded()
    with r.tracer.start_as_current_span("agent") as agent:
        r.guard.check("wipe", {"target": "SECRET-VALUE"}, call_id="call_1")
    guard_span = next(s for s in r.spans() if s.name == "apply_guardrail otel-toolcall-eval")
    assert guard_span.parent is not None and guard_span.parent.span_id == agent.get_span_context().span_id
    a = guard_span.attributes
    assert a["gen_ai.operation.name"] == "apply_guardrail"
    assert a["gen_ai.guardrail.component.name"] == "otel-toolcall-eval"
    assert a["gen_ai.guardrail.source"] == "tool_input"
    assert a["gen_ai.guardrail.policy.id"] == "toolcall-eval"
    assert len(a["gen_ai.guardrail.policy.version"]) == 16
    assert a["gen_ai.guardrail.result.type"] == "action" and a["gen_ai.guardrail.result.value"] == "block"
    assert a["gen_ai.guardrail.result.reason"] == "the tool is on policies.must_not_call"
    assert a["gen_ai.tool.name"] == "wipe" and a["gen_ai.tool.call.id"] == "call_1"
    assert a["toolcall_eval.guard.prevented"] is True and list(a["toolcall_eval.guard.policies"]) == ["must_not_call"]
    recorded = [*a.values(), *(v for e in guard_span.events for v in e.attributes.values())]
    assert not any("SECRET" in str(v) for v in recorded)  # argument values are never recorded
    result = next(e for e in guard_span.events if e.name == "gen_ai.guardrail.result")
    assert result.attributes["gen_ai.guardrail.policy.id"] == "must_not_call"
    assert result.attributes["gen_ai.guardrail.policy.rule.id"] == "must_not_call"
    threat = next(e for e in guard_span.events if e.name == "agent.threat.detection")
    assert threat.attributes["agent.threat.detection.action"] == "block"
    assert threat.attributes["agent.threat.detection.severity"] == "critical"
    assert threat.attributes["agent.threat.detection.rule_id"] == "must_not_call/must_not_call"
    assert threat.attributes["agent.threat.detection.ruleset"].startswith("otel-toolcall-eval@")
    assert threat.attributes["agent.threat.detection.correlation_id"] == "call_1"


def test_allowed_calls_are_counted_and_get_a_span_only_with_record_all() -> None:
    r = Recorded()
    r.guard.check("search", {"q": "a"})
    r.guard.check("wipe", {})
    r.guard.check("invented", {})
    assert len(r.spans()) == 2
    decisions = r.metric("toolcall_eval.guard.decisions")
    assert decisions[(("decision", "allow"), ("mode", "enforce"), ("prevented", "false"), ("tool", "search"))] == 1
    assert decisions[(("decision", "block"), ("mode", "enforce"), ("prevented", "true"), ("tool", "wipe"))] == 1
    assert decisions[(("decision", "block"), ("mode", "enforce"), ("prevented", "true"), ("tool", "_unknown"))] == 1
    findings = r.metric("toolcall_eval.guard.findings")
    assert findings[(("action", "block"), ("mode", "enforce"), ("policy", "must_not_call"), ("tool", "wipe"))] == 1
    every = Recorded({**GUARD_CONFIG, "guard": {"record": "all"}})
    every.guard.check("search", {"q": "a"})
    assert len(every.spans()) == 1


def test_actions_are_configured_per_policy_and_checked_at_start_up() -> None:
    r = Recorded({**GUARD_CONFIG, "guard": {"actions": {"must_not_call": "warn", "destructive_tools": "block"}}})
    assert r.guard.check("wipe", {}).action is Action.WARN and not r.guard.check("wipe", {}).stops
    assert r.guard.check("delete_records", {"filter": {}}).action is Action.BLOCK
    with pytest.raises(ConfigError, match=r"guard\.actions: Value error, unknown policies"):
        EvalConfig.from_dict({"guard": {"actions": {"must_not_cal": "block"}}})
    with pytest.raises(ConfigError, match=r"guard\.actions\.must_not_call: Input should be"):
        EvalConfig.from_dict({"guard": {"actions": {"must_not_call": "deny"}}})


def test_run_wraps_a_callable() -> None:
    g = Recorded().guard
    calls = []
    with g.scope("a"):
        assert g.run("search", {"q": "a"}, lambda: calls.append("ran") or "result") == "result"
        with pytest.raises(ToolCallBlocked, match="must never be called") as blocked:
            g.run("wipe", {}, lambda: calls.append("wiped"))
        assert blocked.value.decision.policy == "must_not_call"
    assert calls == ["ran"]


def test_an_application_may_subclass_the_guard() -> None:
    """``Guard`` is compiled in the platform wheels (setup.py); a subclass of the application's, e.g. one that
    logs every decision, must keep working there as in the pure build (mypyc refuses interpreted subclasses of a
    native class unless it allows them)."""
    from otel_toolcall_eval.guard import Guard

    seen: list[str] = []

    class Logged(Guard):
        def check(self, name: str, arguments: Any, **where: Any) -> Any:
            decision = super().check(name, arguments, **where)
            seen.append(f"{name}:{decision.action.value}")
            return decision

    g = Logged(EvalConfig.from_dict(GUARD_CONFIG))
    with g.scope("a"):
        assert g.check("send_email", {"to": "x"}).stops
        assert g.check("login", {}).action is Action.ALLOW
    assert seen == ["send_email:block", "login:allow"]
