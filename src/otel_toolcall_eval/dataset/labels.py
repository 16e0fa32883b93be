"""The labels file: the judge's label and human labels for the same judged calls, one JSON object a line.

Defined here once, for ``judge agreement`` and anything that writes labels::

    {"item": "4bf9...:00f0...", "question": "tool_appropriateness", "judge": "acceptable", "human": "appropriate"}
    {"item": "run-2/case-7", "question": "argument_quality", "judge": "good", "humans": {"ana": "good", "bo": "poor"}}

``item`` names the judged call (unique per question), ``question`` the judge question, ``judge`` the judge's label,
and either ``human`` (one rater's label) or ``humans`` (rater name -> label); ``note`` is free text and ignored;
``labelled_at`` (ISO 8601) says when, and dates a calibration. Lines of one item that name different raters (each
``humans``, the same ``judge`` label) are merged: that is how the labelling page appends several raters' labels.
A named rater labelling one item again (the page open twice, issue 28) is resolved, not refused: the later line's
label wins and a warning names both lines; an unnamed ``human`` twice is still an error (nothing says it is the
same person).
Labels must be on the question's scale when it is known (a built-in question, or one from the config). Every
error names the file, the line and the field, and the reader is bounded (line length, item count), since a labels
file may come from anywhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from otel_toolcall_eval.dataset.errors import LocatedError

FIELDS = frozenset({"item", "question", "judge", "human", "humans", "note", "labelled_at"})
MAX_LINE_BYTES = 1 << 20
MAX_ITEMS = 1_000_000
MAX_TEXT = 500  # an item name, question, label or rater name longer than this is not one


class LabelsError(LocatedError):
    """A labels file is unreadable or a line in it is invalid; ``field`` is the key."""


@dataclass(frozen=True, slots=True)
class Labelled:
    """One judged call with its labels, and the line it came from."""

    line: int
    item: str
    question: str
    judge: str
    humans: tuple[tuple[str, str], ...]  # (rater, label); one unnamed rater is ("", label)
    labelled_at: str | None = None  # the latest of its lines' ``labelled_at``


def read_labels(
    path: str | Path, scales: Mapping[str, Sequence[str]] | None = None, warnings: list[str] | None = None
) -> list[Labelled]:
    """Every line of the file, validated; ``scales`` (question -> labels) checks the labels of known questions;
    ``warnings`` receives what was resolved (a rater's label given again: the later one kept)."""
    notes = warnings if warnings is not None else []
    known = scales or {}
    out: list[Labelled] = []
    seen: dict[tuple[str, str], int] = {}  # -> index in ``out``
    for line, raw in _lines(path):
        if not raw.strip():
            continue
        if len(out) >= MAX_ITEMS:
            raise LabelsError(path, line, None, f"more than {MAX_ITEMS:,} labelled items: split the file")
        record = _parse(path, line, raw, known)
        key = (record.question, record.item)
        if key in seen:
            out[seen[key]] = _merged(path, out[seen[key]], record, notes)
            continue
        seen[key] = len(out)
        out.append(record)
    return out


def _merged(path: str | Path, first: Labelled, more: Labelled, notes: list[str]) -> Labelled:
    """Another line for the same item: other raters' labels added, a named rater's again replacing theirs (with a
    note); an unnamed rater on either line is an error."""
    raters = {name for name, _ in first.humans}
    if "" in raters or any(not name for name, _ in more.humans):
        raise LabelsError(path, more.line, "item", f"{more.item!r} is labelled twice (first on line {first.line})")
    if more.judge != first.judge:
        raise LabelsError(
            path, more.line, "judge", f"{more.judge!r} differs from line {first.line}'s judge label {first.judge!r}"
        )
    again = [name for name, _ in more.humans if name in raters]
    if again:
        notes.append(
            f"{path}:{more.line}: {more.item!r} labelled again by {', '.join(again)} (first on line {first.line}): "
            "the later label is kept"
        )
    given = dict(first.humans) | dict(more.humans)  # the later label of a rater replaces the earlier
    dates = [d for d in (first.labelled_at, more.labelled_at) if d]
    return Labelled(
        line=first.line,
        item=first.item,
        question=first.question,
        judge=first.judge,
        humans=tuple(given.items()),
        labelled_at=max(dates) if dates else None,
    )


def _lines(path: str | Path) -> Iterator[tuple[int, bytes]]:
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), start=1):
                if len(raw) > MAX_LINE_BYTES:
                    raise LabelsError(path, number, None, f"line longer than {MAX_LINE_BYTES:,} bytes")
                yield number, raw
    except OSError as exc:
        raise LabelsError(path, None, None, f"cannot read: {exc.strerror or exc}") from None


def _parse(path: str | Path, line: int, raw: bytes, scales: Mapping[str, Sequence[str]]) -> Labelled:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise LabelsError(path, line, None, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise LabelsError(path, line, None, "expected a JSON object")
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        fields = ", ".join(sorted(FIELDS))
        raise LabelsError(path, line, str(unknown[0])[:MAX_TEXT], f"unknown field (fields: {fields})")
    item = _text(path, line, data, "item")
    question = _text(path, line, data, "question")
    scale = scales.get(question)
    judge = _label(path, line, "judge", data.get("judge"), question, scale)
    if ("human" in data) == ("humans" in data):
        raise LabelsError(path, line, "human", "give either 'human' (one label) or 'humans' (rater -> label)")
    if "human" in data:
        humans: tuple[tuple[str, str], ...] = (("", _label(path, line, "human", data["human"], question, scale)),)
    else:
        given = data["humans"]
        if not isinstance(given, dict) or not given:
            raise LabelsError(path, line, "humans", "expected an object of rater name -> label, not empty")
        for rater in given:
            if not rater or len(rater) > MAX_TEXT:
                raise LabelsError(path, line, "humans", f"a rater's name must be 1 to {MAX_TEXT} characters")
        humans = tuple(
            (rater, _label(path, line, f"humans.{rater}", label, question, scale)) for rater, label in given.items()
        )
    labelled_at = data.get("labelled_at")
    if labelled_at is not None and (not isinstance(labelled_at, str) or not 1 <= len(labelled_at) <= 64):
        raise LabelsError(path, line, "labelled_at", "must be an ISO 8601 date-time string")
    return Labelled(line=line, item=item, question=question, judge=judge, humans=humans, labelled_at=labelled_at)


def _text(path: str | Path, line: int, data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        raise LabelsError(path, line, key, f"required: a string of 1 to {MAX_TEXT} characters")
    return value


def _label(path: str | Path, line: int, field: str, value: Any, question: str, scale: Sequence[str] | None) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        raise LabelsError(path, line, field, f"required: a label, a string of 1 to {MAX_TEXT} characters")
    if scale is not None and value not in scale:
        raise LabelsError(path, line, field, f"{value!r} is not on {question}'s scale ({', '.join(scale)})")
    return value
