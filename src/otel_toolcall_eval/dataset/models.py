"""The ground-truth dataset format, defined once: every reader, writer, template and the JSON Schema derive from it.

A case says what the agent should do for one input: which calls (``expected_tool_calls``), or explicitly no call
(``expected_no_tool``), which other call lists are just as good (``acceptable_alternatives``) and which tools must
never fire (``must_not_call``). Contradictions a reviewer would miss in a spreadsheet (an empty expected list
without ``expected_no_tool``, an expected call of a forbidden tool) are validation errors, not silent zeros.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from otel_toolcall_eval.checks.trajectory import ArgsMode, TrajectoryMode
from otel_toolcall_eval.slices import Difficulty as Difficulty  # re-exported with the case models
from otel_toolcall_eval.slices import Slice as Slice


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExpectedCall(_Model):
    """One call the agent should make."""

    name: str = Field(min_length=1, description="the tool's name")
    args: dict[str, Any] = Field(
        default_factory=dict, description="the arguments that must match (after normalisation)"
    )
    required_args_only: bool = Field(
        default=True,
        description="true: only the keys in `args` are compared, extra actual arguments are ignored; "
        "false: an extra actual argument is a mismatch",
    )
    batch: int | None = Field(
        default=None,
        ge=0,
        description="calls sharing a batch are one parallel turn: compared as a set, in any order",
    )
    arg_options: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="per-argument alternatives: the argument must equal one of the listed values (after "
        "normalisation); a key is in `args` or here, not both",
    )
    optional_args: list[str] = Field(
        default_factory=list,
        description="arguments (keys of `args` or `arg_options`) that may also be absent",
    )
    exact_args: list[str] = Field(
        default_factory=list,
        description="arguments (keys of `args` or `arg_options`) compared exactly, without normalisation: no "
        "case, whitespace, date, ID-prefix or numeric-string folding (identifiers, code, source literals)",
    )

    @model_validator(mode="after")
    def _options_consistent(self) -> ExpectedCall:
        check_call(self)
        return self


def check_call(call: ExpectedCall) -> None:
    """The rules across an expected call's fields (a plain function: ``dataset.fast`` applies the same ones)."""
    if not call.arg_options and not call.optional_args and not call.exact_args:  # the usual call (per call)
        return
    both = [k for k in call.arg_options if k in call.args]
    if both:
        raise ValueError(f"arg_options: {both[0]!r} is also in args (give its values in one place)")
    empty = [k for k, values in call.arg_options.items() if not values]
    if empty:
        raise ValueError(f"arg_options: {empty[0]!r} lists no value")
    stray = [k for k in call.optional_args if k not in call.args and k not in call.arg_options]
    if stray:
        raise ValueError(f"optional_args: {stray[0]!r} is neither in args nor in arg_options")
    stray = [k for k in call.exact_args if k not in call.args and k not in call.arg_options]
    if stray:
        raise ValueError(f"exact_args: {stray[0]!r} is neither in args nor in arg_options")


class TrajectoryOptions(_Model):
    """How this case's trajectory is matched (checks.trajectory): agentevals' trajectory and argument modes."""

    mode: TrajectoryMode = Field(
        description="`strict` (same turns in order), `unordered` (same calls, any order), `subset` (no call beyond "
        "the expected ones), `superset` (every expected call made, extras allowed) or `in_order` (every expected "
        "call made in the expected order, extras allowed in between)"
    )
    args: ArgsMode | None = Field(
        default=None,
        description="how arguments match: `exact`, `ignore`, `subset` (actual keys within the expected) or "
        "`superset` (every expected key there); empty: the config's `trajectory.args`",
    )
    tool_args: dict[str, ArgsMode] = Field(
        default_factory=dict, description="per tool name, an argument mode that replaces `args` for that tool"
    )
    decides: bool | None = Field(
        default=None,
        description="true: the case passes when its trajectory matches, in place of the graded match of calls and "
        "arguments (must-not-call, policies and run errors still fail it); empty: the config's `trajectory.decides`",
    )


class DatasetCase(_Model):
    """One evaluation case: an input, its context, and what the agent should (and must not) do."""

    id: str = Field(min_length=1, description="stable identifier, unique in the file; runs refer to it")
    user_input: str = Field(description="the user's message for this turn")
    message_history: list[dict[str, Any]] = Field(
        default_factory=list,
        description="prior messages (assistant and tool messages included), each with a `role`",
    )
    available_tools: list[dict[str, Any]] = Field(
        default_factory=list,
        description="the tool definitions the model saw: `{name, description, parameters}`, OpenAI "
        "`{type: function, function: {...}}` or Anthropic `{name, input_schema}`",
    )
    expected_tool_calls: list[ExpectedCall] = Field(
        default_factory=list, description="the calls the agent should make, in order"
    )
    expected_no_tool: bool = Field(
        default=False,
        description="true when the right behaviour is to call no tool (explicit, never inferred)",
    )
    acceptable_alternatives: list[list[ExpectedCall]] = Field(
        default_factory=list, description="other complete call lists that are just as correct"
    )
    must_not_call: list[str] = Field(
        default_factory=list, description="tools that must never be called: one call fails the case and the run"
    )
    difficulty: Difficulty = Field(default=Difficulty.MEDIUM, description="`easy`, `medium` or `hard`")
    slice: Slice | None = Field(
        default=None,
        description="one of the five slices; derived when empty (`ordered-dependency` is only ever explicit)",
    )
    source_trace_id: str | None = Field(default=None, description="the production trace the case came from")
    notes: str | None = Field(default=None, description="free text for reviewers")
    session_id: str | None = Field(
        default=None,
        description="the conversation this case is a turn of: cases sharing it are also reported as one session, "
        "in file order",
    )
    trajectory: TrajectoryOptions | None = Field(
        default=None,
        description="trajectory match mode of this case (`{mode, args, tool_args}`, checks.trajectory); empty: "
        "the config's `trajectory`, if any",
    )

    @model_validator(mode="before")
    @classmethod
    def _empty_is_none(cls, data: Any) -> Any:
        # one spelling of "no value", so a CSV round trip (where both are an empty cell) is lossless
        if isinstance(data, dict) and (
            data.get("source_trace_id") == "" or data.get("notes") == "" or data.get("session_id") == ""
        ):
            data = {**data}
            for key in EMPTY_IS_NONE:
                if data[key] == "" if key in data else False:
                    data[key] = None
        return data

    @model_validator(mode="after")
    def _consistent(self) -> DatasetCase:
        """The rules across columns, in column order. One validator (not one per field): this runs per case."""
        check_case(self)
        return self

    @property
    def effective_slice(self) -> Slice:
        """The declared slice, or the one derived: must-not-call, no-tool-needed, single-tool, multi-tool."""
        if self.slice is not None:
            return self.slice
        if self.must_not_call:
            return Slice.MUST_NOT_CALL
        if self.expected_no_tool:
            return Slice.NO_TOOL_NEEDED
        if len(self.expected_tool_calls) == 1:
            return Slice.SINGLE_TOOL
        return Slice.MULTI_TOOL


class ColumnError(ValueError):
    """A rule across columns failed; ``column`` is the one to fix (pydantic keeps the exception in ``ctx``)."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(f"{column}: {message}")
        self.column = column
        self.message = message


def offered_names(tools: list[dict[str, Any]]) -> set[str]:
    """The names of a case's ``available_tools``; a nameless or repeated tool is a ``ColumnError``."""
    known: set[str] = set()
    for i, tool in enumerate(tools):
        name = tool_name(tool)
        if name is None:
            raise ColumnError("available_tools", f"{i}: a tool needs a 'name' (or 'function.name')")
        if name in known:
            raise ColumnError("available_tools", f"{i}: duplicate name '{name}'")
        known.add(name)
    return known


def check_case(case: DatasetCase, known: set[str] | None = None) -> None:
    """The rules across a case's columns, in column order (the first broken one is reported); a plain function,
    so ``dataset.fast`` applies exactly these. ``known``: ``offered_names`` of the case's tools, when the caller
    has them already (a tool list seen before)."""
    for i, message in enumerate(case.message_history):
        if not isinstance(message.get("role"), str):
            raise ColumnError("message_history", f"{i}: a message needs a 'role'")
    if known is None:
        known = offered_names(case.available_tools)
    expected = case.expected_tool_calls
    _check_offered(expected, known, "expected_tool_calls", "")
    if case.expected_no_tool and expected:
        raise ColumnError("expected_no_tool", "true, but expected_tool_calls is not empty")
    if not case.expected_no_tool and not expected:
        raise ColumnError(
            "expected_no_tool",
            "false, but expected_tool_calls is empty: list the expected calls or set this to true",
        )
    for i, alternative in enumerate(case.acceptable_alternatives):
        _check_offered(alternative, known, "acceptable_alternatives", f"{i}.")
    if case.must_not_call:
        forbidden = set(case.must_not_call)
        for where, calls in (
            ("expected_tool_calls", expected),
            *((f"acceptable_alternatives.{i}", alt) for i, alt in enumerate(case.acceptable_alternatives)),
        ):
            for i, call in enumerate(calls):
                if call.name in forbidden:
                    raise ColumnError("must_not_call", f"'{call.name}' is also expected ({where}.{i})")
    if case.slice is not None:
        problem = _slice_problem(case.slice, len(expected), case.expected_no_tool, bool(case.must_not_call))
        if problem:
            raise ColumnError("slice", f"'{case.slice.value}' {problem}")


def _check_offered(calls: list[ExpectedCall], known: set[str], column: str, prefix: str) -> None:
    if not known:
        return
    for i, call in enumerate(calls):
        if call.name not in known:
            raise ColumnError(column, f"{prefix}{i}.name: '{call.name}' is not among available_tools")


def _slice_problem(declared: Slice, expected: int, no_tool: bool, forbidden: bool) -> str | None:
    if declared is Slice.NO_TOOL_NEEDED and not no_tool:
        return "needs expected_no_tool: true"
    if declared is Slice.SINGLE_TOOL and expected != 1:
        return f"needs exactly one expected call, got {expected}"
    if declared in (Slice.MULTI_TOOL, Slice.ORDERED_DEPENDENCY) and expected < 2:
        return f"needs at least two expected calls, got {expected}"
    if declared is Slice.MUST_NOT_CALL and not forbidden:
        return "needs a non-empty must_not_call"
    return None


def tool_name(tool: dict[str, Any]) -> str | None:
    """The name of a tool definition in any of the accepted shapes."""
    inner = tool.get("function")
    source = inner if isinstance(inner, dict) else tool
    name = source.get("name")
    return name if isinstance(name, str) and name else None


# Columns where an empty string means "no value" (None), as an empty CSV cell does.
EMPTY_IS_NONE: tuple[str, ...] = ("source_trace_id", "notes", "session_id")
# Columns holding JSON values: a CSV cell carries them as JSON text.
JSON_COLUMNS: tuple[str, ...] = (
    "message_history",
    "available_tools",
    "expected_tool_calls",
    "acceptable_alternatives",
    "must_not_call",
    "trajectory",
)
COLUMNS: tuple[str, ...] = tuple(DatasetCase.model_fields)
