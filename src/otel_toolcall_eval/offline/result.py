"""What an offline evaluation returns: the reports read this, never the runner or the pipeline that made it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from otel_toolcall_eval._version import __version__
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.offline.cases import CaseStore
from otel_toolcall_eval.offline.gate import GateResult
from otel_toolcall_eval.offline.scores import RunReport


@dataclass
class EvalResult:
    dataset: str
    runs: list[str]
    per_run_scores: list[RunReport]  # each run's typed result (summary, slices, difficulty, per_tool, ...)
    scores: RunReport  # the mean over runs (the run itself when there is one): what the gate and reports read
    spread_scores: RunReport | None  # max - min over runs, when there are several
    cases: CaseStore
    gate: GateResult
    config: EvalConfig
    generated_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @cached_property
    def report(self) -> dict[str, Any]:
        """``scores`` in the JSON report's form."""
        return self.scores.to_json()

    @cached_property
    def spread(self) -> dict[str, Any] | None:
        return None if self.spread_scores is None else self.spread_scores.to_json()

    @cached_property
    def per_run(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self.per_run_scores]

    def head(self) -> dict[str, Any]:
        """The JSON report without ``cases``."""
        out: dict[str, Any] = {
            "meta": {
                "tool": "otel-toolcall-eval",
                "version": __version__,
                "generated_at": self.generated_at,
                "dataset": self.dataset,
                "runs": self.runs,
                "cases": self.cases.count,
            },
            "summary": self.report["summary"],
            "slices": self.report["slices"],
            "difficulty": self.report["difficulty"],
            "per_tool": self.report["per_tool"],
            "confusion_matrix": self.report["confusion_matrix"],
            "gate": self.gate.to_json(),
        }
        if len(self.runs) > 1:
            out["spread"] = {k: self.spread[k] for k in ("summary", "slices", "per_tool")} if self.spread else None
            out["runs_detail"] = [
                {"run": path, "summary": r["summary"]} for path, r in zip(self.runs, self.per_run, strict=True)
            ]
        return out

    def close(self) -> None:
        """Remove the spooled case rows (``with evaluate(...) as result:`` does it on leaving)."""
        self.cases.close()

    def __enter__(self) -> EvalResult:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
