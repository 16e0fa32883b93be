"""Plain records that every check works on.

No OpenTelemetry import here: the offline evaluator builds the same records from dataset rows and run
files, so one scorer codebase serves the processor, the judge and the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from hashlib import blake2b
from typing import Any, Final, NamedTuple


class ParseStatus(str, Enum):
    """How the recorded arguments turned into a JSON object."""

    OK = "ok"  # a JSON object
    BARE_VALUE = "bare_value"  # a bare value mapped onto the tool's only parameter
    ABSENT = "absent"  # nothing recorded (content capture off): nothing to judge
    INVALID_JSON = "invalid_json"
    NOT_OBJECT = "not_object"  # valid JSON, but not an object, and no single parameter to map it to
    TOO_DEEP = "too_deep"
    OVERSIZED = "oversized"  # larger than the configured limit: not parsed

    @property
    def parsed(self) -> bool | None:
        """True/False for the `parse_ok` score; None where there is nothing to score."""
        if self in (ParseStatus.OK, ParseStatus.BARE_VALUE):
            return True
        if self in (ParseStatus.ABSENT, ParseStatus.OVERSIZED):
            return None
        return False


class Outcome(str, Enum):
    """What happened to the call; the split between a model bug and an infrastructure bug is the point."""

    SUCCESS = "success"
    MALFORMED_CALL = "malformed_call"
    EXECUTION_FAILED = "execution_failed"
    EMPTY_RESULT = "empty_result"


@dataclass(slots=True, frozen=True)
class ToolDefinition:
    """A tool as the model saw it. ``schema_key`` is the canonical JSON of ``parameters`` (cache key)."""

    name: str
    parameters: dict[str, Any] | None = None
    description: str | None = None
    schema_key: str | None = None


@dataclass(slots=True, frozen=True)
class ErrorEvidence:
    """Everything a convention recorded about a failure; classification happens in ``checks.outcome``.

    Frozen so that one instance, ``NO_ERROR``, can stand for "nothing recorded" on every call that recorded no
    failure (most of them): the engine and ``checks.outcome`` then skip the error evidence with one identity test.
    """

    status_error: bool = False
    status_description: str | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    error_type: str | None = None  # the `error.type` attribute
    retry_cause: str | None = None  # pydantic-ai's retry attributes: the tool rejected its input

    @property
    def any(self) -> bool:
        return bool(self.status_error or self.exception_type or self.error_type or self.retry_cause)


NO_ERROR: Final = ErrorEvidence()  # no failure recorded; shared (frozen), compared by identity on the hot path


@dataclass(slots=True, frozen=True)
class ToolReply:
    """A tool's result as the model's next request carries it back (a ``tool`` message, a ``tool_result`` block):
    the only evidence of a call's outcome where no tool span ran (``engine.requested``).

    ``is_error``: the request's own error flag (Anthropic's ``is_error``); None where the instrumentation does not
    record one (the GenAI ``tool_call_response`` part has none), so only the reply's text can tell.
    """

    call_id: str
    content: Any = None
    is_error: bool | None = None


@dataclass(slots=True)
class ParsedArguments:
    status: ParseStatus
    value: dict[str, Any] | None = None
    error: str | None = None


@dataclass(slots=True)
class ToolCallRecord:
    """One tool call, whatever convention recorded it.

    The hot path (``AttributeConvention.extract``, run files) builds it with ``new_tool_call_record``.
    """

    name: str
    raw_arguments: Any = None  # as recorded: usually a string, may be an object or a bare value
    result: Any = None  # as recorded; None when not recorded
    result_recorded: bool = False
    error: ErrorEvidence = NO_ERROR
    call_id: str | None = None
    convention: str = "unknown"
    span_schema: dict[str, Any] | None = None  # a schema carried on the tool span itself
    arguments_unparseable: bool = False  # the instrumentation recorded that the arguments did not parse
    trace_id: str = ""
    span_id: str = ""
    parent_span_id: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None


def new_tool_call_record(
    name: str,
    raw_arguments: Any,
    result: Any,
    result_recorded: bool,
    error: ErrorEvidence,
    call_id: str | None,
    convention: str,
    span_schema: dict[str, Any] | None,
    trace_id: str,
    span_id: str,
    parent_span_id: str | None,
    start_ns: int | None,
    end_ns: int | None,
) -> ToolCallRecord:
    """The hot path's constructor of a ``ToolCallRecord`` (every tool span, every run-file call): the slots set by
    name, at the cost of the generated ``__init__`` called positionally (see ``new_call_score``)."""
    record = ToolCallRecord.__new__(ToolCallRecord)  # slots unset; not object.__new__, which mypyc's class refuses
    record.name = name
    record.raw_arguments = raw_arguments
    record.result = result
    record.result_recorded = result_recorded
    record.error = error
    record.call_id = call_id
    record.convention = convention
    record.span_schema = span_schema
    record.arguments_unparseable = False
    record.trace_id = trace_id
    record.span_id = span_id
    record.parent_span_id = parent_span_id
    record.start_ns = start_ns
    record.end_ns = end_ns
    return record


@dataclass(slots=True)
class CallScore:
    """Every score of one call; the processor writes these as ``toolcall_eval.*`` attributes.

    ``Scorer.score`` builds it with ``new_call_score`` (the hot path).
    """

    name: str
    step: int
    outcome: Outcome
    parse_ok: bool | None = None
    parse_status: ParseStatus = ParseStatus.ABSENT
    tool_known: bool | None = None
    schema_valid: bool | None = None
    schema_errors: tuple[str, ...] = ()
    schema_source: str | None = None
    schema_drift: bool | None = None
    error_source: str | None = None
    batch: int | None = None
    duplicate: bool = False
    repeated_failure: bool = False
    over_budget: bool | None = None
    violations: list[str] = field(default_factory=list)
    violation_weight: int = 0
    arguments: dict[str, Any] | None = None
    arguments_key: str | None = None  # the normalised call (``checks.normalize``); None until asked (``engine``)
    digest: bytes | None = None  # ``call_digest`` of ``arguments_key``; None until asked (``engine.call_digest_of``)
    raw_arguments: Any = None  # as recorded: the normalised call of arguments that did not parse
    error_name: str | None = None  # the exception or error type, part of what makes two failures the same
    undeclared_arguments: tuple[str, ...] = ()  # argument names the schema does not declare (checks.undeclared)

    @property
    def correct(self) -> bool:
        """The call is right as far as code can tell (errors and budget are separate parts of the composite); a call
        the tool or framework rejected as malformed is not, whether or not a schema showed why."""
        return (
            self.outcome is not Outcome.MALFORMED_CALL  # e.g. the framework rejected the arguments itself
            and self.parse_ok is not False
            and self.tool_known is not False
            and self.schema_valid is not False
            and not self.violations
            and not self.duplicate
            and not self.repeated_failure
        )


def new_call_score(
    name: str,
    step: int,
    outcome: Outcome,
    parse_ok: bool | None,
    parse_status: ParseStatus,
    tool_known: bool | None,
    schema_valid: bool | None,
    schema_errors: tuple[str, ...],
    schema_source: str | None,
    schema_drift: bool | None,
    error_source: str | None,
    batch: int | None,
    over_budget: bool | None,
    violations: list[str],
    violation_weight: int,
    arguments: dict[str, Any] | None,
    raw_arguments: Any,
    error_name: str | None,
    undeclared_arguments: tuple[str, ...],
) -> CallScore:
    """The engine's constructor of a ``CallScore`` (a fresh call: not a duplicate, not a repeated failure, its
    normalised form not computed yet).

    It sets the slots by name, so the dataclass's field order is free to change, and costs what the generated
    ``__init__`` costs called positionally (one frame): calling that with 22 keywords costs twice as much, and
    this runs for every tool call. ``tests/checks/test_checks.py`` checks that it sets every field.
    """
    score = CallScore.__new__(CallScore)
    score.name = name
    score.step = step
    score.outcome = outcome
    score.parse_ok = parse_ok
    score.parse_status = parse_status
    score.tool_known = tool_known
    score.schema_valid = schema_valid
    score.schema_errors = schema_errors
    score.schema_source = schema_source
    score.schema_drift = schema_drift
    score.error_source = error_source
    score.batch = batch
    score.duplicate = False
    score.repeated_failure = False
    score.over_budget = over_budget
    score.violations = violations
    score.violation_weight = violation_weight
    score.arguments = arguments
    score.arguments_key = None
    score.digest = None
    score.raw_arguments = raw_arguments
    score.error_name = error_name
    score.undeclared_arguments = undeclared_arguments
    return score


class PendingCall(NamedTuple):
    """The first call of a tool in a trace, kept until a second call of that tool needs its normalised form."""

    arguments: dict[str, Any] | None
    raw_arguments: Any  # only when the arguments did not parse (then the raw text is the call)
    outcome: Outcome
    error_source: str | None
    error_name: str | None


# Builds a ``PendingCall`` from a tuple of its fields in order without the Python frame of the NamedTuple's own
# ``__new__`` (it runs for the first call of each tool of every trace).
_new_pending: Any = tuple.__new__
_SUCCESS: Final = Outcome.SUCCESS


# A trace's remembered digests: none (the shared empty tuple), a few in a list (64-120 bytes; a set is 216 bytes
# empty, and most traces remember one to three), a set past ``MAX_LISTED_DIGESTS``. ``x in digests`` on each.
Digests = tuple[()] | list[bytes] | set[bytes]
MAX_LISTED_DIGESTS: Final = 8  # a membership test over at most 8 16-byte digests is a few compares; past this a set


def added_digest(digests: Digests, digest: bytes) -> Digests:
    """``digests`` with ``digest`` in it (once): the same list or set, or the next form up."""
    if isinstance(digests, set):
        digests.add(digest)
        return digests
    if digest in digests:
        return digests
    if isinstance(digests, list):
        if len(digests) < MAX_LISTED_DIGESTS:
            digests.append(digest)
            return digests
        return {*digests, digest}
    return [digest]


def call_digest(key: str) -> bytes:
    """What a trace's history keeps of a normalised call: 16 bytes, whatever the size of its arguments."""
    return blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(slots=True)
class CallHistory:
    """What the trajectory checks need to remember of a trace's earlier calls, bounded by the caller in entries
    (``max_calls_per_trace``) and in bytes: a call is remembered as a 16-byte digest of its normalised form.

    Keys are computed lazily: a call can only repeat an earlier call of the same tool, so the first call of each
    tool waits in ``pending`` (a ``PendingCall``: only what its normalised form and failure need, not its whole
    score) until a second call of that tool arrives; the engine then digests it.
    Most traces call each tool once and never normalise any arguments.
    """

    calls: int = 0
    errors: int = 0
    violations: int = 0
    violation_weight: int = 0
    all_correct: bool = True
    seen_calls: Digests = ()  # digests of earlier calls' normalised forms (``Digests``: made by the first)
    failures: Digests = ()  # digests of earlier failures (call, outcome, error)
    # tool -> the earliest model turn (batch) a call of it succeeded in, None for a success of no known turn (earlier
    # than any): all ``checks.required_steps.succeeded_before`` asks (an int, not a list of every success's turn)
    succeeded: dict[str, int | None] = field(default_factory=dict)
    pending: dict[str, PendingCall | None] = field(default_factory=dict)  # tool -> its first call, until keyed
    # the step budget counts a parallel batch where it starts (``engine.call.budget_position``): the batch being
    # scored, the calls made before it, and the furthest budget position reached (over a budget when above it)
    batch: int | None = None
    batch_start: int = 0
    budget_position: int = 0

    def first_call_of(self, name: str) -> bool:
        """No earlier call of ``name``: this call cannot repeat one."""
        return name not in self.pending

    def take_pending(self, name: str) -> PendingCall | None:
        """The first call of ``name`` if it still waits to be remembered (the caller then ``remember``s it)."""
        first = self.pending.get(name)
        if first is not None:
            self.pending[name] = None
        return first

    def add(
        self, score: CallScore, call: bytes | None, failure: bytes | None, max_remembered: int, correct: bool
    ) -> None:
        """Count ``score`` and remember it by the digests of its normalised form and failure (``call_digest``);
        ``call`` None: the first call of its tool, kept pending instead. ``correct``: ``score.correct``, which
        the engine already knows from its parts (passed in: the property is a second pass over them).
        The first ``max_remembered`` calls are remembered, the rest only counted."""
        calls = self.calls = self.calls + 1
        outcome = score.outcome
        if outcome is not _SUCCESS:
            self.errors += 1
        violations = score.violations
        if violations:
            self.violations += len(violations)
            self.violation_weight += score.violation_weight
        if not correct:
            self.all_correct = False
        if calls > max_remembered:
            return
        name = score.name
        if outcome is _SUCCESS:
            succeeded = self.succeeded
            batch = score.batch
            if name not in succeeded:
                succeeded[name] = batch
            else:
                earliest = succeeded[name]
                if earliest is not None and (batch is None or batch < earliest):
                    succeeded[name] = batch
        if call is None:
            arguments = score.arguments  # the parsed object when there is one, else the raw text decides
            self.pending[name] = _new_pending(
                PendingCall,
                (arguments, score.raw_arguments if arguments is None else None, outcome, score.error_source,
                 score.error_name),
            )  # fmt: skip
        else:
            self.remember(call, failure)

    @property
    def remembered(self) -> int:
        """Calls remembered (digests and pending first calls), for the size of a trace's state."""
        return len(self.seen_calls) + len(self.pending)

    def remember(self, call: bytes, failure: bytes | None) -> None:
        self.seen_calls = added_digest(self.seen_calls, call)
        if failure is not None:
            self.failures = added_digest(self.failures, failure)


def new_call_history() -> CallHistory:
    """``CallHistory()`` for the processor's per-trace state, without the Python frame of the dataclass's generated
    ``__init__`` (``new_trace_verdict`` says why). ``tests/checks/test_checks.py`` checks it equals
    ``CallHistory()``."""
    history = CallHistory.__new__(CallHistory)
    history.calls = 0
    history.errors = 0
    history.violations = 0
    history.violation_weight = 0
    history.all_correct = True
    history.seen_calls = ()
    history.failures = ()
    history.succeeded = {}
    history.pending = {}
    history.batch = None
    history.batch_start = 0
    history.budget_position = 0
    return history


@dataclass(slots=True, frozen=True)
class LateSchemaVerdict:
    """Calls validated against a schema that arrived after them (``checks.late_schema``): their steps, and of those
    the invalid ones with their tool and their first schema error, in step order."""

    checked_steps: tuple[int, ...] = ()
    invalid_steps: tuple[int, ...] = ()
    invalid_tools: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


@dataclass(slots=True, frozen=True)
class LateOutcomeVerdict:
    """Calls that read as a success on a span whose instrumentation cannot record a reply's error flag, their
    outcome read from the reply the next model request carried back for their call id (``checks.late_outcome``):
    their steps, and of those the failed ones with their tool, outcome, evidence (error source) and reply text, in
    step order."""

    checked_steps: tuple[int, ...] = ()
    failed_steps: tuple[int, ...] = ()
    failed_tools: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    error_sources: tuple[str, ...] = ()
    replies: tuple[str, ...] = ()

    @property
    def malformed(self) -> bool:
        """A failed one was the call's own fault (a rejected input, an unknown tool): the trace is not correct."""
        return Outcome.MALFORMED_CALL.value in self.outcomes


@dataclass(slots=True, frozen=True)
class TraceVerdict:
    tool_calls: int
    errors: int
    over_budget: bool
    violations: int
    violation_weight: int
    correct: bool
    unknown_tool_requests: int = 0  # requested calls of tools not offered that no tool span answered
    unexecuted_calls: int | None = None  # requested calls no tool span answered; None: no requests were recorded
    unlisted_calls: int | None = None  # calls scored before a late tool list, of tools not on it; None: no late list
    late_schema: LateSchemaVerdict | None = None  # calls validated when their schema arrived; None: none waited
    late_outcome: LateOutcomeVerdict | None = None  # outcomes read from the next request's reply; None: none read

    @property
    def composite_ok(self) -> bool:
        """Correct AND under the step budget AND zero tool errors."""
        return self.correct and not self.over_budget and self.errors == 0


_set: Any = object.__setattr__  # how a frozen dataclass's own ``__init__`` sets its fields


def new_trace_verdict(
    tool_calls: int,
    errors: int,
    over_budget: bool,
    violations: int,
    violation_weight: int,
    correct: bool,
    unknown_tool_requests: int,
    unexecuted_calls: int | None,
    unlisted_calls: int | None,
    late_schema: LateSchemaVerdict | None,
    late_outcome: LateOutcomeVerdict | None = None,
) -> TraceVerdict:
    """``checks.verdict``'s constructor of a ``TraceVerdict`` (once per trace): the slots set by name.

    Why: in the compiled build a dataclass keeps the ``__init__`` that ``dataclasses`` generates, a Python frame,
    and a frozen one sets each field through ``object.__setattr__`` there (~15 k instructions for these ten);
    here the same calls run from compiled code. ``tests/checks/test_checks.py`` checks that it sets every field.
    """
    verdict = TraceVerdict.__new__(TraceVerdict)
    _set(verdict, "tool_calls", tool_calls)
    _set(verdict, "errors", errors)
    _set(verdict, "over_budget", over_budget)
    _set(verdict, "violations", violations)
    _set(verdict, "violation_weight", violation_weight)
    _set(verdict, "correct", correct)
    _set(verdict, "unknown_tool_requests", unknown_tool_requests)
    _set(verdict, "unexecuted_calls", unexecuted_calls)
    _set(verdict, "unlisted_calls", unlisted_calls)
    _set(verdict, "late_schema", late_schema)
    _set(verdict, "late_outcome", late_outcome)
    return verdict
