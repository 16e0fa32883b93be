"""Terminal view of scored spans (demo, replay): span trees, outcomes per tool, violations and the composite.

Rendered with rich when the ``cli`` extra is installed, else as plain text (``plain_trees``, ``plain_table``): the
demo runs on the core install. Both renderings come from the same rows and the same tree walk."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._console import escape as _escape
from otel_toolcall_eval._console import strip_markup
from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval.config.judge import PASS_SCORE

if TYPE_CHECKING:
    from rich.console import Group
    from rich.tree import Tree

# (title, columns, rows); every column but the first right-aligned
Section = tuple[str, list[str], list[list[str]]]


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
        from rich.tree import Tree

        trees = []
        for lines in self._kept_lines():
            tree = Tree("[bold]trace[/]")
            path = [tree]
            for depth, label in lines:
                del path[depth + 1 :]
                path.append(path[depth].add(label))
            trees.append(tree)
        return trees

    def plain_trees(self) -> list[str]:
        return [
            "\n".join(["trace", *("  " * (depth + 1) + strip_markup(label) for depth, label in lines)])
            for lines in self._kept_lines()
        ]

    def _kept_lines(self) -> list[list[tuple[int, str]]]:
        with self._lock:
            kept = [list(v) for v in self.kept.values()]
        return [_tree_lines(spans) for spans in kept]

    def _sections(self) -> tuple[list[Section], str]:
        with self._lock:
            outcomes = {k: Counter(v) for k, v in self.outcomes.items()}
            violations = Counter(self.violations)
            traces, ok = self.traces, self.composite_ok
            recoveries = Counter(self.recoveries)
        kinds = ["success", "malformed_call", "execution_failed", "empty_result"]
        sections: list[Section] = [
            (
                "Tool calls by outcome",
                ["tool", *kinds],
                [[escape(tool), *(str(outcomes[tool].get(k, 0)) for k in kinds)] for tool in sorted(outcomes)],
            ),
            (
                "Violations and trajectory findings",
                ["kind", "count"],
                [[escape(kind), str(n)] for kind, n in violations.most_common()],
            ),
            (
                "Recovery after a failed call",
                ["what followed", "count"],
                [[escape(kind), str(n)] for kind, n in recoveries.most_common()],
            ),
        ]
        rate = ok / traces if traces else 0.0
        colour = "green" if rate >= 0.9 else "yellow" if rate >= 0.7 else "red"
        return sections, f"traces: {traces}   composite ok: {ok}   [bold {colour}]composite ok-rate: {rate:.1%}[/]"

    def table(self) -> Group:
        from rich.console import Group
        from rich.table import Table

        sections, verdict_line = self._sections()
        tables = []
        for title, columns, rows in sections:
            table = Table(title=title, title_justify="left")
            for i, column in enumerate(columns):
                table.add_column(column, justify="right" if i else "left")
            for row in rows:
                table.add_row(*row)
            tables.append(table)
        verdict = Table.grid()
        verdict.add_row(verdict_line)
        return Group(*tables, verdict)

    def plain_table(self) -> str:
        sections, verdict_line = self._sections()
        out = []
        for title, columns, rows in sections:
            cells = [columns, *([strip_markup(c) for c in row] for row in rows)]
            widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
            out.append(title)
            for row in cells:
                out.append(
                    "  ".join(
                        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
                    )
                )
            out.append("")
        out.append(strip_markup(verdict_line))
        return "\n".join(out)


def escape(text: object) -> str:
    """Text from a trace (span and tool names, findings) for rich: markup escaped, escape sequences removed."""
    return _escape(terminal_safe(text))


def _tree_lines(spans: list[ReadableSpan]) -> list[tuple[int, str]]:
    """The trace as (depth, label) lines, depth first, children in start order."""
    by_parent: dict[int | None, list[ReadableSpan]] = defaultdict(list)
    ids = {s.context.span_id for s in spans if s.context is not None}
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
        by_parent[parent].append(s)
    lines: list[tuple[int, str]] = []
    for root in by_parent.get(None, []):
        _add_lines(lines, root, by_parent)
    return lines


# On tool spans only findings are shown: a True flag, a False check, the outcome and position.
_ALWAYS = ("outcome", "step", "batch")
_BAD_WHEN_TRUE = ("duplicate", "repeated_failure", "over_budget", "schema_drift", "arguments_oversized")
_BAD_WHEN_FALSE = ("parse_ok", "tool_known", "schema_valid")


def _label(span: ReadableSpan) -> str:
    attrs = span.attributes or {}
    if attrs.get(A.GEN_AI_OPERATION_NAME) == A.APPLY_GUARDRAIL:
        return _guard_label(span.name, attrs)
    if A.JUDGE_MODEL in attrs:
        return _verdict_label(span.name, attrs)
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


def _guard_label(name: str, attrs: Any) -> str:
    """The guard's span: the call it decided, the decision, the policies broken and whether the call was stopped."""
    decision = attrs.get(A.GEN_AI_GUARDRAIL_RESULT_VALUE)
    shown = [f"tool={_fmt(attrs.get(A.GEN_AI_TOOL_NAME))}", f"decision={_fmt(decision)}"]
    for key in (A.GUARD_POLICIES, A.GUARD_MODE, A.GUARD_PREVENTED):
        if key in attrs:
            shown.append(f"{key[len(A.PREFIX) :]}={_fmt(attrs[key])}")
    colour = "red" if decision in ("block", "ask") else "yellow" if decision == "warn" else "green"
    return f"[bold {colour}]{escape(name)}[/]  " + escape("  ".join(shown))


def _verdict_label(name: str, attrs: Any) -> str:
    """A judge's verdict span: the label and score it gave, and which model gave them."""
    score = attrs.get(A.GEN_AI_EVALUATION_SCORE_VALUE)
    shown = [f"label={_fmt(attrs.get(A.GEN_AI_EVALUATION_SCORE_LABEL))}", f"score={_fmt(score)}"]
    shown.append(f"model={_fmt(attrs.get(A.JUDGE_MODEL))}")
    passed = isinstance(score, (int, float)) and score >= PASS_SCORE
    colour = "green" if passed else "red" if isinstance(score, (int, float)) else "yellow"  # yellow: an error verdict
    return f"[bold {colour}]{escape(name)}[/]  " + escape("  ".join(shown))


def _fmt(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _add_lines(
    lines: list[tuple[int, str]], span: ReadableSpan, by_parent: dict[int | None, list[ReadableSpan]]
) -> None:
    """Iterative: a recorded trace may nest thousands of spans deep (each span is added once: ids are unique)."""
    stack = [(0, span)]
    seen: set[int] = set()
    while stack:
        depth, current = stack.pop()
        lines.append((depth, _label(current)))
        context = current.context
        if context is not None and context.span_id not in seen:
            seen.add(context.span_id)
            stack.extend((depth + 1, child) for child in reversed(by_parent.get(context.span_id, [])))
