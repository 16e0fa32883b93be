"""Recovery after an error: what the agent did after a failed tool call, decided by code.

The field asks of an agent not only whether a call failed but what came next. Five classes:

- ``corrected_retry``: the same tool again, with different arguments, and it succeeded;
- ``switched_tool``: another tool was called next;
- ``handed_back``: the next model turn answered without calling a tool (back to the user);
- ``repeated``: the same failing call again (same tool, same normalised arguments);
- ``carried_on``: anything else (a retry with changed arguments that failed too, or nothing recorded after the
  failure); whether that was sensible is the LLM judge's error-handling question.

Input is a plain sequence of steps in the order they ended: tool calls and model turns. A call of the same model
turn (parallel batch) as the failed call is no reaction to it and is skipped. A model turn that requested tool
calls is the reaction when none of them is the failed tool (``switched_tool``, also when the framework then ran
none of them, e.g. a tool it does not have); when one of them is, the call that follows decides (same or other
arguments). Calls whose arguments were not recorded (``key`` None) are never "the same call": a same-tool call
then counts as a changed retry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

CORRECTED_RETRY: Final = "corrected_retry"
SWITCHED_TOOL: Final = "switched_tool"
HANDED_BACK: Final = "handed_back"
REPEATED: Final = "repeated"
CARRIED_ON: Final = "carried_on"
CLASSES: Final = (CORRECTED_RETRY, SWITCHED_TOOL, HANDED_BACK, REPEATED, CARRIED_ON)


class CallStep(NamedTuple):
    """A tool call: its tool, its normalised call (any comparable value; None when not recorded), whether it
    failed, its 1-based step and the model turn that issued it (None when unknown)."""

    name: str
    key: Any  # not ``object``: mypyc's NamedTuple of an ``object`` field fails at import (KeyError)
    failed: bool
    step: int
    batch: int | None = None


class TurnStep(NamedTuple):
    """A model turn whose output was recorded; ``requested``: the tools it asked for (empty: it answered without
    a tool); a request whose tool name was not recorded is None."""

    requested: tuple[str | None, ...] = ()


Step = CallStep | TurnStep


def reacts_to(failed: CallStep, step: Step) -> bool:
    """Whether ``step`` is the agent's reaction to ``failed`` (else the classification looks further)."""
    if isinstance(step, TurnStep):
        return not step.requested or (None not in step.requested and failed.name not in step.requested)
    return failed.batch is None or step.batch is None or step.batch != failed.batch


def classify_reaction(failed: CallStep, reaction: Step | None) -> str:
    """The recovery class of ``failed`` given the step that reacted to it (``reacts_to``); None: none followed."""
    if reaction is None:
        return CARRIED_ON
    if isinstance(reaction, TurnStep):
        return SWITCHED_TOOL if reaction.requested else HANDED_BACK
    if reaction.name != failed.name:
        return SWITCHED_TOOL
    if failed.key is not None and reaction.key == failed.key:
        return REPEATED
    return CORRECTED_RETRY if not reaction.failed else CARRIED_ON


def react(pending: Sequence[CallStep], step: Step) -> tuple[list[CallStep], list[tuple[int, str, str]]]:
    """``step`` against failed calls waiting for their reaction (the online side's running form of
    ``classify_recoveries``): those still waiting, and (step, tool, class) of those it reacted to, in order."""
    still: list[CallStep] = []
    now: list[tuple[int, str, str]] = []
    for failed in pending:
        if reacts_to(failed, step):
            now.append((failed.step, failed.name, classify_reaction(failed, step)))
        else:
            still.append(failed)
    return still, now


def classify_recoveries(steps: Sequence[Step]) -> list[tuple[CallStep, str]]:
    """Every failed call of ``steps`` with its recovery class, in step order (one pass, then a bounded look-ahead
    per failure: it stops at the first reaction)."""
    out: list[tuple[CallStep, str]] = []
    for i, step in enumerate(steps):
        if not isinstance(step, CallStep) or not step.failed:
            continue
        reaction = next((s for s in steps[i + 1 :] if reacts_to(step, s)), None)
        out.append((step, classify_reaction(step, reaction)))
    return out


def count_classes(classes: Iterable[str]) -> dict[str, int]:
    """Per-class counts, every class present (0 when none)."""
    counts = dict.fromkeys(CLASSES, 0)
    for c in classes:
        counts[c] += 1
    return counts
