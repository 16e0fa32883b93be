"""The labelling queue: judged calls sampled for people to label, stratified so every question and every judge
label gets coverage, and so do the calls where the judge and the deterministic checks disagree.

Built from verdicts (``judge run``'s file): per question, the strata are (judge label, disagreement), where a
disagreement is a pass (score >= 0.5) for a call the checks flagged or a fail for a call they found clean. Each
question's quota is shared evenly among its strata (a small stratum gives its unused share to the others) and
drawn with a seeded generator, so the same verdicts and seed give the same queue. Verdicts without a label (judge
errors) have nothing to agree with and are left out.

The default quota per question is the sample size at which a 95% interval of the raw agreement is at most
``ci_width`` wide in the worst case (p = 0.5): ``n = (z / width)^2``; kappa's interval is wider, so treat it as a
floor. The queue is bounded (``MAX_QUEUE``) and written as JSONL, one item a line (``QUEUE_FIELDS``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any, Final

from otel_toolcall_eval.config.judge import PASS_SCORE, QuestionConfig

MAX_QUEUE: Final = 10_000
QUEUE_FIELDS: Final = ("item", "question", "prompt", "scale", "judge", "explanation", "stratum", "tool_call", "data")


def size_for_width(width: float, confidence: float = 0.95) -> int:
    """Items per question for a worst-case interval of the raw agreement at most ``width`` wide."""
    if not 0 < width <= 1 or not 0 < confidence < 1:
        raise ValueError("width must be in (0, 1] and confidence in (0, 1)")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return min(MAX_QUEUE, math.ceil((z / width) ** 2))


def _stratum(verdict: Mapping[str, Any]) -> str:
    passed = float(verdict.get("score") or 0.0) >= PASS_SCORE
    flagged = verdict.get("flagged")
    disagrees = flagged is not None and passed == bool(flagged)
    return f"{verdict['label']}|{'disagrees' if disagrees else 'agrees'}"


def build_queue(
    verdicts: Sequence[Mapping[str, Any]],
    questions: Mapping[str, QuestionConfig],
    per_question: int,
    *,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """The queue's items: at most ``per_question`` per question, stratified, at most ``MAX_QUEUE`` in all."""
    rng = random.Random(seed)
    by_question: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for v in verdicts:
        if v.get("label") is None or v["question"] not in questions:
            continue
        by_question.setdefault(v["question"], {}).setdefault(_stratum(v), []).append(v)
    out: list[dict[str, Any]] = []
    for question, strata in by_question.items():
        chosen = _allocate(strata, per_question, rng)
        q = questions[question]
        for stratum, v in chosen:
            if len(out) >= MAX_QUEUE:
                return out
            out.append(
                {
                    "item": v["item"],
                    "question": question,
                    "prompt": q.prompt,
                    "scale": [{"label": s.label, "score": s.score, "meaning": s.meaning} for s in q.scale],
                    "judge": v["label"],
                    "explanation": v.get("explanation"),
                    "stratum": stratum,
                    "tool_call": v.get("tool_call") or {},
                    "data": v.get("data") or {},
                }
            )
    return out


def _allocate(
    strata: dict[str, list[Mapping[str, Any]]], quota: int, rng: random.Random
) -> list[tuple[str, Mapping[str, Any]]]:
    """Even shares per stratum; what a small stratum cannot use goes to the others (round-robin)."""
    pools = {name: rng.sample(items, len(items)) for name, items in sorted(strata.items())}
    chosen: list[tuple[str, Mapping[str, Any]]] = []
    while len(chosen) < quota and any(pools.values()):
        for name in list(pools):
            if pools[name] and len(chosen) < quota:
                chosen.append((name, pools[name].pop()))
    rng.shuffle(chosen)  # a rater sees the strata mixed, not one after the other
    return chosen
