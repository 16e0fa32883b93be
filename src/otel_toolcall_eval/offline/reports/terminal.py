"""The terminal report (rich): summary, per slice, per tool, the cases (failing first, capped) and the gate."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape as _escape
from rich.table import Table

from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval.config.catalog import SLICES
from otel_toolcall_eval.offline.reports.format import SHOWN, metric, num, pct, shown
from otel_toolcall_eval.offline.result import EvalResult

MAX_CASES = 20


def escape(text: str) -> str:
    """Untrusted text (ids, tool names, reasons from run files) for rich: markup escaped, escape sequences gone."""
    return _escape(terminal_safe(text))


def print_report(result: EvalResult, console: Console, *, max_cases: int = MAX_CASES) -> None:
    report = result.report
    cases, failed = result.cases.count, result.cases.failed
    if len(result.runs) > 1:
        console.print(
            f"[bold]{cases:,} cases[/], {cases - failed:,} passed in all {len(result.runs)} runs; "
            f"mean pass rate {num(report['summary']['pass_rate'])} (metrics below are means over the runs)"
        )
    else:
        console.print(
            f"[bold]{cases:,} cases[/], {cases - failed:,} passed ({pct(cases - failed, cases)})", soft_wrap=True
        )
    summary = report["summary"]
    console.print(
        f"whether to call: unnecessary-call rate {num(summary['unnecessary_call_rate'])} "
        f"(of {summary['no_tool_cases']:g} no-tool cases) · missed-call rate {num(summary['missed_call_rate'])} · "
        f"tool-selection F1 {num(summary['tool_selection']['f1'])}",
        highlight=False,
        soft_wrap=True,
    )

    table = Table(title="Summary", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    if result.spread is not None:
        table.add_column("spread", justify="right")
    for path in SHOWN:
        value = metric(result.scores, path)
        if value is None:
            continue
        cells = [path, shown(path, value)]
        if result.spread_scores is not None:
            cells.append(num(metric(result.spread_scores, path)))
        table.add_row(*cells)
    console.print(table)

    slices = Table(title="Per slice", title_justify="left")
    for col in ("slice", "cases", "pass rate", "F1", "args", "order", "unnecessary"):
        slices.add_column(col, justify="left" if col == "slice" else "right")
    for name in SLICES:
        b = report["slices"][name]
        if b["cases"]:
            slices.add_row(
                name, num(b["cases"], count=True), num(b["pass_rate"]), num(b["tool_selection"]["f1"]),
                num(b["argument_accuracy"]), num(b["order_score"]), num(b["unnecessary_call_rate"]),
            )  # fmt: skip
    console.print(slices)

    if report["per_tool"]:
        tools = Table(title="Per tool", title_justify="left")
        for col in ("tool", "expected", "correct", "recall", "called", "precision", "args"):
            tools.add_column(col, justify="left" if col == "tool" else "right")
        for name, t in report["per_tool"].items():
            tools.add_row(
                escape(name), num(t["expected"], count=True), num(t["correct"], count=True), num(t["recall"]),
                num(t["called"], count=True), num(t["precision"]), num(t["argument_accuracy"]),
            )  # fmt: skip
        console.print(tools)

    shown_cases = Table(
        title=f"Cases ({'failing first, ' if failed else ''}{min(cases, max_cases)} of {cases:,})",
        title_justify="left",
    )
    trajectory = "trajectory_match_rate" in summary  # a column only when some case has a trajectory mode
    columns = ("case", "slice", "ok", "P", "R", "F1", "args", "order", *(("trajectory",) if trajectory else ()), "why")
    for col in columns:
        shown_cases.add_column(
            col,
            justify="right" if col in ("P", "R", "F1", "args", "order") else "left",
            overflow="fold",
            min_width=8 if col == "case" else None,
        )
    listed = 0
    for listing_passed in (False, True):  # failing cases first
        for row in result.cases:
            if listed >= max_cases:
                break
            if bool(row["passed"]) is not listing_passed:
                continue
            cells = [
                escape(row["id"]), row["slice"], "[green]✔[/]" if row["passed"] else "[red]✘[/]",
                num(row["precision"]), num(row["recall"]), num(row["f1"]), num(row["argument_accuracy"]),
                num(row["order_score"]),
            ]  # fmt: skip
            if trajectory:
                mode = row.get("trajectory_mode")
                cells.append("-" if mode is None else f"{mode} {'✔' if row['trajectory_match'] else '✘'}")
            cells.append(escape("; ".join(row["reasons"][:3])))
            shown_cases.add_row(*cells)
            listed += 1
    console.print(shown_cases)

    gate = result.gate
    if gate.passed:
        console.print("[bold green]gate passed[/]")
    else:
        console.print("[bold red]gate failed[/]")
    for check in gate.checks:
        mark = "[green]✔[/]" if check.passed else "[red]✘[/]"
        console.print(f"  {mark} {escape(check.message)}", highlight=False, soft_wrap=True)
    if not any(c.kind in ("min", "max") for c in gate.checks):
        console.print(
            "  (no thresholds configured under gate.min / gate.max: only the hard rules apply)", soft_wrap=True
        )
