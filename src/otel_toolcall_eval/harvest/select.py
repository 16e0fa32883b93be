"""``--where``: which traces to harvest, as conditions on span attributes, joined by ``and``.

``FIELD OP VALUE`` with OP one of ``=``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``=~`` (regex). A condition
holds when any span of the trace has the attribute with a matching value; for an array attribute ``=``
means "contains". FIELD is an attribute key; a bare name is also looked up as ``toolcall_eval.trace.<name>``
and ``toolcall_eval.<name>``, and ``tool``, ``violation`` and ``label`` are short for the tool name, the
violations list and a judge verdict label. Examples: ``composite_ok = false``, ``violation = must_not_call``,
``tool = send_email and outcome != success``, ``user.feedback = thumbs_down``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.errors import ToolcallEvalError

ALIASES: dict[str, tuple[str, ...]] = {
    "tool": (A.GEN_AI_TOOL_NAME, A.OPENINFERENCE_TOOL_NAME, A.TRACELOOP_ENTITY_NAME),
    "violation": (A.VIOLATIONS,),
    "label": ("gen_ai.evaluation.score.label",),
}
_OPS = ("=~", "!=", ">=", "<=", "=", ">", "<")


class WhereError(ToolcallEvalError, ValueError):
    pass


@dataclass(frozen=True)
class Condition:
    keys: tuple[str, ...]
    op: str
    value: Any
    text: str
    field: str = ""  # as written

    def holds(self, attrs: Mapping[str, Any]) -> bool:
        return any(key in attrs and _compare(attrs[key], self.op, self.value) for key in self.keys)


def _literal(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _keys(field: str) -> tuple[str, ...]:
    if field in ALIASES:
        return ALIASES[field]
    if "." in field:
        return (field,)
    return (field, f"{A.PREFIX}trace.{field}", f"{A.PREFIX}{field}")


def parse_where(expression: str) -> list[Condition]:
    try:
        tokens = shlex.split(expression)
    except ValueError as exc:
        raise WhereError(f"--where: {exc}") from None
    conditions: list[Condition] = []
    clause: list[str] = []
    for token in [*tokens, "and"]:
        if token.lower() != "and":
            clause.append(token)
            continue
        text = " ".join(clause)
        if not clause:
            raise WhereError(f"--where: empty condition in {expression!r}")
        conditions.append(_condition(text))
        clause = []
    return conditions


def _condition(text: str) -> Condition:
    for op in _OPS:
        field, sep, value = text.partition(op)
        if sep and field.strip() and value.strip():
            field, value = field.strip(), value.strip()
            if op == "=~":
                try:
                    pattern: Any = re.compile(value)
                except re.error as exc:
                    raise WhereError(f"--where: bad regex in {text!r}: {exc}") from None
                return Condition(_keys(field), op, pattern, text, field)
            return Condition(_keys(field), op, _literal(value), text, field)
    raise WhereError(f"--where: {text!r} is not FIELD OP VALUE (OP one of {', '.join(_OPS)})")


def _compare(actual: Any, op: str, expected: Any) -> bool:
    if isinstance(actual, (list, tuple)):
        hit = any(_compare(a, "=" if op == "!=" else op, expected) for a in actual)
        return not hit if op == "!=" else hit
    if op == "=~":
        return bool(expected.search(str(actual)))
    if op in ("=", "!="):
        same = actual == expected or str(actual).lower() == str(expected).lower()
        return same if op == "=" else not same
    try:
        a, b = float(actual), float(expected)
    except (TypeError, ValueError):
        return False
    return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[op]


def check_fields(conditions: Sequence[Condition], spans: Iterable[ReadableSpan]) -> None:
    """A ``WhereError`` naming each field no span has under any of its keys: a typo (``composit_ok``) would
    otherwise select nothing and succeed with an empty file. Close matches among the keys present are offered."""
    wanted = {key for c in conditions for key in c.keys}
    present: set[str] = set()
    seen: set[str] = set()
    for span in spans:
        attrs = span.attributes or {}
        present.update(k for k in wanted if k in attrs)
        if len(seen) < 10_000:
            seen.update(attrs)
    missing = [c for c in conditions if not any(k in present for k in c.keys)]
    if not missing:
        return
    from difflib import get_close_matches

    problems = []
    for c in dict.fromkeys(missing):
        names = [k.removeprefix(f"{A.PREFIX}trace.").removeprefix(A.PREFIX) for k in seen]
        close = get_close_matches(c.field, sorted(set(names) | set(seen)), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        problems.append(f"--where: no span has the field '{c.field}' (looked up as {', '.join(c.keys)}){hint}")
    raise WhereError("\n".join(problems))


def matches(spans: Iterable[ReadableSpan], conditions: Sequence[Condition]) -> bool:
    attrs = [s.attributes or {} for s in spans]
    return all(any(c.holds(a) for a in attrs) for c in conditions)
