"""Outcomes that arrive late: a call that read as a success on a span that cannot record its error, re-read from
the reply the next model request carries back.

Some instrumentations cannot record a tool reply's error flag at all (their shape row says so, ``records_error_
flag``): the MCP Python SDK's client span (``MCP send tools/call <tool>``) records nothing of an ``isError``
result, so a tool that raised on a server in its own process reads as a success in the agent's trace. The model
still gets the reply ("Error executing tool get_population"), in its next request, under the call's id. So such a
call waits in the trace's state (``AwaitingReply``, by the model's call id: its span's own, or the one of the
request it borrowed its arguments from) until a model span's input carries that reply, which is then read as a
tool span's result would be: an unknown-tool reply, else a reply that says its tool failed
(``outcome.error_reply``), classified with the flag the span could not record (``REPLY_ERROR``), so a rejection
text is a malformed call and any other failure an execution failure. The verdicts go on the trace's root
(``trace.late_outcome.*``) and into its verdict: each failure is a tool error, and a malformed one fails
``trace.correct`` (``checks.verdict``). The processor holds such a call's tool span until then
(``online.held_spans``), so the span itself goes out with the reply's outcome (``with_reply_outcome``), counted and
offered to the judge and sessions once, with that outcome.

Pure functions over plain records: the online trace state keeps the waiting calls; replay runs the same
processor, and harvest gives the failed calls the reply the root names, so ``eval`` scores them the same.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from typing import Any

from otel_toolcall_eval.checks.outcome import REPLY_ERROR, classify_outcome, error_reply, reply_text, unknown_tool_reply
from otel_toolcall_eval.checks.repeated_failure import failure_digest, is_repeated_failure
from otel_toolcall_eval.records import CallHistory, CallScore, LateOutcomeVerdict, Outcome, ToolReply


@dataclass(slots=True, frozen=True)
class AwaitingReply:
    """A call scored a success on a span whose instrumentation cannot record its error flag."""

    step: int
    name: str
    # the call's normalised form (``records.call_digest``); None when its arguments were not recorded: a failure
    # its reply reports is then never the same as another's (``checks.repeated_failure``)
    digest: bytes | None = None


def reply_outcome(content: Any, input_error_types: Collection[str]) -> tuple[Outcome, str] | None:
    """What a reply the model got says of its call's outcome: None when it says nothing failed."""
    if unknown_tool_reply(content):
        return Outcome.MALFORMED_CALL, "unknown_tool"
    if not error_reply(content):
        return None
    outcome, source = classify_outcome(None, None, None, REPLY_ERROR, content, True, input_error_types, ())
    return outcome, source or "error.type"


# what a reply said of its call, as ``read_replies`` hands it on: the outcome, its evidence, and whether an earlier
# call of the trace failed the same way (the call is then a repeated failure)
ReplyVerdict = tuple[Outcome, str, bool]


def with_reply_outcome(score: CallScore, found: ReplyVerdict) -> CallScore:
    """The call's score with the outcome its reply gave (a copy: the engine's own stays as it was): an unknown-tool
    reply also says the tool is not known, as a tool span recording that reply would (``engine.call``)."""
    outcome, source, repeated = found
    if source == "unknown_tool":
        return replace(score, outcome=outcome, error_source=source, tool_known=False, repeated_failure=repeated)
    return replace(score, outcome=outcome, error_source=source, repeated_failure=repeated)


def remember_failure(history: CallHistory, digest: bytes | None, outcome: Outcome, source: str) -> bool:
    """A failure read from a call's reply, kept in the trace's history as the engine keeps a failed span's (its
    digest: the call, the outcome, its evidence and the reply's error name, ``REPLY_ERROR``'s, as ``eval`` reads the
    harvested call), so a later call failing the same way is a repeated failure. True when an earlier one did (the
    trace's calls are then not all correct, as the engine would have counted)."""
    if digest is None:
        return False
    failure = failure_digest(digest, outcome, source, REPLY_ERROR.error_type)
    repeated = is_repeated_failure(history, failure)
    if repeated:
        history.all_correct = False
    history.remember(digest, failure)
    return repeated


def read_replies(
    awaiting: dict[str, AwaitingReply],
    replies: Iterable[ToolReply],
    verdict: LateOutcomeVerdict | None,
    input_error_types: Collection[str],
    max_length: int = 256,
    answered: list[tuple[int, ReplyVerdict | None]] | None = None,
    history: CallHistory | None = None,
) -> LateOutcomeVerdict | None:
    """The waiting calls these replies answer (removed from ``awaiting``), read: ``verdict`` with them added in step
    order (unchanged when none was answered). ``answered``, when given, gets each answered call's step and what
    its reply said (None: nothing failed), for its held tool span (``online.held_spans``); ``history``, when given,
    keeps each failure (``remember_failure``)."""
    checked: list[int] = []
    failed: list[tuple[int, str, str, str, str]] = []
    for reply in replies:
        call = awaiting.pop(reply.call_id, None)
        if call is None:
            continue
        checked.append(call.step)
        found = reply_outcome(reply.content, input_error_types)
        if answered is not None:
            repeated = found is not None and history is not None and remember_failure(history, call.digest, *found)
            answered.append((call.step, None if found is None else (found[0], found[1], repeated)))
        if found is not None:
            text = reply_text(reply.content)
            text = text if isinstance(text, str) else str(text)
            failed.append((call.step, call.name, found[0].value, found[1], text[:max_length]))
    if not checked:
        return verdict
    before = verdict if verdict is not None else LateOutcomeVerdict()
    rows = sorted(
        [
            *zip(
                before.failed_steps,
                before.failed_tools,
                before.outcomes,
                before.error_sources,
                before.replies,
                strict=True,
            ),
            *failed,
        ]
    )
    return LateOutcomeVerdict(
        tuple(sorted((*before.checked_steps, *checked))),
        tuple(row[0] for row in rows),
        tuple(row[1] for row in rows),
        tuple(row[2] for row in rows),
        tuple(row[3] for row in rows),
        tuple(row[4] for row in rows),
    )
