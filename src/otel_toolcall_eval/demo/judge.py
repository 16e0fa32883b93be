"""``demo --judge``: the real LLM judge, answered by a scripted local stand-in for a hosted model.

The demo must run without a network, an API key or a model, and the judge needs a model to ask. Everything of the
judge is the product's own (``otel_toolcall_eval.judge``: sampling paced by the budget, prompts, redaction, its
OpenAI-compatible HTTP client with retries and deadlines, the spend ledger, verdict spans, events and metrics);
only the model is replaced. ``ScriptedJudgeServer`` serves the OpenAI chat-completions API on 127.0.0.1 (an
ephemeral port, in this process, for as long as the demo runs) and answers each question with a label chosen by
fixed rules from the evidence in the prompt (``verdict``), with the token usage a model would report.

**Its verdicts are not a model's judgement.** The model is named ``scripted-stand-in``, every explanation starts
with "Scripted stand-in", and the demo says so when it starts. Its spend is priced as a small hosted model would be
(``STAND_IN_PRICE``) so that the spend panels and the budget show what they would. For real verdicts, give the
demo a config whose ``judge:`` section names a real model (docs/judge.md): ``demo --config`` uses it as is.

**Agreement with people.** The dashboard's kappa panel reads the newest calibration record of the judge's current
fingerprint (``judge.calibration``, written by ``judge agreement --calibration`` from people's labels). The demo
has no people: ``calibrate`` measures the stand-in against the demo's planted truth instead (the tools each
scripted request calls for, and the wrong calls its failure classes plant), with the product's own agreement
figures, and writes that record to a temporary calibration file; the demo says so when it starts.

Why a server and not an in-process transport: the judge is then exactly what a user runs against a local model
server (vLLM, Ollama, llama.cpp speak the same API), configured by ``judge.base_url`` alone.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from otel_toolcall_eval.checks.agreement import agreement, pass_fail_rates
from otel_toolcall_eval.config.judge import BUILTIN, Budget, Calibration, JudgeConfig, Price, Sampling
from otel_toolcall_eval.demo.agent import scenarios
from otel_toolcall_eval.demo.tools import Backend, make_tools
from otel_toolcall_eval.judge.calibration import CalibrationRecord, append_records
from otel_toolcall_eval.judge.fingerprint import fingerprints

MODEL: Final = "scripted-stand-in"
# priced as a small hosted model (per 1M tokens), so that the spend panels and the budget have something to show
STAND_IN_PRICE: Final = Price(input_per_million=0.15, output_per_million=0.60)
MAX_REQUEST_BYTES: Final = 1 << 20
_DATA = re.compile(r"<(data-[0-9a-f]+)>\n(.*)\n</\1>\s*$", re.S)
_WORD = re.compile(r"[a-z]{4,}")
# The tools each kind of request calls for (the demo's own tools, demo.tools): the stand-in's whole "understanding".
_WANTED: Final = {
    "list_events": ("calendar", "agenda"),
    "create_event": ("book", "lunch"),
    "create_reminder": ("remind",),
    "send_email": ("email",),
    "delete_event": ("cancel",),
    "confirm_action": ("cancel",),
    "authenticate": ("book", "email", "cancel"),
    "find_contact": ("email", "book"),
}
_CLOSING: Final = ("thanks", "that's all")


QUESTIONS: Final = {q.prompt: q.name for q in BUILTIN.values()}  # how the stand-in knows which question it is asked
CALIBRATED: Final = "tool_appropriateness"  # the question ``calibrate`` measures
# the wrong calls the demo's failure classes plant (demo.agent.inject): an unknown tool, the must-not-call tool, and
# a mail nobody asked for
_PLANTED: Final = ("get_calendar", "delete_all_events", "send_email")


def judge_config(base_url: str, *, calibration: Calibration | None = None) -> JudgeConfig:
    """The ``judge:`` section the demo runs with: the built-in questions, the stand-in's URL and price, a budget
    that lets it judge about one call a second, and sampling that starts at half the traces."""
    return JudgeConfig(
        provider="openai",
        model=MODEL,
        base_url=base_url,
        price=STAND_IN_PRICE,
        budget=Budget(amount=1.0, period="hour"),
        sampling=Sampling(initial_rate=0.5, update_interval_seconds=2.0),
        request_timeout_seconds=5.0,
        shutdown_timeout_seconds=5.0,
        calibration=calibration,
    )


def planted_truth(requests: int = 60, seed: int = 0) -> list[tuple[dict[str, Any], str]]:
    """(the data ``tool_appropriateness`` receives, the right label) for the calls of ``requests`` scripted requests:
    each scripted call is the right tool for its request by construction, each planted wrong call is not."""
    rng = random.Random(seed)
    offered = list(make_tools(Backend()))
    items: list[tuple[dict[str, Any], str]] = []
    for _ in range(requests):
        scenario = rng.choice(scenarios(rng))
        tools = [call.name for turn in scenario.turns for call in turn]
        for tool in tools:
            items.append(({"request": scenario.request, "tool_name": tool, "available_tools": offered}, "appropriate"))
        wrong = rng.choice([t for t in _PLANTED if t not in tools])
        items.append(({"request": scenario.request, "tool_name": wrong, "available_tools": offered}, "inappropriate"))
    return items


def calibrate(config: JudgeConfig, path: Path) -> CalibrationRecord:
    """The stand-in's agreement with ``planted_truth`` on ``CALIBRATED``, appended to ``path`` as the calibration
    record of ``config``'s fingerprint (what ``judge agreement --calibration`` writes from people's labels)."""
    items = planted_truth()
    truth = [label for _, label in items]
    answered = [verdict(CALIBRATED, data)[0] for data, _ in items]
    stats = agreement(truth, answered, [s.label for s in BUILTIN[CALIBRATED].scale])
    tpr, tnr = pass_fail_rates(truth, answered, BUILTIN[CALIBRATED].passing)
    record = CalibrationRecord(
        question=CALIBRATED,
        fingerprint=fingerprints(config)[CALIBRATED],
        provider=config.provider,
        model=config.model,
        n=stats.n,
        kappa=stats.kappa,
        kappa_ci=None,
        weighted_kappa=None,
        raw_agreement=stats.raw,
        tpr=tpr,
        tnr=tnr,
        labels_from=None,
        labels_to=None,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    append_records(path, [record])
    return record


def verdict(question: str, data: dict[str, Any]) -> tuple[str, str]:
    """(label, explanation) for one of the built-in questions, from the evidence the judge sent."""
    if question == "tool_appropriateness":
        return _appropriateness(data)
    if question == "argument_quality":
        return _argument_quality(data)
    if question == "error_handling":
        return _error_handling(data)
    if question == "tool_necessity":
        request = str(data.get("request") or "").lower()
        if any(word in request for word in _CLOSING):
            return "unnecessary", "the user was closing the conversation"
        return "necessary", "the request asks for calendar, mail or reminder data or an action"
    raise KeyError(question)


def _appropriateness(data: dict[str, Any]) -> tuple[str, str]:
    tool, request = str(data.get("tool_name")), str(data.get("request") or "").lower()
    if tool not in (data.get("available_tools") or ()):
        return "inappropriate", f"{tool} is not among the tools offered"
    wanted = _WANTED.get(tool, ())
    if any(word in request for word in wanted):
        return "appropriate", f"the request calls for {tool}"
    if tool in ("authenticate", "list_events"):
        return "acceptable", f"{tool} does no harm here, but the request does not call for it"
    return "inappropriate", f"nothing in the request calls for {tool}"


def _argument_quality(data: dict[str, Any]) -> tuple[str, str]:
    request = set(_WORD.findall(str(data.get("request") or "").lower()))
    texts = data.get("free_text_arguments")
    values = [str(v) for v in texts.values()] if isinstance(texts, dict) else [str(texts or "")]
    related = [bool(request & set(_WORD.findall(v.lower()))) for v in values]
    if all(related):
        return "good", "every free-text argument uses the request's own words"
    if any(related):
        return "partial", "some free-text arguments share nothing with the request"
    return "poor", "the free-text arguments share nothing with the request"


def _error_handling(data: dict[str, Any]) -> tuple[str, str]:
    found = data.get("reaction")
    reaction: dict[str, Any] = found if isinstance(found, dict) else {}
    calls = [c for c in _calls(reaction) if isinstance(c, dict)]
    tool, arguments = data.get("tool_name"), data.get("arguments")
    if calls:
        first = calls[0]
        if first.get("name") == tool:
            if first.get("arguments") == arguments:
                return "unchanged_retry", f"called {tool} again with the same arguments"
            return "corrected_retry", f"called {tool} again with other arguments"
        return "switched_tool", f"went on with {first.get('name')}"
    if str(reaction.get("next_model_output") or "").strip():
        return "handed_back", "answered the user after the failure"
    return "carried_on", "nothing after the failure shows it was noticed"


def _calls(reaction: dict[str, Any]) -> Iterable[Any]:
    for key in ("next_tool_calls_requested", "later_tool_calls"):
        value = reaction.get(key)
        if isinstance(value, list):
            yield from value


def answer(body: dict[str, Any], questions: dict[str, str]) -> tuple[str, str, dict[str, Any]]:
    """(question, label, the chat-completions response) for one judge request (``questions``: question prompt ->
    question name; an unknown question gets no label, which the judge records as an error verdict)."""
    messages = body.get("messages") or []
    user = next((str(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"), "")
    prompt = user.split("\n\n", 1)[0].removeprefix("Question: ")
    match = _DATA.search(user)
    data = json.loads(match.group(2)) if match else {}
    question = questions.get(prompt)
    label, why = verdict(question, data) if question is not None else ("", "not a question the stand-in knows")
    content = json.dumps({"label": label, "explanation": f"Scripted stand-in (rules, not a model): {why}."})
    prompt_tokens = sum(len(str(m.get("content", ""))) for m in messages if isinstance(m, dict)) // 4 + 1
    return (
        question or "",
        label,
        {
            "id": "chatcmpl-scripted-stand-in",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(content) // 4 + 1,
                "total_tokens": prompt_tokens + len(content) // 4 + 1,
            },
        },
    )


class _Handler(BaseHTTPRequestHandler):
    """Answers ``POST /v1/chat/completions`` for the ``ScriptedJudgeServer`` it serves (``server.stand_in``)."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if self.path != "/v1/chat/completions" or not 0 < length <= MAX_REQUEST_BYTES:
            self._send(404 if length else 400, {"error": {"message": "not a chat completion"}})
            return
        try:
            question, label, payload = answer(json.loads(self.rfile.read(length)), QUESTIONS)
        except (ValueError, TypeError, AttributeError) as exc:
            self._send(400, {"error": {"message": f"bad request: {exc}"}})
            return
        self.server.stand_in.count(question, label)
        self._send(200, payload)

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, stand_in: ScriptedJudgeServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.stand_in = stand_in


class ScriptedJudgeServer:
    """The stand-in's HTTP server on 127.0.0.1 (``start``/``stop``, or a context manager); ``url`` is the base URL
    a ``judge.base_url`` takes."""

    def __init__(self) -> None:
        self._server: _Server | None = None
        self.url = ""
        self.answered: Counter[tuple[str, str]] = Counter()  # (question, label) -> answers
        self._lock = threading.Lock()

    def start(self) -> ScriptedJudgeServer:
        self._server = _Server(self)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, args=(0.1,), daemon=True).start()
        return self

    def count(self, question: str, label: str) -> None:
        with self._lock:
            self.answered[(question, label)] += 1

    def summary(self) -> str:
        """What the stand-in answered so far, by question and label."""
        with self._lock:
            counts = sorted(self.answered.items())
        if not counts:
            return "no call judged yet"
        return "scripted answers " + "; ".join(f"{q} {label} x{n}" for (q, label), n in counts)

    def stop(self) -> None:
        """Stop serving (``shutdown`` returns once ``serve_forever`` has, so its thread ends) and close the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedJudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
