"""The session verdict: the turns (traces) of one conversation rolled up into one verdict.

A trace scores one task; a conversation is several of them, and some failures only show across turns: the
agent fails the same call (same tool, same normalised arguments) in turn 2 and again in turn 4, or spends more
tool calls over the conversation than a budget allows though each turn stayed under its own. The online
processor (``sessions``) and the offline evaluator (``offline.sessions``) both fold their turns through
``SessionTally``, so a session means the same thing in both. Pure: no OpenTelemetry, no config.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

MAX_FAILURE_KEYS: Final = 256  # distinct failing calls a session remembers (16-byte digests); more are not tracked


@dataclass(slots=True, frozen=True)
class TurnSummary:
    """What one turn (a trace, or an offline case) contributes to its session.

    ``failed_calls``: digests (``records.call_digest``) of the turn's failing calls' normalised forms (tool name
    and arguments), each once per turn: a failure is "repeated across turns" when an earlier turn has it too."""

    tool_calls: int = 0
    errors: int = 0
    violations: int = 0
    composite_ok: bool = True
    failed_calls: frozenset[bytes] = frozenset()


@dataclass(slots=True, frozen=True)
class SessionVerdict:
    turns: int
    tool_calls: int
    errors: int
    violations: int
    turns_ok: int  # turns whose composite held (a turn without tool calls holds: it has nothing to fail)
    repeated_failures: int  # failing calls that an earlier turn of the session failed already (same tool + args)
    over_budget: bool  # more tool calls across the session than ``step_budget``

    @property
    def ok(self) -> bool:
        """Every turn's composite held, no failure repeated across turns, within the session's step budget."""
        return self.turns_ok == self.turns and self.repeated_failures == 0 and not self.over_budget

    @property
    def outcome(self) -> str:
        return "pass" if self.ok else "fail"


@dataclass(slots=True)
class SessionTally:
    """Running sums of a session's turns, in constant memory (at most ``MAX_FAILURE_KEYS`` digests).

    ``failed`` counts, per failing call, the turns it failed in: a call failing in k turns is k - 1 repeats,
    whatever the order the turns are added or merged in (the offline evaluator merges chunks scored apart)."""

    turns: int = 0
    tool_calls: int = 0
    errors: int = 0
    violations: int = 0
    turns_ok: int = 0
    failed: dict[bytes, int] = field(default_factory=dict)
    untracked_failures: int = 0  # failing calls past the bound: not compared across turns

    def add(self, turn: TurnSummary) -> None:
        self.turns += 1
        self.tool_calls += turn.tool_calls
        self.errors += turn.errors
        self.violations += turn.violations
        self.turns_ok += turn.composite_ok
        for key in turn.failed_calls:
            self._count(key, 1)

    def merge(self, other: SessionTally) -> None:
        self.turns += other.turns
        self.tool_calls += other.tool_calls
        self.errors += other.errors
        self.violations += other.violations
        self.turns_ok += other.turns_ok
        self.untracked_failures += other.untracked_failures
        for key, n in other.failed.items():
            self._count(key, n)

    def _count(self, key: bytes, n: int) -> None:
        failed = self.failed
        if key in failed:
            failed[key] += n
        elif len(failed) < MAX_FAILURE_KEYS:
            failed[key] = n
        else:
            self.untracked_failures += n

    @property
    def repeated_failures(self) -> int:
        return sum(n - 1 for n in self.failed.values())

    def verdict(self, step_budget: int | None) -> SessionVerdict:
        return SessionVerdict(
            turns=self.turns,
            tool_calls=self.tool_calls,
            errors=self.errors,
            violations=self.violations,
            turns_ok=self.turns_ok,
            repeated_failures=self.repeated_failures,
            over_budget=step_budget is not None and self.tool_calls > step_budget,
        )


def session_verdict(turns: Iterable[TurnSummary], step_budget: int | None = None) -> SessionVerdict:
    """The verdict of a session whose turns are ``turns``, in the order they happened."""
    tally = SessionTally()
    for turn in turns:
        tally.add(turn)
    return tally.verdict(step_budget)
