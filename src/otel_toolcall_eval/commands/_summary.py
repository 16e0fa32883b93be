"""Terminal view of scored spans (demo, replay): span trees, outcomes per tool, violations and the composite."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from rich.console import Group
from rich.markup import escape as _escape
from rich.table import Table
from rich.tree import Tree

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._text import terminal_safe


class SummaryExporter(SpanExporter):
    """Reads the scores off exported spans: what a backend would receive, nothing else."""

    def __init__(self, keep_traces: int = 3) -> None:
        self.keep_traces = keep_traces
        self.outcomes: dict[str, Counter[str]] = defaultdict(Counter)
        self.violations: Counter[str] = Counter()
        self.traces = 0
        self.composite_ok = 0
        self.recoveries: Counter[str] = Counter()  # failed calls by what followed (the roots' trace.recovery.classes)
        self.kept: dict[int, list[ReadableSpan]] = {}
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            for span in spans:
                self._add(span)
        return SpanExportResult.SUCCESS

    def _add(self, span: ReadableSpan) -> None:
        attrs = span.attributes or {}
        ctx = span.context
        if ctx is not None and (ctx.trace_id in self.kept or len(self.kept) < self.keep_traces):
            self.kept.setdefault(ctx.trace_id, []).append(span)
        outcome = attrs.get(A.OUTCOME)
        if outcome is not None:
            tool = str(attrs.get("gen_ai.tool.name", "?"))
            self.outcomes[tool][str(outcome)] += 1
            violations = attrs.get(A.VIOLATIONS, ())
            for v in violations if isinstance(violations, (list, tuple)) else ():
                self.violations[str(v)] += 1
            for flag in ("duplicate", "repeated_failure", "over_budget"):
                if attrs.get(A.PREFIX + flag):
                    self.violations[flag] += 1
        if A.TRACE_COMPOSITE_OK in attrs:
            self.traces += 1
            self.composite_ok += bool(attrs[A.TRACE_COMPOSITE_OK])
            classes = attrs.get(A.TRACE_RECOVERY_CLASSES, ())
            for c in classes if isinstance(classes, (list, tuple)) else ():
                self.recoveries[str(c)] += 1

    def shutdown(self) -> None:
        return None

    def span_trees(self) -> list[Tree]:
        with self._lock:
            kept = {k: list(v) for k, v in self.kept.items()}
        return [_tree(spans) for spans in kept.values()]

    def table(self) -> Group:
        with self._lock:
            outcomes = {k: Counter(v) for k, v in self.outcomes.items()}
            violations = Counter(self.violations)
            traces, ok = self.traces, self.composite_ok
            recoveries = Counter(self.recoveries)
        kinds = ["success", "malformed_call", "execution_failed", "empty_result"]
        per_tool = Table(title="Tool calls by outcome", title_justify="left")
        per_tool.add_column("tool")
        for k in kinds:
            per_tool.add_column(k, justify="right")
        for tool in sorted(outcomes):
            per_tool.add_row(escape(tool), *(str(outcomes[tool].get(k, 0)) for k in kinds))
        viol = Table(title="Violations and trajectory findings", title_justify="left")
        viol.add_column("kind")
        viol.add_column("count", justify="right")
        for kind, n in violations.most_common():
            viol.add_row(escape(kind), str(n))
        recovery = Table(title="Recovery after a failed call", title_justify="left")
        recovery.add_column("what followed")
        recovery.add_column("count", justify="right")
        for kind, n in recoveries.most_common():
            recovery.add_row(escape(kind), str(n))
        rate = ok / traces if traces else 0.0
        colour = "green" if rate >= 0.9 else "yellow" if rate >= 0.7 else "red"
        verdict = Table.grid()
        verdict.add_row(f"traces: {traces}   composite ok: {ok}   [bold {colour}]composite ok-rate: {rate:.1%}[/]")
        return Group(per_tool, viol, recovery, verdict)


def escape(text: object) -> str:
    """Text from a trace (span and tool names, findings) for rich: markup escaped, escape sequences removed."""
    return _escape(terminal_safe(text))


def _tree(spans: list[ReadableSpan]) -> Tree:
    by_parent: dict[int | None, list[ReadableSpan]] = defaultdict(list)
    ids = {s.context.span_id for s in spans if s.context is not None}
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
        by_parent[parent].append(s)
    roots = by_parent.get(None, [])
    tree = Tree("[bold]trace[/]")
    for root in roots:
        _add_node(tree, root, by_parent)
    return tree


# On tool spans only findings are shown: a True flag, a False check, the outcome and position.
_ALWAYS = ("outcome", "step", "batch")
_BAD_WHEN_TRUE = ("duplicate", "repeated_failure", "over_budget", "schema_drift", "arguments_oversized")
_BAD_WHEN_FALSE = ("parse_ok", "tool_known", "schema_valid")


def _label(span: ReadableSpan) -> str:
    attrs = span.attributes or {}
    scores = {k[len(A.PREFIX) :]: v for k, v in attrs.items() if k.startswith(A.PREFIX)}
    if not scores:
        return f"[dim]{escape(span.name)}[/]"
    bad = scores.get("outcome", "success") != "success" or scores.get("trace.composite_ok") is False
    colour = "red" if bad else "green"
    shown = []
    for key, value in scores.items():
        if (
            key.startswith("trace.")
            or key in _ALWAYS
            or (key in _BAD_WHEN_TRUE and value is True)
            or (key in _BAD_WHEN_FALSE and value is False)
            or key in ("violations", "schema_errors", "error_source")
        ):
            shown.append(f"{key}={_fmt(value)}")
    return f"[bold {colour}]{escape(span.name)}[/]  " + escape("  ".join(shown))


def _fmt(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _add_node(tree: Tree, span: ReadableSpan, by_parent: dict[int | None, list[ReadableSpan]]) -> None:
    """Iterative: a recorded trace may nest thousands of spans deep (each span is added once: ids are unique)."""
    stack = [(tree, span)]
    seen: set[int] = set()
    while stack:
        parent, current = stack.pop()
        node = parent.add(_label(current))
        context = current.context
        if context is not None and context.span_id not in seen:
            seen.add(context.span_id)
            stack.extend((node, child) for child in reversed(by_parent.get(context.span_id, [])))
