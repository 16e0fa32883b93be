"""The guard: the processor's policies, enforced before a tool runs.

``Guard.check`` asks the engine what it would flag about the call (``engine.precheck``), turns that into a
decision (``engine.guard``) and records it (``guard.record``); ``Guard.record_result`` scores the call once it has
run, through the same ``Scorer.score`` the processor uses, so the next call is judged against the same history the
processor keeps. A stopped call is never recorded as run: it never happened, for the guard as for the processor.

History is per scope: an explicit one (``with guard.scope("conversation-1")``, or the ``scope=`` argument), else
the current OpenTelemetry trace. With neither, each call is judged alone (no earlier calls: a required step or
a confirmation cannot have happened, so those policies stop the call; say where the conversation is).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from hashlib import blake2b
from typing import Any, TypeVar

from mypy_extensions import mypyc_attr
from opentelemetry import trace as trace_api
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from otel_toolcall_eval import _json
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.engine import Scorer, call_digest_of
from otel_toolcall_eval.engine.guard import Action, Decision, decide
from otel_toolcall_eval.engine.precheck import PreCheck, precheck
from otel_toolcall_eval.guard.record import GuardRecorder
from otel_toolcall_eval.records import (
    NO_ERROR,
    CallHistory,
    ErrorEvidence,
    Outcome,
    ParseStatus,
    ToolCallRecord,
    ToolDefinition,
    new_call_history,
)

T = TypeVar("T")
Approver = Callable[[Decision], bool]

_SCOPE: ContextVar[str | None] = ContextVar("otel_toolcall_eval_guard_scope", default=None)


class ToolCallBlocked(Exception):
    """Raised by ``Guard.run`` (and the function decorator) when the guard stops a call; ``str()`` is the message
    for the agent, ``decision`` the whole decision."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(decision.message)
        self.decision = decision


@dataclass(slots=True)
class _State:
    """What the guard remembers of one scope: the engine's history, the failed calls' digests, the tools seen."""

    history: CallHistory = field(default_factory=new_call_history)
    failed: set[bytes] = field(default_factory=set)
    tools: dict[str, ToolDefinition] | None = None
    merged: dict[str, ToolDefinition] | None = None  # the tools last merged into ``tools``
    lock: threading.Lock = field(default_factory=threading.Lock)


def definitions(schemas: Mapping[str, Mapping[str, Any] | None]) -> dict[str, ToolDefinition]:
    """Tool definitions from ``{name: JSON Schema of its parameters}``: build them once per tool list (the engine
    memoises its schema resolution per definition object)."""
    out = {}
    for name, schema in schemas.items():
        params = None if schema is None else dict(schema)
        out[name] = ToolDefinition(name, params, None, None if params is None else _json.canonical(params))
    return out


def policy_version(config: EvalConfig) -> str:
    """16 hex digits over what the guard enforces (policies, tools, limits, actions): changes with the config."""
    body = config.model_dump_json(include={"tools", "policies", "errors", "limits", "guard"})
    return blake2b(body.encode(), digest_size=8).hexdigest()


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled, it stays a class applications may subclass (a hook)
class Guard:
    """Decide before a tool runs; thread-safe; never raises into the caller from its recording."""

    def __init__(
        self,
        config: EvalConfig | None = None,
        *,
        mode: str | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        approve: Approver | None = None,
    ) -> None:
        """``mode``: ``enforce`` or ``shadow``, over the config's ``guard.mode``. ``approve``: asked for every
        enforced ``ask`` decision (e.g. a destructive tool without its confirmation); True lets the call run."""
        config = config if config is not None else EvalConfig()
        settings = config.guard
        chosen = mode if mode is not None else settings.mode
        if chosen not in ("enforce", "shadow"):
            raise ValueError(f"mode: expected 'enforce' or 'shadow', got {chosen!r}")
        self.config = config
        self.policy = config.policy()
        self.scorer = Scorer(self.policy)
        self.shadow = chosen == "shadow"
        self.actions = {p: Action(a) for p, a in settings.actions.items()}
        self.approve = approve
        self.recorder = GuardRecorder(
            tracer_provider,
            meter_provider,
            record_all=settings.record == "all",
            policy_id=settings.policy_id,
            policy_version=policy_version(config),
            known_tools=self.policy.tools,
        )
        self._max_scopes = settings.max_scopes
        self._states: OrderedDict[str, _State] = OrderedDict()
        self._lock = threading.Lock()

    # --- scopes ---------------------------------------------------------------------------------------------
    @contextmanager
    def scope(self, key: str) -> Iterator[None]:
        """Calls inside share one history under ``key`` (a conversation, a run), whatever the trace."""
        token = _SCOPE.set(key)
        try:
            yield
        finally:
            _SCOPE.reset(token)

    def _state(self, scope: str | None) -> _State:
        key = scope if scope is not None else _SCOPE.get()
        if key is None:
            context = trace_api.get_current_span().get_span_context()
            if not context.is_valid:
                return _State()  # no scope, no trace: judged alone
            key = format(context.trace_id, "032x")
        with self._lock:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = _State()
                while len(self._states) > self._max_scopes:
                    self._states.popitem(last=False)
            else:
                self._states.move_to_end(key)
            return state

    def forget(self, scope: str) -> None:
        """Drop a scope's history (a conversation that ended)."""
        with self._lock:
            self._states.pop(scope, None)

    # --- deciding ---------------------------------------------------------------------------------------------
    def precheck(
        self,
        name: str,
        arguments: Any,
        *,
        scope: str | None = None,
        tools: dict[str, ToolDefinition] | None = None,
        batch: int | None = None,
    ) -> PreCheck:
        """The engine's verdicts on the call, unrecorded: what ``check`` decides from."""
        state = self._state(scope)
        with state.lock:
            if tools is not None and tools is not state.merged:  # a plug-in passes the same dict each call
                state.tools = tools if state.tools is None else {**state.tools, **tools}
                state.merged = tools
            return precheck(self.scorer, name, arguments, state.history, trace_tools=state.tools, batch=batch,
                            failed_calls=state.failed)  # fmt: skip

    def check(
        self,
        name: str,
        arguments: Any,
        *,
        scope: str | None = None,
        tools: dict[str, ToolDefinition] | None = None,
        batch: int | None = None,
        call_id: str | None = None,
    ) -> Decision:
        """Decide and record. ``decision.stops``: the caller must not run the tool and should answer the agent
        with ``decision.message`` as the tool's error. ``arguments``: a dict or the model's JSON text."""
        pre = self.precheck(name, arguments, scope=scope, tools=tools, batch=batch)
        decision = decide(pre, self.policy, self.actions, enforced=not self.shadow, call_id=call_id)
        stops = decision.stops
        if stops and decision.action is Action.ASK and self.approve is not None:
            decision = replace(decision, approved=self._approved(decision))
            stops = decision.stops
        try:  # noqa: SIM105 - not contextlib.suppress: its object per call costs a tenth of the decision
            self.recorder.decision(decision, known=pre.tool_known is not False, prevented=stops)
        except Exception:  # noqa: BLE001 - recording must never change what the guard decided
            pass
        return decision

    def _approved(self, decision: Decision) -> bool:
        try:
            return bool(self.approve(decision)) if self.approve is not None else False
        except Exception:  # noqa: BLE001 - an approval hook that fails approves nothing
            return False

    # --- after the call ran -----------------------------------------------------------------------------------
    def record_result(
        self,
        name: str,
        arguments: Any,
        *,
        result: Any = None,
        error: BaseException | str | None = None,
        error_type: str | None = None,
        scope: str | None = None,
        batch: int | None = None,
        call_id: str | None = None,
    ) -> Outcome:
        """Score the call that ran (``result``, or ``error``: the exception it raised or an error text;
        ``error_type``: e.g. ``tool_error`` for an MCP ``isError`` result) into the scope's history."""
        if error is None and error_type is None:
            evidence = NO_ERROR
        elif isinstance(error, BaseException):
            evidence = ErrorEvidence(True, str(error)[:256], type(error).__name__, str(error)[:256], error_type)
        else:
            evidence = ErrorEvidence(True, None if error is None else str(error)[:256], None, None, error_type)
        # a result of None is "nothing recorded" (a function that returns nothing succeeded), as on a span
        record = ToolCallRecord(name, arguments, result, error is None and result is not None, evidence, call_id)
        state = self._state(scope)
        with state.lock:
            score = self.scorer.score(record, state.history, trace_tools=state.tools, batch=batch)
            if score.outcome is not Outcome.SUCCESS and score.parse_status is not ParseStatus.ABSENT:
                state.failed.add(call_digest_of(score))
        return score.outcome

    # --- both, around a callable ------------------------------------------------------------------------------
    def run(self, name: str, arguments: Mapping[str, Any], call: Callable[[], T], **where: Any) -> T:
        """Check, then run ``call`` and record its result; raise ``ToolCallBlocked`` when the guard stops it."""
        decision = self.check(name, dict(arguments), **where)
        if decision.stops:
            raise ToolCallBlocked(decision)
        keep = {k: v for k, v in where.items() if k in ("scope", "batch", "call_id")}
        try:
            value = call()
        except Exception as exc:
            self.record_result(name, dict(arguments), error=exc, **keep)
            raise
        self.record_result(name, dict(arguments), result=value, **keep)
        return value

    async def run_async(
        self, name: str, arguments: Mapping[str, Any], call: Callable[[], Awaitable[T]], **where: Any
    ) -> T:
        """``run`` for a coroutine function."""
        decision = self.check(name, dict(arguments), **where)
        if decision.stops:
            raise ToolCallBlocked(decision)
        keep = {k: v for k, v in where.items() if k in ("scope", "batch", "call_id")}
        try:
            value = await call()
        except Exception as exc:
            self.record_result(name, dict(arguments), error=exc, **keep)
            raise
        self.record_result(name, dict(arguments), result=value, **keep)
        return value
