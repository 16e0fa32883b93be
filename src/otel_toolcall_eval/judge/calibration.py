"""Calibration records: how far a judge, identified by its fingerprint, agreed with people on labelled calls.

``judge agreement --calibration FILE`` appends one record per question (JSONL, so the file is also the history of
agreement over time); the gate reads the newest record whose fingerprint is the current one (``judge.fingerprint``)
and refuses judge verdicts without one, or below ``judge.calibration.min_kappa`` / ``min_items``. A changed model,
prompt, scale or redaction changes the fingerprint, so an old calibration no longer counts.

The file is read bounded (line length, record count) and every error names the file, line and field: it may have
been edited by hand or come from another branch.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

import orjson

from otel_toolcall_eval._files import append_durably
from otel_toolcall_eval.config.judge import JudgeConfig
from otel_toolcall_eval.dataset.errors import LocatedError
from otel_toolcall_eval.judge.fingerprint import fingerprints

logger = logging.getLogger("otel_toolcall_eval.judge")

VERSION: Final = 1
MAX_LINE_BYTES: Final = 1 << 16
MAX_RECORDS: Final = 100_000
_NUMBERS: Final = ("kappa", "weighted_kappa", "raw_agreement", "tpr", "tnr")
_TEXTS: Final = ("question", "fingerprint", "provider", "model", "created_at")


class CalibrationError(LocatedError):
    """A calibration file is unreadable or a record in it is invalid."""


@dataclass(frozen=True, slots=True)
class CalibrationRecord:
    """One question's agreement under one judge fingerprint, on ``n`` labelled items."""

    question: str
    fingerprint: str
    provider: str
    model: str
    n: int
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    weighted_kappa: float | None
    raw_agreement: float | None
    tpr: float | None  # of the items people passed, the share the judge passed too
    tnr: float | None  # of the items people failed, the share the judge failed too
    labels_from: str | None  # the earliest and latest ``labelled_at`` of the labels (None: not recorded)
    labels_to: str | None
    created_at: str
    version: int = VERSION

    def to_json(self) -> bytes:
        data = asdict(self)
        data["kappa_ci"] = list(self.kappa_ci) if self.kappa_ci else None
        return orjson.dumps(data)


def append_records(path: str | Path, records: Iterable[CalibrationRecord]) -> None:
    """Append records, one line each, in one ``write`` on an ``O_APPEND`` descriptor, then ``fsync``."""
    append_durably(path, b"".join(r.to_json() + b"\n" for r in records))


def read_records(path: str | Path) -> list[CalibrationRecord]:
    """Every record of the file, in file order; a missing file has none."""
    out: list[CalibrationRecord] = []
    for line, raw in _lines(path):
        if not raw.strip():
            continue
        if len(out) >= MAX_RECORDS:
            raise CalibrationError(path, line, None, f"more than {MAX_RECORDS:,} records: start a new file")
        out.append(_parse(path, line, raw))
    return out


def _lines(path: str | Path) -> Iterator[tuple[int, bytes]]:
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CalibrationError(path, None, None, f"cannot read: {exc.strerror or exc}") from None
    with handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_LINE_BYTES:
                raise CalibrationError(path, number, None, f"line longer than {MAX_LINE_BYTES:,} bytes")
            yield number, raw


def _parse(path: str | Path, line: int, raw: bytes) -> CalibrationRecord:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CalibrationError(path, line, None, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CalibrationError(path, line, None, "expected a JSON object")
    if data.get("version") != VERSION:
        raise CalibrationError(path, line, "version", f"expected {VERSION}")
    for key in _TEXTS:
        if not isinstance(data.get(key), str) or not data[key]:
            raise CalibrationError(path, line, key, "required: a non-empty string")
    n = data.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise CalibrationError(path, line, "n", "required: a count of labelled items")
    for key in _NUMBERS:
        value = data.get(key)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise CalibrationError(path, line, key, "must be a number or null")
    ci = data.get("kappa_ci")
    if ci is not None and (
        not isinstance(ci, list) or len(ci) != 2 or not all(isinstance(x, (int, float)) for x in ci)
    ):
        raise CalibrationError(path, line, "kappa_ci", "must be [low, high] or null")
    for key in ("labels_from", "labels_to"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise CalibrationError(path, line, key, "must be a string or null")
    return CalibrationRecord(
        question=data["question"],
        fingerprint=data["fingerprint"],
        provider=data["provider"],
        model=data["model"],
        n=n,
        kappa=data.get("kappa"),
        kappa_ci=(float(ci[0]), float(ci[1])) if ci else None,
        weighted_kappa=data.get("weighted_kappa"),
        raw_agreement=data.get("raw_agreement"),
        tpr=data.get("tpr"),
        tnr=data.get("tnr"),
        labels_from=data.get("labels_from"),
        labels_to=data.get("labels_to"),
        created_at=data["created_at"],
    )


def current(records: Iterable[CalibrationRecord], question: str, fingerprint: str) -> CalibrationRecord | None:
    """The newest (last written) record of ``question`` under ``fingerprint``."""
    found = None
    for record in records:
        if record.question == question and record.fingerprint == fingerprint:
            found = record
    return found


def uncalibrated(config: JudgeConfig, questions: Iterable[str]) -> list[str]:
    """Why each of ``questions`` may not gate: no calibration section, no record for the current fingerprint,
    too few items, or kappa below the minimum. Empty when every one is calibrated."""
    wanted = list(dict.fromkeys(questions))
    if not wanted:
        return []
    settings = config.calibration
    if settings is None:
        return [
            f"{q}: judge.calibration is not configured (no calibration records to check the judge against)"
            for q in wanted
        ]
    records = read_records(settings.file)
    prints: Mapping[str, str] = fingerprints(config)
    problems = []
    for question in wanted:
        fp = prints.get(question)
        if fp is None:
            problems.append(f"{question}: not a question of the judge section")
            continue
        record = current(records, question, fp)
        if record is None:
            stale = [r for r in records if r.question == question]
            why = (
                f"its {len(stale)} record(s) in {settings.file} are for another judge configuration"
                if stale
                else f"no record in {settings.file}"
            )
            problems.append(f"{question}: not calibrated for judge fingerprint {fp} ({why})")
        elif record.n < settings.min_items:
            problems.append(
                f"{question}: calibrated on {record.n} labelled items, fewer than judge.calibration.min_items "
                f"{settings.min_items}"
            )
        elif record.kappa is None or record.kappa < settings.min_kappa:
            shown = "n/a" if record.kappa is None else f"{record.kappa:.3f}"
            problems.append(
                f"{question}: Cohen's kappa {shown} is below judge.calibration.min_kappa {settings.min_kappa:g}"
            )
    return problems


class CalibrationWatch:
    """Each question's current kappa, for the online judge's agreement gauges: the file is re-read only when its
    size or modification time changed (a recalibration), in the metric reader's thread, never the application's.
    A damaged file is logged once and reads as no calibration."""

    def __init__(self, config: JudgeConfig) -> None:
        self._settings = config.calibration
        self._prints = fingerprints(config)
        self._stamp: tuple[int, int] | None = (-1, -1)  # nothing read yet
        self._kappas: dict[str, float | None] = {}
        self._warned = False

    def observations(self) -> list[tuple[str, float | None, float]]:
        """(question, current kappa or None, the configured minimum) per question; empty without calibration."""
        settings = self._settings
        if settings is None:
            return []
        try:
            st = os.stat(settings.file)
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._stamp = stamp
            records: list[CalibrationRecord] = []
            if stamp is not None:
                try:
                    records = read_records(settings.file)
                except CalibrationError as exc:
                    if not self._warned:
                        self._warned = True
                        logger.warning("toolcall-eval judge: calibration file ignored: %s", exc)
            found = {q: current(records, q, fp) for q, fp in self._prints.items()}
            self._kappas = {q: (r.kappa if r is not None else None) for q, r in found.items()}
        return [(q, self._kappas.get(q), settings.min_kappa) for q in self._prints]
