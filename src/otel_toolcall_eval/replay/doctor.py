"""``doctor``: what the processor could and could not score in recorded traces, and what to change so it can.

The spans are replayed through the processor first (the same code path as online), then read back: per service,
convention and instrumentation scope, how many tool spans were recognised and how many carried the evidence each
check needs (arguments, a schema, a tool list, a result); and which spans looked like tool calls but matched no
convention. Each gap comes with the setting that fills it: the framework's own switch when the scope names a tested
framework (``conventions.frameworks``), else the convention's, else a convention to register.

Trace data is untrusted: the groups, the tool names kept per group and the suspicious spans are bounded, every
string is kept as recorded (the report escapes it), and nothing here reads a file or the network.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import _json
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.conventions import ConventionRegistry, default_registry
from otel_toolcall_eval.conventions.frameworks import FRAMEWORKS, FrameworkSupport
from otel_toolcall_eval.conventions.llm_spans import DefinitionCache, is_llm_span, requested_calls, tool_definitions
from otel_toolcall_eval.conventions.shapes import shape_for, shape_named

MAX_GROUPS: Final = 100
MAX_SUSPECTS: Final = 50
MAX_NAMES: Final = 20  # tool names (or hinting keys) kept per group
MAX_TEXT: Final = 200  # characters kept of any string from the trace

# When the instrumentation scope has no row in the shape table: no switch is guessed from the convention (the GenAI
# variables do nothing for OpenLLMetry, the Anthropic SDK or pydantic-ai), the row to add is named instead.
NO_ROW: Final = (
    "the instrumentation scope `{scope}` has no row in the shape table (otel_toolcall_eval.conventions.shapes), so its "
    "content switch is not known here: see its documentation, and add a row for it"
)
REQUESTS_ONLY_FIX: Final = (
    "tool calls were requested by the model but no span of them ran as a recognised tool span. Each requested call "
    "whose result the next request carried back is scored from the requests alone (`toolcall_eval.requested.N.*` "
    "on that model span: tool name against the definitions, arguments against the schema, the outcome from the "
    "reply's error flag where the instrumentation records it); no latency, and no error text but the reply's. For "
    "a verdict on a span of each call, instrument the framework or tool runner, not only the model client; or "
    "their spans match no convention (see the unrecognised spans)"
)
LONE_REQUEST_FIX: Final = (
    "each is a model request alone, the root of a trace of its own: the model client's instrumentation did not see "
    "the agent's trace context, so the calls it requested ran (on tool spans, if the framework records them) in "
    "another trace, where the verdict cannot see the requests. Make the framework's context current around its model "
    "calls: instrument it so that it propagates (CrewAI: `CrewAIInstrumentor().instrument()` without "
    "`use_event_listener`), or export the agent's spans from the same process and provider as the model client's"
)
UNMATCHED_FIX: Final = (
    "requested calls of an instrumentation that records no call ids (matched to their replies by position in their "
    "conversation: Haystack's `Agent`) were still waiting when the conversation's history broke: a request whose "
    "messages do not extend the previous one's (a compacted or trimmed history, Haystack's `CompactionHook`, or one "
    "rewritten by a hook). Their replies cannot be matched by position, so they have no verdict "
    "(`trace.unmatched_requests`). Compact less often (a larger `context_window` / `compact_at`), or record the "
    "tools' own spans"
)
MODEL_ROOT_FIX: Final = (
    "the root span, which carries the trace's verdict, is itself a model request with tool spans below it: an "
    "instrumentation wrote a request's attributes onto the application's own span (one that stamps the span current "
    "at the call, as LiteLLM's callback does), or one span records a whole function-calling loop. Only one request's "
    "attributes are on it, so the other requests, their tokens and the tools they offered are not recorded (model "
    "calls and tokens undercounted, schemas checked on the root only); give each request a span of its own (LiteLLM: "
    "`USE_OTEL_LITELLM_REQUEST_SPAN=true`)"
)
# what a model request's span carries as its operation (``invoke_agent`` / ``create_agent`` are agents, not requests)
_REQUEST_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})
SCHEMA_FIX: Final = (
    "no definitions of these tools in the trace: instrument the model client too (its chat spans carry the tools "
    "offered), or list their schemas under `tools:` in the config"
)
# the trace lists the tools, by name only (Semantic Kernel's ``sk.available_functions``: a ``Kernel`` without an agent)
NAMES_ONLY_FIX: Final = (
    "the trace lists these tools by name only, without schemas: list their schemas under `tools:` in the config, or "
    "record the definitions where the instrumentation can"
)
SCHEMA_ROW_FIX: Final = "no definitions of these tools in the trace: list their schemas under `tools:` in the config"
TOOL_LIST_FIX: Final = (
    "no tool list in the trace, so calls of tools the agent does not have are not flagged: instrument the model "
    "client, or list the agent's tools under `tools:` in the config"
)
TOOL_LIST_ROW_FIX: Final = (
    "no tool list in the trace, so calls of tools the agent does not have are not flagged: list the agent's tools "
    "under `tools:` in the config"
)

# A span attribute key that names a tool call (``tool.name``, ``tool_name``, ``function.arguments``...), and span
# names that say so; keys that carry definitions offered to a model are not a call.
_HINT_KEY = re.compile(r"(?:^|[._])(?:tool|tools|function|tool_call|tool_name|tool_input|tool_args)(?:[._]|$)", re.I)
_HINT_NAME = re.compile(r"(?:^|[^a-z])(?:tool|function[_ ]?call|execute_tool|call_tool|run_tool)", re.I)
_NOT_A_CALL = (
    A.PREFIX,
    A.GEN_AI_TOOL_DEFINITIONS,
    A.GEN_AI_AGENT_TOOLS,
    A.OPENINFERENCE_LLM_TOOLS,
    "llm.request.functions",
    "gen_ai.request.",
    "llm.openai.tools",  # LiteLLM's raw request span (scope litellm): the tools offered, not a call
)
_KIND_KEY = re.compile(r"(?:^|[._])(?:kind|type|category)$", re.I)
_NAME_KEY = re.compile(r"name$", re.I)
_ARGS_KEY = re.compile(r"(?:arg|input|param)", re.I)
_RESULT_KEY = re.compile(r"(?:result|output|response)", re.I)


def _cut(text: Any) -> str:
    value = str(text)
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "..."


@dataclass
class Coverage:
    """The tool spans of one (service, convention, scope) and the evidence they carried."""

    service: str
    convention: str
    scope: str
    framework: str | None = None
    tool_spans: int = 0
    wrapping: int = 0  # a second instrumentation of a call its child span carries (counted once, there)
    arguments: int = 0  # parse verdict possible: arguments recorded (on the span, or requested under its call id)
    arguments_from_request: int = 0  # of those, taken from the requesting LLM span (same call id)
    unknown: int = 0  # calls of a tool the agent does not have (no schema or list entry to expect for them)
    schema: int = 0  # a schema was known (schema verdict possible where arguments were recorded)
    tool_list: int = 0  # the trace listed the agent's tools (``tool_known``, or on the root: ``trace.unlisted_calls``)
    succeeded: int = 0
    result: int = 0  # of the successful calls, those with a recorded result
    failed: int = 0  # outcome other than success (error status, exception, rejected input, empty result)
    nameless: int = 0  # calls with an empty tool name: the instrumentation records it where nothing reads it
    wrapped: int = 0  # arguments whose keys miss the schema's properties while a nested object's keys hit them
    invalid: int = 0  # calls checked against a schema and found invalid
    undeclared: set[str] | None = None  # the undeclared keys every invalid call shares (None before the first)
    unused_definitions: list[str] = field(default_factory=list)  # defined in the trace, no call here named them
    tools: list[str] = field(default_factory=list)
    without_schema: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.fixes

    def as_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "convention": self.convention,
            "scope": self.scope,
            "framework": self.framework,
            "tool_spans": self.tool_spans,
            "wrapping_spans": self.wrapping,
            "with_arguments": self.arguments,
            "arguments_from_request": self.arguments_from_request,
            "unknown_tool_calls": self.unknown,
            "with_schema": self.schema,
            "with_tool_list": self.tool_list,
            "succeeded": self.succeeded,
            "succeeded_with_result": self.result,
            "failed": self.failed,
            "without_name": self.nameless,
            "wrapper_suspected": self.wrapped,
            "schema_invalid": self.invalid,
            "shared_undeclared_keys": sorted(self.undeclared or ()),
            "unused_definitions": self.unused_definitions,
            "tools": self.tools,
            "tools_without_schema": self.without_schema,
            "fixes": self.fixes,
        }


@dataclass
class Suspect:
    """Spans of one (service, scope, name) that look like tool calls but matched no convention."""

    service: str
    scope: str
    name: str
    count: int = 0
    keys: list[str] = field(default_factory=list)
    fix: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "scope": self.scope,
            "span_name": self.name,
            "spans": self.count,
            "hinting_attributes": self.keys,
            "fix": self.fix,
        }


@dataclass
class Diagnosis:
    spans: int = 0
    traces: int = 0
    verdicts: int = 0  # traces that got a verdict on their root
    coverage: list[Coverage] = field(default_factory=list)
    suspects: list[Suspect] = field(default_factory=list)
    truncated: bool = False  # more groups or suspects than the bounds keep
    requests_only: int = 0  # traces whose tool activity is only in model requests (no recognised tool span)
    # traces with model spans but no recognised tool span, per the model spans' scope (those with a row in the shape
    # table): what that instrumentation cannot record and its content switch, from its row
    model_only: list[str] = field(default_factory=list)
    model_roots: int = 0  # traces with tool spans whose root is itself a model request (stamped, or a loop's span)
    lone_requests: int = 0  # of ``requests_only``, traces that are model requests alone (detached from the agent's)
    request_scored: int = 0  # of their calls, those scored from the requests (a reply carried their result back)
    unmatched: int = 0  # requested calls left unmatched where a conversation matched by position broke

    @property
    def healthy(self) -> bool:
        """Tool spans were recognised, each with all the evidence its checks need, and nothing looked unrecognised."""
        return (
            bool(self.coverage)
            and all(c.complete for c in self.coverage)
            and not self.suspects
            and not self.requests_only
            and not self.model_only
            and not self.model_roots
            and not self.unmatched
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "spans": self.spans,
            "traces": self.traces,
            "traces_with_verdict": self.verdicts,
            "healthy": self.healthy,
            "truncated": self.truncated,
            "traces_with_requests_only": self.requests_only,
            "calls_scored_from_requests": self.request_scored,
            "requests_only_fix": REQUESTS_ONLY_FIX if self.requests_only else None,
            "traces_of_a_lone_request": self.lone_requests,
            "lone_request_fix": LONE_REQUEST_FIX if self.lone_requests else None,
            "calls_unmatched_by_position": self.unmatched,
            "unmatched_fix": UNMATCHED_FIX if self.unmatched else None,
            "model_spans_only": self.model_only,
            "traces_with_model_root": self.model_roots,
            "model_root_fix": MODEL_ROOT_FIX if self.model_roots else None,
            "coverage": [c.as_json() for c in self.coverage],
            "unrecognised": [s.as_json() for s in self.suspects],
        }


def _framework(scope: str) -> FrameworkSupport | None:
    for row in FRAMEWORKS:
        if scope in row.scopes:
            return row
    return None


def _service(span: ReadableSpan) -> str:
    resource = span.resource
    name = resource.attributes.get("service.name") if resource is not None else None
    return _cut(name) if name is not None else "unknown_service"


def _scope(span: ReadableSpan) -> str:
    scope = span.instrumentation_scope
    return _cut(scope.name) if scope is not None and scope.name else "-"


def diagnose(spans: Iterable[ReadableSpan], registry: ConventionRegistry | None = None) -> Diagnosis:
    """Read scored spans (the output of ``replay_spans``) back into coverage per group, suspects and fixes."""
    registry = registry or default_registry()
    out = Diagnosis()
    groups: dict[tuple[str, str, str], Coverage] = {}
    defined_by: dict[tuple[str, str, str], dict[str, dict[str, Any] | None]] = {}
    suspects: dict[tuple[str, str, str], Suspect] = {}
    spans = list(spans)
    traces: set[int] = set()
    listed_late: set[int] = set()  # traces whose tool list arrived on the root, after the tool spans
    model_scopes: dict[str, set[int]] = {}  # the scopes of model spans: the traces each wrote model spans in
    late_steps: dict[int, set[int]] = {}  # per trace: the steps of calls validated against a schema that came later
    with_tools: set[int] = set()  # traces with a recognised tool span
    model_roots: set[int] = set()  # traces whose root span is a model request
    beside_requests: set[int] = set()  # traces with a span that is no model request
    requested: set[int] = set()  # traces whose model spans requested tool calls
    schemas: dict[int, dict[str, dict[str, Any] | None]] = {}  # per trace: the tools its model spans defined
    cache = DefinitionCache()
    for span in spans:
        attrs = span.attributes or {}
        trace_id = span.context.trace_id if span.context is not None else 0
        traces.add(trace_id)
        if A.TRACE_UNLISTED_CALLS in attrs:
            listed_late.add(trace_id)
        checked = attrs.get(A.TRACE_LATE_SCHEMA_CHECKED_STEPS)  # calls validated on the root, when their schema came
        if isinstance(checked, (list, tuple)):
            late_steps[trace_id] = {step for step in checked if isinstance(step, int)}
        if not _is_request(attrs):
            beside_requests.add(trace_id)
        if A.CONVENTION in attrs:
            with_tools.add(trace_id)
        elif is_llm_span(attrs):
            if span.parent is None and _is_request(attrs):
                model_roots.add(trace_id)
            if requested_calls(attrs):
                requested.add(trace_id)
            if len(model_scopes) < MAX_GROUPS and _is_request(attrs):  # an agent's creation is no request
                model_scopes.setdefault(_scope(span), set()).add(trace_id)
            defined = schemas.setdefault(trace_id, {})
            for d in tool_definitions(attrs, cache, shape_for(span.instrumentation_scope)):
                if len(defined) < MAX_GROUPS and (d.name not in defined or d.parameters is not None):
                    defined[d.name] = d.parameters
    out.traces = len(traces)
    out.requests_only = len(requested - with_tools)
    out.lone_requests = len((requested - with_tools) & model_roots - beside_requests)
    out.model_only = _model_only(model_scopes, with_tools)
    out.model_roots = len(model_roots & with_tools)
    for span in spans:
        out.spans += 1
        attrs = span.attributes or {}
        trace_id = span.context.trace_id if span.context is not None else 0
        if A.TRACE_CORRECT in attrs:
            out.verdicts += 1
            scored = attrs.get(A.TRACE_REQUEST_SCORED_CALLS)
            out.request_scored += scored if isinstance(scored, int) else 0
            unmatched = attrs.get(A.TRACE_UNMATCHED_REQUESTS)
            out.unmatched += unmatched if isinstance(unmatched, int) else 0
        convention = attrs.get(A.CONVENTION)
        if convention is None:
            _note_suspect(span, attrs, registry, suspects, out, name_hints=trace_id not in with_tools)
            continue
        key = (_service(span), _cut(convention), _scope(span))
        group = groups.get(key)
        if group is None:
            if len(groups) >= MAX_GROUPS:
                out.truncated = True
                continue
            row = _framework(key[2])
            group = groups[key] = Coverage(*key, framework=row.name if row else None)
        late = attrs.get(A.STEP) in late_steps.get(trace_id, ())
        _count(group, span, attrs, registry, listed_late=trace_id in listed_late, late_schema=late,
               defined=schemas.get(trace_id, {}))  # fmt: skip
        defined_by[key] = {**defined_by.get(key, {}), **schemas.get(trace_id, {})}
    out.coverage = sorted(groups.values(), key=lambda c: (c.service, c.convention, c.scope))
    for key, group in groups.items():
        unused = [n for n in defined_by.get(key, {}) if n not in group.tools]
        # definitions are offered to every group of the trace: unused only when this group named none of them
        if unused and len(unused) == len(defined_by.get(key, {})):
            group.unused_definitions = [_cut(n) for n in unused[:MAX_NAMES]]
    for group in out.coverage:
        group.fixes = _fixes(group)
    out.suspects = sorted(suspects.values(), key=lambda s: (-s.count, s.service, s.scope, s.name))
    for suspect in out.suspects:
        suspect.fix = _register_hint(suspect)
    return out


def _is_request(attrs: Mapping[str, Any]) -> bool:
    """A model request's span (GenAI chat / completion, an OpenInference LLM span, the older ``llm.request.type``
    of OpenLLMetry and LiteLLM), not an agent's."""
    return (
        attrs.get(A.GEN_AI_OPERATION_NAME) in _REQUEST_OPERATIONS
        or attrs.get(A.OPENINFERENCE_SPAN_KIND) == "LLM"
        or "llm.request.type" in attrs
    )


def _model_only(model_scopes: dict[str, set[int]], with_tools: set[int]) -> list[str]:
    """Per model-span scope with a row in the shape table, in traces where no tool span was recognised: the row's
    word on what it cannot record and its content switch (an instrumentation of the model calls only, or content
    hidden), never a generic one."""
    out = []
    for scope, traces in sorted(model_scopes.items()):
        shape = shape_named(scope)
        alone = len(traces - with_tools)
        if shape is None or not alone:
            continue
        cannot = f"it cannot record {shape.cannot_record}; " if shape.cannot_record else ""
        switch = shape.content_switch or "no content setting"
        out.append(f"{alone} trace(s) with model spans of `{scope}` ({shape.instrumentation}) and no tool span: "
                   f"{cannot}its content switch: {switch}")  # fmt: skip
    return out


def _count(
    group: Coverage,
    span: ReadableSpan,
    attrs: Mapping[str, Any],
    registry: ConventionRegistry,
    *,
    listed_late: bool,
    late_schema: bool,
    defined: Mapping[str, dict[str, Any] | None],
) -> None:
    if A.SAME_CALL_AS in attrs:
        group.wrapping += 1
        return
    group.tool_spans += 1
    recognised = registry.recognise(span, attrs)
    record = recognised.extract(span, attrs) if recognised is not None else None
    name = _cut(record.name) if record is not None else span.name
    if not name:
        group.nameless += 1
    elif name not in group.tools and len(group.tools) < MAX_NAMES:
        group.tools.append(name)
    if record is not None:
        _check_arguments(group, record.raw_arguments, defined.get(record.name), attrs)
    if A.PARSE_OK in attrs or A.ARGUMENTS_OVERSIZED in attrs:
        group.arguments += 1
        if record is not None and record.raw_arguments is None:
            group.arguments_from_request += 1
    known = attrs.get(A.TOOL_KNOWN)
    if known is False:  # the agent does not have it: no schema to expect; the list (or the framework) said so
        group.unknown += 1
        group.tool_list += 1
    elif A.SCHEMA_SOURCE in attrs or late_schema or (record is not None and defined.get(record.name) is not None):
        # known when scored, validated when it came later, or in the trace after the call (which recorded no
        # arguments to validate: the arguments are what is missing)
        group.schema += 1
    elif name not in group.without_schema and len(group.without_schema) < MAX_NAMES:
        group.without_schema.append(name)
    if known is True or (known is None and listed_late):
        group.tool_list += 1
    if attrs.get(A.OUTCOME) == "success":
        group.succeeded += 1
        if record is not None and record.result_recorded:
            group.result += 1
    else:
        group.failed += 1


def _check_arguments(group: Coverage, raw: Any, schema: dict[str, Any] | None, attrs: Mapping[str, Any]) -> None:
    """What the extracted arguments say about the extraction: a wrapper the shape table does not strip (the keys miss
    the schema's properties, a nested object's keys hit them), and the undeclared keys every invalid call shares."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    value = _json.try_loads(raw) if isinstance(raw, (str, bytes)) else raw
    if not isinstance(properties, dict) or not properties or not isinstance(value, dict) or not value:
        return
    declared = set(properties)
    keys = set(value)
    if not keys & declared and any(isinstance(v, dict) and set(v) & declared for v in value.values()):
        group.wrapped += 1
    if attrs.get(A.SCHEMA_VALID) is False and schema is not None and schema.get("additionalProperties") is not True:
        group.invalid += 1
        extra = {_cut(k) for k in keys - declared}
        group.undeclared = extra if group.undeclared is None else group.undeclared & extra


def _capture(group: Coverage) -> str:
    """The content switch of the scope's row in the shape table; never a generic one."""
    shape = shape_named(group.scope)
    if shape is not None and shape.content_switch:
        return f"{shape.instrumentation}: {shape.content_switch}"
    row = _framework(group.scope)
    if row is not None and row.capture:
        return f"{row.name}: {row.capture}"
    return NO_ROW.format(scope=group.scope)


def _definitions_fix(group: Coverage, lead: str, generic: str) -> str:
    """Definitions missing from a group's traces: where its scope's row records them, and the row's content switch
    when the group's content is hidden (calls without arguments; a switch already on is not advised again);
    ``generic`` without a row that says where ("instrument the model client" would send a user whose model client
    is instrumented in a circle)."""
    shape = shape_named(group.scope)
    if shape is None or not shape.definitions:
        return generic
    fix = f"{lead}; {shape.instrumentation} records them in: {shape.definitions}"
    return f"{fix}; {_capture(group)}" if group.arguments < group.tool_spans else fix


def _fixes(group: Coverage) -> list[str]:
    fixes: list[str] = []
    n = group.tool_spans
    if n == 0:
        return fixes
    if group.arguments < n:
        fixes.append(f"{n - group.arguments} of {n} calls recorded no arguments (no parse or schema verdict): "
                     f"{_capture(group)}")  # fmt: skip
    if group.result < group.succeeded:
        missing = group.succeeded - group.result
        fixes.append(f"{missing} of {group.succeeded} successful calls recorded no result: {_capture(group)}")
    expected = n - group.unknown
    if group.schema < expected:
        row = _framework(group.scope)
        lead = SCHEMA_FIX if group.tool_list < n else NAMES_ONLY_FIX
        generic = f"{lead}; {row.name}: {row.capture}" if row is not None and row.capture else lead
        fix = _definitions_fix(group, SCHEMA_ROW_FIX if group.tool_list < n else NAMES_ONLY_FIX, generic)
        names = ", ".join(group.without_schema)
        fixes.append(f"{expected - group.schema} of {expected} calls had no schema ({names}): {fix}")
    if group.tool_list < n:
        fix = _definitions_fix(group, TOOL_LIST_ROW_FIX, TOOL_LIST_FIX)
        fixes.append(f"{n - group.tool_list} of {n} calls had no tool list to check the name against: {fix}")
    shape_row = f"the row of `{group.scope}` in the shape table (otel_toolcall_eval.conventions.shapes)"
    if group.nameless:
        fixes.append(f"{group.nameless} of {n} calls have no tool name: the instrumentation records it where nothing "
                     f"reads it; give {shape_row} its `name_keys` or `name_in_span_name`")  # fmt: skip
    if group.wrapped:
        fixes.append(f"{group.wrapped} of {n} calls' arguments share no key with the tool's schema while an object "
                     f"inside them does: a wrapper of the instrumentation's own is suspected; give {shape_row} its "
                     "`arguments_wrapper`")  # fmt: skip
    if group.invalid and group.invalid == n and group.undeclared:
        keys = ", ".join(sorted(group.undeclared)[:MAX_NAMES])
        fixes.append(f"every call ({n}) is schema-invalid with the same undeclared keys ({keys}): a misread "
                     f"instrumentation is likelier than a model that always errs; check {shape_row}")  # fmt: skip
    if group.unused_definitions:
        names = ", ".join(group.unused_definitions)
        fixes.append(f"the trace defines tools ({names}) that no call here names: the calls' tool names are read from "
                     f"the wrong place; check {shape_row}")  # fmt: skip
    return fixes


def _note_suspect(
    span: ReadableSpan,
    attrs: Mapping[str, Any],
    registry: ConventionRegistry,
    suspects: dict[tuple[str, str, str], Suspect],
    out: Diagnosis,
    *,
    name_hints: bool,
) -> None:
    """A span matching no convention whose attributes hint at a tool call; or, in a trace where no tool span was
    recognised at all, whose name does (elsewhere such names are the framework's own steps around the tool spans)."""
    if is_llm_span(attrs) or registry.recognise(span, attrs) is not None:  # a model turn; or a handoff, ignored
        return
    keys = [k for k in attrs if _HINT_KEY.search(k) and not k.startswith(_NOT_A_CALL)]
    if not keys and not (name_hints and _HINT_NAME.search(span.name or "")):
        return
    key = (_service(span), _scope(span), _cut(span.name or ""))
    suspect = suspects.get(key)
    if suspect is None:
        if len(suspects) >= MAX_SUSPECTS:
            out.truncated = True
            return
        suspect = suspects[key] = Suspect(*key)
    suspect.count += 1
    for k in keys:
        text = _cut(k)
        if text not in suspect.keys and len(suspect.keys) < MAX_NAMES:
            suspect.keys.append(text)
    if not suspect.fix:
        suspect.fix = _detect_value(attrs, keys)


def _detect_value(attrs: Mapping[str, Any], keys: list[str]) -> str:
    """``key=value`` of the attribute a convention could detect these spans by (kept until the hint is built): a
    kind/type attribute saying "tool" (``acme.span.kind=tool``), else a kind/type attribute among the hinting keys."""
    for k, v in attrs.items():
        if _KIND_KEY.search(k) and isinstance(v, str) and _HINT_NAME.search(v) and not k.startswith(_NOT_A_CALL):
            return f"{k}={v}"
    for k in keys:
        if _KIND_KEY.search(k) and isinstance(attrs.get(k), str):
            return f"{k}={attrs[k]}"
    return ""


def _register_hint(suspect: Suspect) -> str:
    detect = suspect.fix
    if "=" in detect:
        detect_key, _, value = detect.partition("=")
        values = f"frozenset({{{_cut(value)!r}}})"
    else:
        detect_key, values = (suspect.keys[0] if suspect.keys else "<attribute>"), "frozenset({<value>})"
    names = tuple(k for k in suspect.keys if _NAME_KEY.search(k))
    arguments = tuple(k for k in suspect.keys if _ARGS_KEY.search(k))
    results = tuple(k for k in suspect.keys if _RESULT_KEY.search(k))
    return (
        "if these are tool calls, register a convention for them: registry = default_registry(); "
        f"registry.register(AttributeConvention(name='custom', detect_key={detect_key!r}, detect_values={values}, "
        f"name_keys={names!r}, argument_keys={arguments!r}, result_keys={results!r})); "
        "ToolCallEvalProcessor(..., conventions=registry)"
    )
