"""The verdicts file: one judged question a line, JSONL, defined here once.

Written by offline judge runs (``offline.judge_run``) and, for a small share of its verdicts, by the online judge
(``judge.labelling``); read by ``eval --judge-verdicts`` (reported, gated once calibrated) and ``judge queue``
(sampled for people to label). Each line keeps ``data``, exactly what the question received (redacted, cut),
and ``tool_call``, the call itself (tool, arguments, result, outcome): what a labeller is shown. The reader is
bounded and names file, line and field on every error.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Final

import orjson

from otel_toolcall_eval._files import append_blob
from otel_toolcall_eval.dataset.errors import LocatedError

logger = logging.getLogger("otel_toolcall_eval.judge")

VERDICT_FIELDS: Final = (
    "item",  # the judged call: "<case id>/<call index>" offline, "<trace id>:<span id>" online
    "case",  # offline: the dataset case (null online)
    "call",  # offline: the call's index in the run line (null online)
    "tool",
    "flagged",  # the deterministic checks flagged the call (malformed, failed, empty result, a violation)
    "question",
    "fingerprint",  # the question's judge fingerprint when it was asked
    "label",  # null on an error
    "score",
    "explanation",
    "error",  # the error.type, or null
    "model",
    "cost",  # in the budget's currency; 0 when cached
    "cached",
    "data",  # exactly what the question received
    "tool_call",  # the call as a labeller sees it: tool_name, arguments, result, outcome, error (redacted, cut)
)
MAX_VERDICT_LINE_BYTES: Final = 1 << 20
MAX_VERDICTS: Final = 1_000_000


class VerdictsError(LocatedError):
    """A verdicts file is unreadable or a line in it is invalid."""


def read_verdicts(path: str | Path) -> list[dict[str, Any]]:
    """A verdicts file, checked line by line; each line gets its ``line`` number."""
    out: list[dict[str, Any]] = []
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise VerdictsError(path, None, None, f"cannot read: {exc.strerror or exc}") from None
    with handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_VERDICT_LINE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_VERDICT_LINE_BYTES:
                raise VerdictsError(path, number, None, f"line longer than {MAX_VERDICT_LINE_BYTES:,} bytes")
            if not raw.strip():
                continue
            if len(out) >= MAX_VERDICTS:
                raise VerdictsError(path, number, None, f"more than {MAX_VERDICTS:,} verdicts")
            out.append(_check(path, number, raw))
    return out


def _check(path: str | Path, number: int, raw: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise VerdictsError(path, number, None, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise VerdictsError(path, number, None, "expected a JSON object")
    for key in ("item", "question", "fingerprint"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise VerdictsError(path, number, key, "required: a non-empty string")
    label = data.get("label")
    if label is not None and not isinstance(label, str):
        raise VerdictsError(path, number, "label", "must be a string or null")
    if label is None and not isinstance(data.get("error"), str):
        raise VerdictsError(path, number, "error", "a verdict without a label needs its error type")
    score = data.get("score")
    if score is not None and (not isinstance(score, (int, float)) or isinstance(score, bool)):
        raise VerdictsError(path, number, "score", "must be a number or null")
    for key in ("data", "tool_call"):
        if not isinstance(data.get(key, {}), dict):
            raise VerdictsError(path, number, key, "must be an object")
    data["line"] = number
    return data


class VerdictLog:
    """Appends verdict lines to a file, at most ``max_lines`` in all (the lines already there count): one
    ``write`` on an ``O_APPEND`` descriptor per line, so processes on one host can share the file. A failed
    write is logged once and never raised (this runs in the judge's worker thread)."""

    def __init__(self, path: str | Path, max_lines: int) -> None:
        self.path = Path(path)
        self.max_lines = max_lines
        self.lines = _count_lines(self.path)
        self._warned = False

    def append(self, line: dict[str, Any]) -> bool:
        if self.lines >= self.max_lines:
            return False
        blob = orjson.dumps(line, default=str) + b"\n"
        if len(blob) > MAX_VERDICT_LINE_BYTES:
            return False
        try:
            append_blob(self.path, blob, sync=False)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                logger.warning("toolcall-eval judge: cannot append to the labelling file %s: %s", self.path, exc)
            return False
        self.lines += 1
        return True


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as handle:
            return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))
    except OSError:
        return 0
