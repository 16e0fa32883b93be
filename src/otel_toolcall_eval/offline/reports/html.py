"""One self-contained HTML file: per-tool recall bars, the confusion matrix as a heatmap, the per-case table.

No CDN, no external fetch: CSS, SVG and a few lines of script are inline, so the file opens from a CI artifact
store, an e-mail or a laptop offline. Everything is rendered here (it reads without script); the script only
filters and counts the case table. The table lists failing cases first and is capped (``max_rows``).
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from otel_toolcall_eval.config.catalog import SLICES
from otel_toolcall_eval.offline.reports.baseline import BaselineDiff, Flip
from otel_toolcall_eval.offline.reports.format import SHOWN, changes, delta, is_count, metric, num, pct, shown
from otel_toolcall_eval.offline.result import EvalResult

MAX_ROWS = 2000
CARDS: tuple[tuple[str, str], ...] = (
    ("pass rate", "pass_rate"),
    ("tool-selection F1", "tool_selection.f1"),
    ("precision", "tool_selection.precision"),
    ("recall", "tool_selection.recall"),
    ("argument accuracy", "argument_accuracy"),
    ("schema validity", "schema_validity"),
    ("order score", "order_score"),
    ("unnecessary-call rate", "unnecessary_call_rate"),
    ("missed-call rate", "missed_call_rate"),
    ("parse-failure rate", "parse_failure_rate"),
)

_CSS = """
:root { --ok: #1a7f37; --bad: #cf222e; --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       margin: 0 auto; padding: 24px; max-width: 1200px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 10px; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 12px; color: #fff; font-weight: 600; }
.verdict.pass { background: var(--ok); } .verdict.fail { background: var(--bad); }
.meta { color: var(--muted); margin: 6px 0 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(160px, 1fr)); gap: 10px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; background: var(--bg); }
.card .v { font-size: 22px; font-weight: 600; } .card .k { color: var(--muted); font-size: 12px; }
ul.gate { list-style: none; padding: 0; margin: 0; } ul.gate li { padding: 2px 0; }
ul.gate li.fail { color: var(--bad); font-weight: 600; } ul.gate li.pass { color: var(--ok); }
table { border-collapse: collapse; width: 100%; } th, td { border-bottom: 1px solid var(--line);
  padding: 4px 8px; text-align: left; vertical-align: top; } th { background: var(--bg); position: sticky; top: 0; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.fail td:first-child { border-left: 3px solid var(--bad); }
tr.pass td:first-child { border-left: 3px solid var(--ok); }
.reasons { color: var(--muted); font-size: 12px; } code { font-size: 12px; }
.controls { margin: 8px 0; display: flex; gap: 16px; align-items: center; }
svg text { font: 12px system-ui, sans-serif; fill: var(--ink); }
.note { color: var(--muted); font-size: 12px; }
"""

_SCRIPT = """
(function () {
  var rows = Array.prototype.slice.call(document.querySelectorAll('#cases tbody tr'));
  var only = document.getElementById('failing-only'), query = document.getElementById('case-filter');
  var count = document.getElementById('case-count');
  function apply() {
    var q = (query.value || '').toLowerCase(), shown = 0;
    rows.forEach(function (tr) {
      var hit = (!only.checked || tr.classList.contains('fail')) &&
                (!q || tr.textContent.toLowerCase().indexOf(q) >= 0);
      tr.style.display = hit ? '' : 'none';
      if (hit) { shown += 1; }
    });
    count.textContent = 'showing ' + shown + ' of ' + rows.length + ' rows';
  }
  only.addEventListener('change', apply);
  query.addEventListener('input', apply);
  apply();
  document.body.setAttribute('data-ready', 'true');
})();
"""


def render_html(result: EvalResult, diff: BaselineDiff | None = None, *, max_rows: int = MAX_ROWS) -> str:
    """The report page; with ``diff`` (``--baseline``) the changes since that run follow the gate, as in the
    Markdown report: the cases that flipped, the metrics that moved."""
    report = result.report
    passed = result.gate.passed
    cases, failed = result.cases.count, result.cases.failed
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Tool-call evaluation: {'passed' if passed else 'failed'}</title>",
        f"<style>{_CSS}</style></head><body>",
        f'<h1>Tool-call evaluation <span class="verdict {"pass" if passed else "fail"}" id="verdict">'
        f"{'gate passed' if passed else 'gate failed'}</span></h1>",
        f'<p class="meta">dataset <code>{escape(result.dataset)}</code> · '
        f"{'runs' if len(result.runs) > 1 else 'run'} "
        + ", ".join(f"<code>{escape(r)}</code>" for r in result.runs)
        + f" · {cases:,} cases, {cases - failed:,} passed ({pct(cases - failed, cases)})"
        + f" · {escape(result.generated_at)}</p>",
        "<h2>Gate</h2>",
        '<ul class="gate">'
        + "".join(
            f'<li class="{"pass" if c.passed else "fail"}">{"✔" if c.passed else "✘"} {escape(c.message)}</li>'
            for c in result.gate.checks
        )
        + "</ul>",
        *(_baseline(result, diff) if diff is not None else []),
        "<h2>Summary</h2>",
        '<div class="cards">'
        + "".join(
            f'<div class="card"><div class="v">{shown(path, metric(result.scores, path))}</div>'
            f'<div class="k">{escape(label)}</div></div>'
            for label, path in CARDS
        )
        + "</div>",
        "<h2>Per-tool recall</h2>",
        _recall_bars(report["per_tool"]),
        "<h2>Confusion matrix (single-call and no-tool cases)</h2>",
        _heatmap(report["confusion_matrix"]),
        "<h2>Per slice</h2>",
        _slices(report),
        "<h2>Cases</h2>",
        _cases(result, max_rows),
        f"<script>{_SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_html(
    result: EvalResult, path: str | Path, diff: BaselineDiff | None = None, *, max_rows: int = MAX_ROWS
) -> None:
    Path(path).write_text(render_html(result, diff, max_rows=max_rows), encoding="utf-8")


def _baseline(result: EvalResult, diff: BaselineDiff) -> list[str]:
    """The changes since the baseline: counts, flipped cases, moved metrics (escaped: ids and reasons are data)."""
    out = [
        f'<h2 id="baseline">Changes since baseline <code>{escape(diff.baseline.path)}</code></h2>',
        f'<p class="meta"><b class="fail">{diff.regressed:,} regressed</b> · {diff.fixed:,} fixed · '
        f"{diff.moved_count:,} moved · {diff.added_count:,} added · {diff.removed_count:,} removed</p>",
    ]

    def flips(title: str, rows: list[Flip], total: int, css: str, why: bool) -> None:
        if not rows:
            return
        head = "<th>case</th>" + ("<th>why it fails now</th>" if why else "") + "<th>metrics moved</th>"
        body = "".join(
            f'<tr class="{css}"><td><code>{escape(f.id)}</code></td>'
            + (f"<td>{escape('; '.join(f.reasons[:4]))}</td>" if why else "")
            + f"<td>{escape(changes(f.changes))}</td></tr>"
            for f in rows
        )
        more = f'<p class="meta">…and {total - len(rows):,} more (see the JSON report)</p>' if total > len(rows) else ""
        out.append(f'<h3>{title}</h3><table class="flips"><tr>{head}</tr>{body}</table>{more}')

    flips("Regressed (passed → failed)", diff.regressions, diff.regressed, "fail", True)
    flips("Fixed (failed → passed)", diff.fixes, diff.fixed, "pass", False)
    flips("Metrics moved without flipping", diff.moved, diff.moved_count, "", False)
    for label, ids, total in (("Added", diff.added, diff.added_count), ("Removed", diff.removed, diff.removed_count)):
        if ids:
            listed = ", ".join(f"<code>{escape(i)}</code>" for i in ids[:20])
            out.append(
                f'<p class="meta">{label} cases: {listed}{f" and {total - 20:,} more" if total > 20 else ""}</p>'
            )
    before = {path: b for path, b, _ in diff.summary}
    rows = "".join(
        f"<tr><td><code>{escape(path)}</code></td><td>{shown(path, metric(result.scores, path))}</td>"
        f"<td>{shown(path, before.get(path))}</td>"
        f"<td>{escape(delta(before.get(path), metric(result.scores, path), count=is_count(path)))}</td></tr>"
        for path in SHOWN
        if metric(result.scores, path) is not None or before.get(path) is not None
    )
    out.append(
        '<h3>Metrics</h3><table class="deltas"><tr><th>metric</th><th>now</th><th>baseline</th><th>Δ</th></tr>'
        f"{rows}</table>"
    )
    return out


def _color(value: float) -> str:
    """Red (0) to amber to green (1)."""
    value = max(0.0, min(1.0, value))
    hue = int(120 * value)
    return f"hsl({hue}, 65%, 42%)"


def _recall_bars(tools: dict[str, Any]) -> str:
    rows = [(name, t) for name, t in tools.items() if t["expected"]]
    if not rows:
        return '<p class="note">No expected calls.</p>'
    label_w, bar_w, row_h = 200, 520, 24
    height = row_h * len(rows) + 8
    out = [
        f'<svg id="tool-recall" role="img" aria-label="recall per tool" width="{label_w + bar_w + 140}" '
        f'height="{height}" viewBox="0 0 {label_w + bar_w + 140} {height}">'
    ]
    for i, (name, t) in enumerate(rows):
        y = 4 + i * row_h
        recall = t["recall"] or 0.0
        out.append(
            f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end">{escape(_short(name, 28))}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{bar_w}" height="{row_h - 8}" fill="#eef1f4"/>'
            f'<rect class="bar" data-tool="{escape(name)}" data-recall="{recall:.4f}" x="{label_w}" y="{y + 3}" '
            f'width="{bar_w * recall:.1f}" height="{row_h - 8}" fill="{_color(recall)}"><title>{escape(name)}: '
            f"{t['correct']:g} of {t['expected']:g} expected calls made</title></rect>"
            f'<text x="{label_w + bar_w + 8}" y="{y + 16}">{recall:.3f} ({t["correct"]:g}/{t["expected"]:g})</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _heatmap(matrix: dict[str, Any]) -> str:
    labels: list[str] = matrix["labels"]
    counts: list[list[int]] = matrix["counts"]
    if not labels:
        return '<p class="note">No single-call or no-tool cases.</p>'
    cell, left, top = 44, 170, 130
    size_w, size_h = left + cell * len(labels) + 10, top + cell * len(labels) + 30
    out = [
        f'<svg id="confusion" role="img" aria-label="confusion matrix: expected (rows) against called (columns)" '
        f'width="{size_w}" height="{size_h}" viewBox="0 0 {size_w} {size_h}">',
        f'<text x="{left}" y="14" class="axis">called →</text>',
        f'<text x="8" y="{top - 8}" class="axis">expected ↓</text>',
    ]
    for j, label in enumerate(labels):
        x = left + j * cell + cell / 2
        out.append(
            f'<text transform="translate({x + 4},{top - 6}) rotate(-55)" text-anchor="start">'
            f"{escape(_short(label, 18))}</text>"
        )
    for i, label in enumerate(labels):
        y = top + i * cell
        out.append(f'<text x="{left - 8}" y="{y + cell / 2 + 4}" text-anchor="end">{escape(_short(label, 22))}</text>')
        row_total = sum(counts[i]) or 1
        for j, n in enumerate(counts[i]):
            share = n / row_total
            diagonal = i == j
            hue = 140 if diagonal else 5
            fill = f"hsl({hue}, 60%, {97 - 52 * share:.0f}%)" if n else "#f6f8fa"
            out.append(
                f'<rect class="cell" data-expected="{escape(label)}" data-called="{escape(labels[j])}" '
                f'data-count="{n}" x="{left + j * cell}" y="{y}" width="{cell - 2}" height="{cell - 2}" '
                f'fill="{fill}"><title>expected {escape(label)}, called {escape(labels[j])}: {n}</title></rect>'
            )
            if n:
                color = "#fff" if share > 0.55 else "#1f2328"
                out.append(
                    f'<text x="{left + j * cell + (cell - 2) / 2}" y="{y + cell / 2 + 3}" text-anchor="middle" '
                    f'style="fill:{color}">{n:g}</text>'
                )
    out.append("</svg>")
    return "".join(out)


def _slices(report: dict[str, Any]) -> str:
    head = (
        '<table id="slices"><thead><tr><th>slice</th><th>cases</th><th>pass rate</th><th>F1</th>'
        "<th>argument accuracy</th><th>order score</th><th>unnecessary-call rate</th></tr></thead><tbody>"
    )
    rows = []
    blocks: list[tuple[str, dict[str, Any]]] = [(s, report["slices"][s]) for s in SLICES]
    blocks += [(f"difficulty: {d}", b) for d, b in report["difficulty"].items()]
    for label, b in blocks:
        if not b["cases"]:
            continue
        rows.append(
            f'<tr><td>{escape(label)}</td><td class="n">{num(b["cases"], count=True)}</td>'
            f'<td class="n">{num(b["pass_rate"])}</td><td class="n">{num(b["tool_selection"]["f1"])}</td>'
            f'<td class="n">{num(b["argument_accuracy"])}</td><td class="n">{num(b["order_score"])}</td>'
            f'<td class="n">{num(b["unnecessary_call_rate"])}</td></tr>'
        )
    return head + "".join(rows) + "</tbody></table>"


def _cases(result: EvalResult, max_rows: int) -> str:
    out = [
        '<div class="controls"><label><input type="checkbox" id="failing-only"> failing only</label>',
        '<label>filter <input type="search" id="case-filter" placeholder="id, tool, reason"></label>',
        '<span id="case-count" class="note"></span></div>',
        '<table id="cases"><thead><tr><th>case</th><th>slice</th><th>difficulty</th><th>passed</th>'
        "<th>precision</th><th>recall</th><th>F1</th><th>args</th><th>order</th><th>expected</th><th>actual</th>"
        "<th>why</th></tr></thead><tbody>",
    ]
    listed = 0
    for listing_passed in (False, True):  # failing cases first, then passing ones, up to the cap
        for row in result.cases:
            if listed >= max_rows:
                break
            if bool(row["passed"]) is not listing_passed:
                continue
            out.append(_case_row(row))
            listed += 1
    out.append("</tbody></table>")
    if result.cases.count > listed:
        out.append(
            f'<p class="note">Listed {listed:,} of {result.cases.count:,} cases (failing first); '
            "the JSON report has them all.</p>"
        )
    return "".join(out)


def _case_row(row: dict[str, Any]) -> str:
    passed = bool(row["passed"])
    cls = "pass" if passed else "fail"
    return (
        f'<tr class="case {cls}" data-id="{escape(row["id"])}"><td><code>{escape(row["id"])}</code></td>'
        f"<td>{escape(row['slice'])}</td><td>{escape(row['difficulty'])}</td><td>{'✔' if passed else '✘'}</td>"
        f'<td class="n">{num(row["precision"])}</td><td class="n">{num(row["recall"])}</td>'
        f'<td class="n">{num(row["f1"])}</td><td class="n">{num(row["argument_accuracy"])}</td>'
        f'<td class="n">{num(row["order_score"])}</td>'
        f"<td>{escape(', '.join(row['expected']) or '(no tool)')}</td>"
        f"<td>{escape(', '.join(row['actual']) or '(no tool)')}</td>"
        f'<td class="reasons">{escape("; ".join(row["reasons"]))}</td></tr>'
    )


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
