"""The Markdown report: ready to post as a pull-request comment.

Gate verdict first, then (with ``--baseline``) which cases flipped and which metrics moved, then the summary,
per slice, per tool and the failing cases. Long sections fold into ``<details>``; lists are capped.
"""

from __future__ import annotations

from typing import Any

from otel_toolcall_eval._text import markdown_code, markdown_text
from otel_toolcall_eval.config.catalog import SLICES
from otel_toolcall_eval.offline.gate import HARD_KINDS
from otel_toolcall_eval.offline.reports.baseline import BaselineDiff, Flip
from otel_toolcall_eval.offline.reports.format import SHOWN, changes, delta, is_count, metric, num, pct, shown
from otel_toolcall_eval.offline.result import EvalResult

MAX_FAILING = 50


def render_markdown(result: EvalResult, diff: BaselineDiff | None = None, *, max_failing: int = MAX_FAILING) -> str:
    out: list[str] = []
    passed = result.gate.passed
    out.append(f"## {'✅' if passed else '❌'} Tool-call evaluation {'passed' if passed else 'failed'}")
    out.append("")
    cases, failed = result.cases.count, result.cases.failed
    runs = ", ".join(f"`{markdown_code(r)}`" for r in result.runs)
    sample_note = f" ({len(result.runs)} runs: means, spread guarded)" if len(result.runs) > 1 else ""
    if len(result.runs) > 1:
        passed_text = (
            f"{cases - failed:,} passed in every run, mean pass rate {num(result.report['summary']['pass_rate'])}"
        )
    else:
        passed_text = f"{cases - failed:,} passed ({pct(cases - failed, cases)})"
    out.append(
        f"Dataset `{markdown_code(result.dataset)}` · run{'s' if len(result.runs) > 1 else ''} {runs}{sample_note} · "
        f"**{cases:,} cases**, {passed_text}"
    )
    out.append("")
    out += _gate(result)
    if diff is not None:
        out += _diff(diff)
    out += _summary(result, diff)
    out += _slices(result)
    out += _tools(result)
    out += _sessions(result)
    out += _failing(result, max_failing)
    return "\n".join(out).rstrip() + "\n"


def _gate(result: EvalResult) -> list[str]:
    out = ["### Gate", "", "| | check | value | threshold |", "|---|---|---|---|"]
    for check in result.gate.checks:
        mark = "✅" if check.passed else "❌"
        if check.kind in HARD_KINDS:
            threshold = "none allowed"
        elif check.kind == "spread":
            threshold = f"spread ≤ {check.threshold:g}"
        else:
            threshold = f"{'≥' if check.kind == 'min' else '≤'} {check.threshold:g}"
        value = num(check.value, count=check.kind in HARD_KINDS)
        out.append(f"| {mark} | `{check.metric}` | {value} | {threshold} |")
    if not any(c.kind in ("min", "max") for c in result.gate.checks):
        out += ["", "_No thresholds configured (`gate.min` / `gate.max`): only the hard rules apply._"]
    out.append("")
    return out


def _diff(diff: BaselineDiff) -> list[str]:
    out = [f"### Changes since baseline (`{markdown_code(diff.baseline.path)}`)", ""]
    out.append(
        f"**{diff.regressed} regressed** · {diff.fixed} fixed · {diff.moved_count} moved · "
        f"{diff.added_count} added · {diff.removed_count} removed"
    )
    out.append("")
    if diff.regressions:
        out += ["#### Regressed (passed → failed)", "", "| case | why it fails now | metrics moved |", "|---|---|---|"]
        out += [f"| `{markdown_code(f.id)}` | {_why(f.reasons)} | {_changes(f)} |" for f in diff.regressions]
        out += _more(diff.regressed, len(diff.regressions))
    if diff.fixes:
        out += ["#### Fixed (failed → passed)", "", "| case | metrics moved |", "|---|---|"]
        out += [f"| `{markdown_code(f.id)}` | {_changes(f)} |" for f in diff.fixes]
        out += _more(diff.fixed, len(diff.fixes))
    if diff.moved:
        out += ["<details><summary>Metrics moved without flipping</summary>", ""]
        out += ["| case | passed | metrics moved |", "|---|---|---|"]
        out += [f"| `{markdown_code(f.id)}` | {'✅' if not f.reasons else '❌'} | {_changes(f)} |" for f in diff.moved]
        out += _more(diff.moved_count, len(diff.moved))
        out += ["</details>", ""]
    if diff.added:
        out += [
            f"Added cases: {', '.join(f'`{markdown_code(i)}`' for i in diff.added[:20])}" + _etc(diff.added_count, 20),
            "",
        ]
    if diff.removed:
        removed = ", ".join(f"`{markdown_code(i)}`" for i in diff.removed[:20])
        out += [f"Removed cases: {removed}" + _etc(diff.removed_count, 20), ""]
    return out


def _changes(flip: Flip) -> str:
    return changes(flip.changes)


def _more(total: int, shown_count: int) -> list[str]:
    return (["", f"_…and {total - shown_count:,} more (see the JSON report)._"] if total > shown_count else []) + [""]


def _etc(total: int, listed: int) -> str:
    return f" and {total - listed:,} more" if total > listed else ""


def _summary(result: EvalResult, diff: BaselineDiff | None) -> list[str]:
    header = "| metric | value |"
    rule = "|---|---|"
    if result.spread is not None:
        header += " spread |"
        rule += "---|"
    if diff is not None:
        header += " baseline | Δ |"
        rule += "---|---|"
    out = ["### Summary", "", header, rule]
    before = {path: b for path, b, _ in diff.summary} if diff is not None else {}
    for path in SHOWN:
        value = metric(result.scores, path)
        if value is None and (diff is None or before.get(path) is None):
            continue
        line = f"| `{path}` | {shown(path, value)} |"
        if result.spread_scores is not None:
            line += f" {num(metric(result.spread_scores, path))} |"
        if diff is not None:
            line += f" {shown(path, before.get(path))} | {delta(before.get(path), value, count=is_count(path))} |"
        out.append(line)
    out.append("")
    return out


def _slices(result: EvalResult) -> list[str]:
    out = ["<details><summary>Per slice and difficulty</summary>", ""]
    out += [
        "| slice | cases | pass rate | F1 | argument accuracy | order score | unnecessary-call rate |",
        "|---|---|---|---|---|---|---|",
    ]
    rows: list[tuple[str, dict[str, Any]]] = [(s, result.report["slices"][s]) for s in SLICES]
    rows += [(f"difficulty: {d}", block) for d, block in result.report["difficulty"].items()]
    for label, block in rows:
        if not block["cases"]:
            continue
        out.append(
            f"| {label} | {num(block['cases'], count=True)} | {num(block['pass_rate'])} | "
            f"{num(block['tool_selection']['f1'])} | {num(block['argument_accuracy'])} | "
            f"{num(block['order_score'])} | {num(block['unnecessary_call_rate'])} |"
        )
    out += ["", "</details>", ""]
    return out


def _tools(result: EvalResult) -> list[str]:
    tools = result.report["per_tool"]
    if not tools:
        return []
    out = ["<details><summary>Per tool</summary>", ""]
    out += [
        "| tool | expected | correct | recall | called | precision | argument accuracy |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, t in tools.items():
        out.append(
            f"| `{markdown_code(name)}` | {num(t['expected'], count=True)} | {num(t['correct'], count=True)} | "
            f"{num(t['recall'])} | {num(t['called'], count=True)} | {num(t['precision'])} | "
            f"{num(t['argument_accuracy'])} |"
        )
    out += ["", "</details>", ""]
    return out


MAX_SESSION_ROWS = 50


def _sessions(result: EvalResult) -> list[str]:
    """Cases that share a ``session_id`` (``offline.sessions``); several runs: the first run's rows."""
    block = result.report.get("sessions")
    if not block:
        return []
    rows = block.get("sessions")
    if rows is None:
        rows = (block.get("per_run") or [[]])[0]
    summary = block["summary"]
    out = [
        "### Sessions",
        "",
        f"{num(summary['sessions'], count=True)} sessions, pass rate {num(summary['pass_rate'])}",
    ]
    out += ["", "<details><summary>Per session</summary>", ""]
    out += [
        "| session | outcome | turns | turns ok | tool calls | errors | violations | repeated failures | over budget |"
    ]
    out += ["|---|---|---|---|---|---|---|---|---|"]
    for r in rows[:MAX_SESSION_ROWS]:
        out.append(
            f"| {markdown_text(r['id'])} | {r['outcome']} | {r['turns']} | {r['turns_ok']} | {r['tool_calls']} | "
            f"{r['errors']} | {r['violations']} | {r['repeated_failures']} | {'yes' if r['over_budget'] else 'no'} |"
        )
    out += ["", "</details>", ""]
    return out


def _failing(result: EvalResult, limit: int) -> list[str]:
    failed = result.cases.failed
    if not failed:
        return []
    title = f"Failing cases ({min(failed, limit):,} of {failed:,})" if failed > limit else f"Failing cases ({failed:,})"
    out = [f"<details><summary>{title}</summary>", "", "| case | slice | why |", "|---|---|---|"]
    listed = 0
    for row in result.cases:
        if row["passed"]:
            continue
        out.append(f"| `{markdown_code(row['id'])}` | {markdown_text(row['slice'])} | {_why(row['reasons'])} |")
        listed += 1
        if listed >= limit:
            break
    out += ["", "</details>", ""]
    return out


def _why(reasons: list[str]) -> str:
    """The first reasons a case fails: text from run files (tool names, error messages), shown as plain text."""
    return markdown_text("; ".join(reasons[:4]))
