"""Per-case rows: one JSON object per case (its N samples combined), spooled to disk so memory stays flat.

The rows are the ``cases[]`` of the JSON report; the Markdown, HTML, JUnit and terminal reports stream them
back from the spool file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO, Any

import orjson

from otel_toolcall_eval.checks.recovery import count_classes
from otel_toolcall_eval.offline.score import CaseResult

MAX_INPUT_CHARS = 200
ROW_PREFIX = b"    "  # a spooled row is stored as the JSON report's line for it: indented, comma after
ROW_SUFFIX = b",\n"


def spool_rows(rows: list[bytes]) -> bytes:
    """Rows (JSON, one per case) in the spool's line form, so the JSON report copies them as they are."""
    if not rows:
        return b""
    return ROW_PREFIX + (ROW_SUFFIX + ROW_PREFIX).join(rows) + ROW_SUFFIX


def case_row(results: list[CaseResult]) -> dict[str, Any]:
    """The report row of one case: its metrics, averaged over samples when there are several."""
    if len(results) == 1:
        return _row(results[0])
    first = results[0]
    row: dict[str, Any] = {
        "id": first.id,
        "slice": first.slice,
        "difficulty": first.difficulty,
        "passed": all(r.passed for r in results),
        "precision": _mean([r.precision for r in results]),
        "recall": _mean([r.recall for r in results]),
        "f1": _mean([r.f1 for r in results]),
        "schema_valid": _all([r.schema_valid for r in results]),
        "required_args_match": _all([r.required_args_match for r in results]),
        "argument_accuracy": _mean([r.argument_accuracy for r in results]),
        "free_text_similarity": _mean([r.free_text_similarity for r in results]),
        "order_score": _mean([r.order.score if r.order is not None else None for r in results]),
        "order_edit_distance": _mean([r.order.edit_distance if r.order is not None else None for r in results]),
        "unnecessary_calls": _mean([r.unnecessary_calls for r in results]),
        "parse_failures": _mean([r.parse_failures for r in results]),
        "unknown_tools": _mean([r.unknown_tools for r in results]),
        "duplicate_calls": _mean([r.duplicate_calls for r in results]),
        "undeclared_arguments": _mean([r.undeclared_arguments for r in results]),
        "must_not_call_violations": list(dict.fromkeys(v for r in results for v in r.must_not_call_violations)),
        "reasons": _reasons(results),
        "expected": list(first.expected),
        "actual": first.actual,
        "reference": first.reference,
        "latency_ms": _mean([r.latency_ms for r in results]),
        "tokens": _mean([r.tokens for r in results]),
        "error": next((r.error for r in results if r.error is not None), None),
        "user_input": first.user_input[:MAX_INPUT_CHARS],
        "recovery": _recovery([c for r in results for c in r.recovery]),
    }
    if first.policy_violations is not None:  # the config has trajectory policies: every row says which broke
        row["policy_violations"] = list(dict.fromkeys(v.violation for r in results for v in r.policy_violations or ()))
    if first.trajectory_mode is not None:  # matched in every run
        row["trajectory_mode"] = first.trajectory_mode
        row["trajectory_match"] = all(r.trajectory_match for r in results)
    if len(results) > 1:
        row["samples"] = len(results)
        row["pass_rate"] = sum(r.passed for r in results) / len(results)
    return row


def _row(r: CaseResult) -> dict[str, Any]:
    order = r.order
    row: dict[str, Any] = {
        "id": r.id,
        "slice": r.slice,
        "difficulty": r.difficulty,
        "passed": r.passed,
        "precision": r.precision,
        "recall": r.recall,
        "f1": r.f1,
        "schema_valid": r.schema_valid,
        "required_args_match": r.required_args_match,
        "argument_accuracy": r.argument_accuracy,
        "free_text_similarity": r.free_text_similarity,
        "order_score": order.score if order is not None else None,
        "order_edit_distance": order.edit_distance if order is not None else None,
        "unnecessary_calls": r.unnecessary_calls,
        "parse_failures": r.parse_failures,
        "unknown_tools": r.unknown_tools,
        "duplicate_calls": r.duplicate_calls,
        "undeclared_arguments": r.undeclared_arguments,
        "must_not_call_violations": list(dict.fromkeys(r.must_not_call_violations))
        if r.must_not_call_violations
        else [],
        "reasons": r.reasons,
        "expected": list(r.expected),
        "actual": r.actual,
        "reference": r.reference,
        "latency_ms": r.latency_ms,
        "tokens": r.tokens,
        "error": r.error,
        "user_input": r.user_input[:MAX_INPUT_CHARS],
        "recovery": _recovery(r.recovery),
        "call_recovery": _call_recovery(r),
    }
    if r.policy_violations is not None:  # only with trajectory policies configured: no key otherwise
        row["policy_violations"] = list(dict.fromkeys(v.violation for v in r.policy_violations))
    if r.trajectory_mode is not None:  # only for a case with a trajectory mode: no key otherwise
        row["trajectory_mode"] = r.trajectory_mode
        row["trajectory_match"] = r.trajectory_match
    return row


def _mean(values: list[float | int | None]) -> float | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    return sum(present) / len(present)


def _all(values: list[bool | None]) -> bool | None:
    present = [v for v in values if v is not None]
    return all(present) if present else None


def _reasons(results: list[CaseResult]) -> list[str]:
    if len(results) == 1:
        return results[0].reasons
    out: list[str] = []
    for i, r in enumerate(results, start=1):
        out += [f"run {i}: {reason}" for reason in r.reasons]
    return out


class CaseStore:
    """An append-only spool of case rows (temporary files, removed on ``close``); with ``junit``, a second spool
    holds each row's JUnit test case, rendered by the workers.

    Each row is spooled as its line of the JSON report's ``cases`` list (``spool_rows``), so that report copies
    the spool in the kernel instead of rewriting every row.
    """

    def __init__(self, *, junit: bool = False) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="toolcall-eval-cases-")  # noqa: SIM115
        self._junit: IO[bytes] | None = (
            tempfile.TemporaryFile(prefix="toolcall-eval-junit-") if junit else None  # noqa: SIM115
        )
        self.count = 0
        self.failed = 0

    @property
    def has_junit(self) -> bool:
        return self._junit is not None

    def append(self, row: dict[str, Any]) -> None:
        self._file.write(ROW_PREFIX + orjson.dumps(row) + ROW_SUFFIX)
        self.count += 1
        self.failed += not row["passed"]

    def append_raw(self, rows: bytes, count: int, failed: int, junit: bytes = b"") -> None:
        """Rows already in the spool's form (``spool_rows``, from a worker process), and their JUnit test cases."""
        self._file.write(rows)
        if self._junit is not None:
            self._junit.write(junit)
        self.count += count
        self.failed += failed

    def raw_lines(self) -> Iterator[bytes]:
        """Each row as its JSON bytes (no newline), in the order they were appended."""
        self._file.flush()
        self._file.seek(0)
        start, end = len(ROW_PREFIX), -len(ROW_SUFFIX)
        for line in self._file:
            yield line[start:end]
        self._file.seek(0, 2)

    def copy_rows(self, out: IO[bytes]) -> None:
        """Write the rows as the JSON report's list body: one indented row per line, commas between them (no
        newline after the last)."""
        self._file.flush()
        size = self._file.seek(0, 2)
        _copy(self._file, out, max(0, size - len(ROW_SUFFIX)))

    def copy_junit(self, out: IO[bytes]) -> None:
        """Write the JUnit test cases the workers rendered, in order."""
        assert self._junit is not None
        self._junit.flush()
        _copy(self._junit, out, self._junit.seek(0, 2))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for line in self.raw_lines():
            yield orjson.loads(line)

    def close(self) -> None:
        self._file.close()
        if self._junit is not None:
            self._junit.close()


def _copy(src: IO[bytes], out: IO[bytes], count: int) -> None:
    """The first ``count`` bytes of ``src`` appended to ``out``: in the kernel where it can (``copy_file_range``
    between regular files), else through a buffer. ``src`` is left at its end."""
    out.flush()
    done = 0
    copy_range = getattr(os, "copy_file_range", None)
    if copy_range is not None:
        try:
            while done < count:
                n = copy_range(src.fileno(), out.fileno(), count - done, done)
                if n == 0:
                    break
                done += n
        except OSError:  # not supported here (a pipe, another file system): copy the rest through a buffer
            pass
        if done:
            out.seek(0, 2)  # the copy moved the file's offset under the buffered writer
    src.seek(done)
    remaining = count - done
    while remaining > 0:
        block = src.read(min(remaining, 1 << 20))
        if not block:
            break
        out.write(block)
        remaining -= len(block)
    src.seek(0, 2)


def _call_recovery(r: CaseResult) -> list[str | None]:
    """Each call's recovery class, in the order of ``actual`` (None: the call did not fail)."""
    return list(r.call_recovery) if r.call_recovery else [None] * len(r.actual)


def _recovery(classes: Sequence[str]) -> dict[str, int]:
    """Failed calls by recovery class (``checks.recovery``), the classes that occurred only (all samples)."""
    if not classes:  # most cases: no call failed
        return {}
    return {c: n for c, n in count_classes(classes).items() if n}
