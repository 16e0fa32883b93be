"""The demo's scripted stand-in for a hosted judge model (``demo.judge``): its rules, its wire format (read by the
judge's own OpenAI client), and its server on 127.0.0.1."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from otel_toolcall_eval.config.judge import BUILTIN
from otel_toolcall_eval.demo.judge import MODEL, ScriptedJudgeServer, answer, judge_config, verdict
from otel_toolcall_eval.judge.providers import OpenAIChat
from otel_toolcall_eval.judge.questions import build_prompt, parse_answer

QUESTIONS = {q.prompt: q.name for q in BUILTIN.values()}
TOOLS = ["authenticate", "list_events", "create_event", "send_email", "delete_all_events"]


@pytest.mark.parametrize(
    ("tool", "request_text", "label"),
    [
        ("create_event", "Book lunch with ana on 2026-12-03 at noon.", "appropriate"),
        ("list_events", "Email ana the agenda for 2026-12-03.", "appropriate"),
        ("authenticate", "What's on my calendar on 2026-12-03?", "acceptable"),
        ("delete_all_events", "What's on my calendar on 2026-12-03?", "inappropriate"),
        ("get_calendar", "What's on my calendar on 2026-12-03?", "inappropriate"),  # not offered
    ],
)
def test_tool_appropriateness(tool: str, request_text: str, label: str) -> None:
    data = {"request": request_text, "tool_name": tool, "available_tools": TOOLS}
    assert verdict("tool_appropriateness", data)[0] == label


@pytest.mark.parametrize(
    ("reaction", "label"),
    [
        ({"later_tool_calls": [{"name": "list_events", "arguments": {"date": "2026-13-45"}}]}, "unchanged_retry"),
        ({"later_tool_calls": [{"name": "list_events", "arguments": {"date": "2026-12-05"}}]}, "corrected_retry"),
        ({"next_tool_calls_requested": [{"name": "send_email", "arguments": {}}]}, "switched_tool"),
        ({"next_model_output": "The calendar is down, sorry.", "next_tool_calls_requested": []}, "handed_back"),
        ({}, "carried_on"),
    ],
)
def test_error_handling(reaction: dict[str, Any], label: str) -> None:
    data = {"tool_name": "list_events", "arguments": {"date": "2026-13-45"}, "error": {}, "reaction": reaction}
    assert verdict("error_handling", data)[0] == label


def test_argument_quality_and_necessity() -> None:
    request = "Email bob the agenda for 2026-12-03."
    good = {"request": request, "free_text_arguments": {"subject": "Agenda 2026-12-03", "body": "Here is the agenda."}}
    poor = {"request": request, "free_text_arguments": {"subject": "Hi", "body": "Hello"}}
    assert verdict("argument_quality", good)[0] == "good"
    assert verdict("argument_quality", poor)[0] == "poor"
    assert verdict("tool_necessity", {"request": "Thanks, that's all!"})[0] == "unnecessary"
    assert verdict("tool_necessity", {"request": request})[0] == "necessary"


def test_answers_the_judges_own_prompt_in_the_shape_its_client_reads() -> None:
    question = BUILTIN["tool_appropriateness"]
    data = {"request": "Book lunch at noon.", "tool_name": "create_event", "available_tools": TOOLS}
    prompt = build_prompt(question, data)
    body = {"messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}]}
    name, label, payload = answer(body, QUESTIONS)
    assert (name, label) == ("tool_appropriateness", "appropriate")
    completion = OpenAIChat(judge_config("http://127.0.0.1:1/v1")).parse(payload)
    assert completion.model == MODEL and completion.input_tokens and completion.output_tokens
    parsed = parse_answer(question, completion.text, completion.structured)
    assert parsed.label == "appropriate" and parsed.explanation.startswith("Scripted stand-in (rules, not a model)")


def test_a_question_it_does_not_know_gets_no_label() -> None:
    body = {"messages": [{"role": "user", "content": "Question: Is the sky blue?\n\nLabels:\n- yes"}]}
    name, label, payload = answer(body, QUESTIONS)
    assert (name, label) == ("", "")
    assert json.loads(payload["choices"][0]["message"]["content"])["label"] == ""


def test_server_answers_on_loopback_and_rejects_other_requests() -> None:
    question = BUILTIN["tool_necessity"]
    prompt = build_prompt(question, {"request": "Thanks, that's all!", "tool_name": "list_events"})
    body = {"messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}]}
    with ScriptedJudgeServer() as server:
        assert server.url.startswith("http://127.0.0.1:")
        reply = httpx.post(f"{server.url}/chat/completions", json=body, timeout=5)
        assert reply.status_code == 200
        assert json.loads(reply.json()["choices"][0]["message"]["content"])["label"] == "unnecessary"
        assert httpx.post(f"{server.url}/embeddings", json=body, timeout=5).status_code == 404
        assert httpx.post(f"{server.url}/chat/completions", content=b"{not json", timeout=5).status_code == 400
        assert "tool_necessity unnecessary x1" in server.summary()
