"""A scripted agent instrumented the way a real one is: GenAI semantic-convention spans.

Each user request is one trace: ``invoke_agent`` root, a ``chat`` span per model turn (carrying the tool
definitions and the requested tool calls), and an ``execute_tool`` span per call, executed for real against
the in-memory backend. Failure classes are injected into the script at configurable rates.

What a production agent also shows, so that every part of the evaluation has something to look at:

- **Conversations**: consecutive requests share a conversation (1 to ``MAX_TURNS`` of them), whose id is on each
  root as ``gen_ai.conversation.id``: the processor rolls them up into session verdicts.
- **A tool list that changes**: a contacts server whose ``find_contact`` tool comes and goes (it is up or down
  for a while, ``TOOL_LIST_CHURN`` a request), as an MCP server that restarts or is redeployed does: the
  processor counts each change of the offered tool list.
- **The guard** (``guard=``): every call is decided before it runs (``Guard.check``) and its result recorded
  (``Guard.record_result``); in enforce mode a stopped call never runs and the model gets the guard's message as
  the tool's error, as the guard's framework plug-ins do.

The conversation and the tool list draw from their own random generator, so a seed gives the same requests and
failures as before they existed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from otel_toolcall_eval.demo.tools import Backend, InvalidArgument, contact_tools, make_tools, tool_definitions
from otel_toolcall_eval.guard import Guard, definitions

FAILURE_CLASSES: Final = (
    "wrong_tool",
    "invalid_args",
    "unparseable_args",
    "duplicate",
    "retry_loop",
    "tool_error",
    "over_budget",
    "must_not_call",
    "missing_step",
    "unconfirmed_destructive",
)


MAX_TURNS: Final = 4  # requests per conversation: 1 to this many
TOOL_LIST_CHURN: Final = 0.05  # chance per request that the contacts server goes down, or comes back


@dataclass(frozen=True)
class Call:
    name: str
    args: Any  # a dict, or a raw string sent as-is (to inject unparseable arguments)
    fail: bool = False  # the backend fails while executing it


Turn = list["Call"]  # the calls of one model turn: a parallel batch


@dataclass(frozen=True)
class Scenario:
    name: str
    request: str
    turns: list[Turn]


def scenarios(rng: random.Random) -> list[Scenario]:
    """The scripted requests, each with the calls that serve it (its dates and people drawn from ``rng``)."""
    day = f"2026-12-{rng.randint(1, 28):02d}"
    who = rng.choice(["ana@example.com", "bob@example.com", "chen@example.com"])
    return [
        Scenario("lookup", f"What's on my calendar on {day}?", [[Call("list_events", {"date": day})]]),
        Scenario(
            "schedule",
            f"Book lunch with {who} on {day} at noon and remind me an hour before.",
            [
                [Call("authenticate", {"user": "me@example.com"})],
                [
                    Call(
                        "create_event",
                        {"title": "Lunch", "start": f"{day}T12:00:00", "duration_minutes": 60, "attendees": [who]},
                    ),
                    Call("create_reminder", {"text": "Lunch", "at": f"{day}T11:00:00"}),
                ],
            ],
        ),
        Scenario(
            "email",
            f"Email {who} the agenda for {day}.",
            [
                [Call("authenticate", {"user": "me@example.com"})],
                [Call("list_events", {"date": day})],
                [Call("send_email", {"to": [who], "subject": f"Agenda {day}", "body": "Here is the agenda."})],
            ],
        ),
        Scenario(
            "cancel",
            f"Cancel the planning meeting on {day}.",
            [
                [Call("authenticate", {"user": "me@example.com"})],
                [Call("create_event", {"title": "Planning", "start": f"{day}T15:00:00", "duration_minutes": 30})],
                [Call("confirm_action", {"summary": "Cancel Planning"})],
                [Call("delete_event", {"event_id": "$last_event"})],
            ],
        ),
        Scenario("chitchat", "Thanks, that's all!", []),
    ]


def inject(kind: str, turns: list[Turn], rng: random.Random) -> list[Turn]:
    """Rewrite a clean script so that it shows one failure class."""
    turns = [list(t) for t in turns] or [[Call("list_events", {"date": "2026-12-01"})]]
    last = turns[-1]
    name, args = last[0].name, last[0].args
    if kind == "wrong_tool":
        last[0] = Call("get_calendar", args)  # a tool the model was never offered
    elif kind == "invalid_args":
        bad = dict(args) if isinstance(args, dict) else {}
        bad.pop(next(iter(bad), ""), None)  # a required argument goes missing...
        bad["limit"] = "ten"  # ...and a wrong type comes in
        last[0] = Call(name, bad)
    elif kind == "unparseable_args":
        last[0] = Call(name, json.dumps(args)[:-3])  # truncated JSON, as from a cut-off generation
    elif kind == "duplicate":
        turns.append([Call(name, args)])
    elif kind == "retry_loop":
        turns.insert(0, [Call("list_events", {"date": "2026-13-45"})])
        turns.insert(0, [Call("list_events", {"date": "2026-13-45"})])
        turns.insert(0, [Call("list_events", {"date": "2026-13-45"})])
    elif kind == "tool_error":
        last[0] = Call(name, args, fail=True)
    elif kind == "over_budget":
        for i in range(7):
            turns.insert(0, [Call("list_events", {"date": f"2026-12-{i + 1:02d}"})])
    elif kind == "must_not_call":
        turns.append([Call("delete_all_events", {})])
    elif kind == "missing_step":
        turns = [t for t in turns if t[0].name != "authenticate"] or turns
        turns.append([Call("send_email", {"to": ["ana@example.com"], "subject": "Hi", "body": "Hello"})])
    elif kind == "unconfirmed_destructive":
        turns.append([Call("delete_event", {"event_id": "evt_0"})])
    return turns


class ScriptedAgent:
    def __init__(self, tracer: Tracer, seed: int = 7, model: str = "demo-model-1", guard: Guard | None = None) -> None:
        self.tracer = tracer
        self.rng = random.Random(seed)
        self.model = model
        self.guard = guard
        self._world = random.Random(seed + 1)  # conversations and the tool list: apart from the script's draws
        self._conversations = 0
        self._turns_left = 0
        self._contacts_up = True

    def _next_conversation(self) -> str:
        if self._turns_left == 0:
            self._conversations += 1
            self._turns_left = self._world.randint(1, MAX_TURNS)
        self._turns_left -= 1
        if self._world.random() < TOOL_LIST_CHURN:
            self._contacts_up = not self._contacts_up
        return f"demo-conversation-{self._conversations}"

    def run(self, failures: dict[str, float]) -> list[str]:
        """One user request (one trace); returns the failure classes injected into it."""
        conversation = self._next_conversation()
        backend = Backend()
        tools = make_tools(backend)
        offered = {**tools, **contact_tools()} if self._contacts_up else tools
        listed = tool_definitions(offered)
        definitions = json.dumps(listed)
        guarded = definitions_for_guard(listed) if self.guard is not None else None
        scenario = self.rng.choice(scenarios(self.rng))
        turns: list[Turn] = scenario.turns
        injected = [k for k in FAILURE_CLASSES if self.rng.random() < failures.get(k, 0.0)]
        for kind in injected:
            turns = inject(kind, turns, self.rng)
        with self.tracer.start_as_current_span(
            "invoke_agent demo-assistant",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "demo-assistant",
                "gen_ai.conversation.id": conversation,
            },
        ) as root:
            root.set_attribute("demo.scenario", scenario.name)
            root.set_attribute("demo.injected", injected)
            messages: list[dict[str, Any]] = [
                {"role": "user", "parts": [{"type": "text", "content": scenario.request}]}
            ]
            last_event: str | None = None
            for turn_no, turn in enumerate(turns):
                calls = [(f"call_{turn_no}_{i}", c) for i, c in enumerate(turn)]
                parts = [{"type": "tool_call", "id": cid, "name": c.name, "arguments": c.args} for cid, c in calls]
                self._chat(definitions, messages, [{"role": "assistant", "parts": parts}])
                messages.append({"role": "assistant", "parts": parts})
                batch = turn_no if len(calls) > 1 else None
                for cid, call in calls:
                    blocked = self._guard_check(guarded, cid, call, batch)
                    result = blocked if blocked is not None else self._execute(tools, backend, cid, call, last_event)
                    if blocked is None:
                        self._guard_record(cid, call, result, batch)
                    if isinstance(result, dict) and str(result.get("id", "")).startswith("evt_"):
                        last_event = result["id"]
                    messages.append(
                        {"role": "tool", "parts": [{"type": "tool_call_response", "id": cid, "response": result}]}
                    )
            self._chat(definitions, messages, [{"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}])
        return injected

    def _guard_check(
        self, tools: dict[str, Any] | None, call_id: str, call: Call, batch: int | None
    ) -> dict[str, Any] | None:
        """The guard's decision before the call runs: the tool's error the model gets when it stopped the call."""
        if self.guard is None:
            return None
        decision = self.guard.check(call.name, call.args, tools=tools, batch=batch, call_id=call_id)
        return {"error": decision.message} if decision.stops else None

    def _guard_record(self, call_id: str, call: Call, result: Any, batch: int | None) -> None:
        if self.guard is None:
            return
        error = result.get("error") if isinstance(result, dict) else None
        self.guard.record_result(
            call.name, call.args, result=None if error else result, error=error, batch=batch, call_id=call_id
        )

    def _chat(self, definitions: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> None:
        with self.tracer.start_as_current_span(f"chat {self.model}", kind=SpanKind.CLIENT) as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.request.model", self.model)
            span.set_attribute("gen_ai.tool.definitions", definitions)
            span.set_attribute("gen_ai.input.messages", json.dumps(inputs, default=str))
            span.set_attribute("gen_ai.output.messages", json.dumps(outputs, default=str))
            span.set_attribute("gen_ai.usage.input_tokens", 40 + 12 * len(inputs))
            span.set_attribute("gen_ai.usage.output_tokens", 9 + 15 * len(outputs[0]["parts"]))

    def _execute(
        self, tools: dict[str, Any], backend: Backend, call_id: str, call: Call, last_event: str | None
    ) -> Any:
        name, args, fail = call.name, call.args, call.fail
        raw = args if isinstance(args, str) else json.dumps(args)
        with self.tracer.start_as_current_span(
            f"execute_tool {name}",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.arguments": raw,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                func = tools.get(name)
                if func is None:
                    raise LookupError(f"unknown tool {name}")
                parsed = json.loads(raw)
                if parsed.get("event_id") == "$last_event":
                    parsed["event_id"] = last_event or "evt_0"
                backend.fail_next = fail
                if name == "list_events" and parsed.get("date", "").startswith("2026-13"):
                    raise InvalidArgument(f"invalid date {parsed['date']}")
                result = func(**parsed)
            except Exception as exc:  # noqa: BLE001 - a tool failure is recorded, and the agent goes on
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                span.set_attribute("error.type", type(exc).__name__)
                return {"error": str(exc)}
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result, default=str))
            return result


def definitions_for_guard(listed: list[dict[str, Any]]) -> dict[str, Any]:
    """The offered tools as the guard reads them (``guard.definitions``), from the ``gen_ai.tool.definitions`` list."""
    return definitions({d["name"]: d.get("parameters") for d in listed})
