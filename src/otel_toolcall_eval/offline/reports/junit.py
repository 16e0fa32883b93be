"""JUnit XML: one test per case (class name = slice) and one per gate check, for CI test views.

Streamed from the spool, so a million cases write in constant memory.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape as _escape
from xml.sax.saxutils import quoteattr as _quoteattr

from otel_toolcall_eval.offline.reports.format import num
from otel_toolcall_eval.offline.result import EvalResult

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_SPECIAL = re.compile("[<>&\"'\x00-\x1f\ud800-\udfff\ufffe\uffff]")  # anything escaping could touch
_TEXT_SPECIAL = re.compile("[<>&\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")  # same, for text


def escape(text: str) -> str:
    """XML text; characters XML 1.0 cannot carry at all (control characters) are dropped."""
    if _TEXT_SPECIAL.search(text) is None:  # the common case: nothing to escape or drop
        return text
    return _escape(_NOT_XML.sub("", text))


def quoteattr(text: str) -> str:
    if _SPECIAL.search(text) is None:  # the common case: an id or slice name as is
        return '"' + text + '"'
    return _quoteattr(_NOT_XML.sub("", text))


_CLASSNAMES: dict[str, str] = {}


def testcase_xml(row: dict[str, Any]) -> str:
    """One case row as a ``<testcase>`` element (a line): class name = slice, a failure lists the reasons."""
    slice_ = row["slice"]
    classname = _CLASSNAMES.get(slice_)
    if classname is None:
        classname = quoteattr("cases." + slice_)
        if len(_CLASSNAMES) < 64:
            _CLASSNAMES[slice_] = classname
    latency = row["latency_ms"]
    seconds = f"{latency / 1000.0:.3f}" if latency else "0"
    head = f'    <testcase classname={classname} name={quoteattr(row["id"])} time="{seconds}"'
    if row["passed"]:
        return head + "/>\n"
    reasons = row["reasons"] or ["failed"]
    detail = (
        f"expected: {', '.join(row['expected']) or '(no tool)'}\n"
        f"actual: {', '.join(row['actual']) or '(no tool)'}\n"
        f"f1 {num(row['f1'])}, argument accuracy {num(row['argument_accuracy'])}, "
        f"order score {num(row['order_score'])}\n" + "\n".join(reasons)
    )
    return (
        f'{head}><failure message={quoteattr("; ".join(reasons[:3]))} type="case">{escape(detail)}</failure>'
        "</testcase>\n"
    )


def write_junit(result: EvalResult, path: str | Path) -> None:
    gate = result.gate.checks
    gate_failures = sum(not c.passed for c in gate)
    cases, failed = result.cases.count, result.cases.failed
    head = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        f'<testsuites name="otel-toolcall-eval" tests="{cases + len(gate)}" '
        f'failures="{failed + gate_failures}" errors="0">\n',
        f'  <testsuite name="gate" tests="{len(gate)}" failures="{gate_failures}" errors="0" skipped="0">\n',
    ]
    for check in gate:
        head.append(f'    <testcase classname="gate" name={quoteattr(check.metric + " " + check.kind)}>')
        if not check.passed:
            head.append(f'<failure message={quoteattr(check.message)} type="gate"/>')
        head.append("</testcase>\n")
    head.append("  </testsuite>\n")
    head.append(
        f'  <testsuite name="cases" tests="{cases}" failures="{failed}" errors="0" skipped="0" '
        f"timestamp={quoteattr(result.generated_at)}>\n"
    )
    with open(path, "wb") as out:  # bytes: the workers' test cases are copied as they are
        out.write("".join(head).encode())
        if result.cases.has_junit:  # rendered by the workers while scoring
            result.cases.copy_junit(out)
        else:
            chunk: list[str] = []
            for row in result.cases:
                chunk.append(testcase_xml(row))
                if len(chunk) >= 1024:
                    out.write("".join(chunk).encode())
                    chunk.clear()
            out.write("".join(chunk).encode())
        out.write(b"  </testsuite>\n</testsuites>\n")
