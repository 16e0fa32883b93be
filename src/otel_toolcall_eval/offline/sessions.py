"""Offline sessions: dataset cases that share a ``session_id`` are reported as one session as well.

Each case is a turn, scored as it always is; its figures fold into its session through the same
``checks.session.SessionTally`` the online processor uses, so a session means the same in both: turns, tool calls,
tool errors, violations (must-not-call and policy violations), turns that passed (offline, a case's pass is its
composite), failing calls repeated across turns (same tool, same normalised arguments) and the session step
budget (``sessions.step_budget``). Sums only, mergeable in any order: chunks scored in worker processes merge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from otel_toolcall_eval.checks.session import SessionTally, TurnSummary
from otel_toolcall_eval.engine import call_digest_of
from otel_toolcall_eval.offline.score import CaseResult
from otel_toolcall_eval.records import Outcome

MAX_SESSIONS: Final = 10_000  # sessions tracked per run; cases of further sessions are counted, not rolled up
MAX_ROWS: Final = 1_000  # per-session rows in the JSON report (the summary counts them all)


def case_turn(r: CaseResult) -> TurnSummary:
    """A scored case as a turn of its session."""
    failed = frozenset(call_digest_of(c) for c in r.checks if c.outcome is not Outcome.SUCCESS)
    return TurnSummary(
        tool_calls=len(r.actual),
        errors=sum(c.outcome is not Outcome.SUCCESS for c in r.checks),
        violations=len(r.must_not_call_violations) + len(r.policy_violations or ()),
        composite_ok=r.passed,
        failed_calls=failed,
    )


@dataclass(slots=True)
class SessionTotals:
    """The sessions of one run: a tally per session id, bounded in count."""

    tallies: dict[str, SessionTally] = field(default_factory=dict)
    untracked_cases: int = 0  # cases of sessions past ``MAX_SESSIONS``

    def add(self, session_id: str, r: CaseResult) -> None:
        tally = self.tallies.get(session_id)
        if tally is None:
            if len(self.tallies) >= MAX_SESSIONS:
                self.untracked_cases += 1
                return
            tally = self.tallies[session_id] = SessionTally()
        tally.add(case_turn(r))

    def merge(self, other: SessionTotals) -> None:
        self.untracked_cases += other.untracked_cases
        for session_id, theirs in other.tallies.items():
            mine = self.tallies.get(session_id)
            if mine is None:
                if len(self.tallies) >= MAX_SESSIONS:
                    self.untracked_cases += theirs.turns
                    continue
                mine = self.tallies[session_id] = SessionTally()
            mine.merge(theirs)

    def report(self, step_budget: int | None) -> dict[str, Any]:
        """``summary`` (counts over every session) and ``sessions`` (one row each, by id, the first ``MAX_ROWS``)."""
        rows: list[dict[str, Any]] = []
        passed = 0
        for session_id in sorted(self.tallies):
            v = self.tallies[session_id].verdict(step_budget)
            passed += v.ok
            if len(rows) < MAX_ROWS:
                rows.append(
                    {
                        "id": session_id,
                        "outcome": v.outcome,
                        "turns": v.turns,
                        "turns_ok": v.turns_ok,
                        "tool_calls": v.tool_calls,
                        "errors": v.errors,
                        "violations": v.violations,
                        "repeated_failures": v.repeated_failures,
                        "over_budget": v.over_budget,
                    }
                )
        count = len(self.tallies)
        return {
            "summary": {
                "sessions": count,
                "passed": passed,
                "pass_rate": passed / count if count else None,
                "untracked_cases": self.untracked_cases,
            },
            "sessions": rows,
        }
