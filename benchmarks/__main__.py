"""``python -m benchmarks [--quick] [--json FILE] [--only NAME ...]``: run the suite, print the table, write JSON.

Exit code 0 when every figure ran (met or not: a missed target is reported, not hidden), 1 when a suite
crashed, or with ``--fail-on-miss`` when a target was missed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks import SUITES
from benchmarks.harness import FULL, QUICK, Figure, Sizes
from benchmarks.machine import machine_info

_STYLE = {"met": "[green]yes[/]", "missed": "[red]NO[/]", "info": "-", "unavailable": "[yellow]n/a[/]"}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: the CI smoke run (~20 s)")
    parser.add_argument("--json", type=Path, default=Path("bench-results.json"), help="where to write the results")
    names = [s.rsplit(".", 1)[1] for s in SUITES]
    parser.add_argument("--only", nargs="+", choices=names, metavar="SUITE", help=f"run only these: {names}")
    parser.add_argument("--rounds", type=int, help="interleaved rounds per comparison (overrides the size's)")
    parser.add_argument("--fail-on-miss", action="store_true", help="exit 1 when any target is missed")
    parser.add_argument("--markdown", type=Path, help="also write the table as Markdown (docs/performance.md's)")
    return parser.parse_args(argv)


def run_suites(sizes: Sizes, only: Sequence[str] | None, console: Console) -> list[Figure]:
    figures: list[Figure] = []
    for module_name in SUITES:
        short = module_name.rsplit(".", 1)[1]
        if only and short not in only:
            continue
        started = time.perf_counter()
        with console.status(f"running {short} ..."):
            try:
                got = importlib.import_module(module_name).run(sizes)
            except Exception as exc:  # noqa: BLE001 - one broken suite must not hide the others' figures
                console.print(f"[red]{short} failed:[/]\n{traceback.format_exc()}")
                got = [Figure(f"{short}.error", f"{short} crashed", "-", "-", None, "-", "error", note=repr(exc))]
        for figure in got:
            figure.suite = short
        console.print(f"{short}: {len(got)} figure(s) in {time.perf_counter() - started:.1f} s")
        figures.extend(got)
    return figures


def table(figures: Sequence[Figure], title: str) -> Table:
    out = Table(title=title, show_lines=False)
    for col in ("figure", "measured", "baseline", "ratio", "target", "met?"):
        out.add_column(col, overflow="fold")
    for f in figures:
        ratio = "-" if f.ratio is None else f"{f.ratio:.3f}x"
        met = _STYLE.get(f.status, f"[red]{f.status}[/]")
        title_text = f.title + (f"\n[dim]{f.note}[/]" if f.note else "")
        out.add_row(title_text, f.measured, f.baseline, ratio, f.target, met)
    return out


def markdown(figures: Sequence[Figure], machine: dict[str, Any]) -> str:
    """The results table in Markdown, with the machine it came from."""
    rows = ["| figure | measured | baseline | ratio | target | met? |", "|---|---|---|---|---|---|"]
    for f in figures:
        ratio = "-" if f.ratio is None else f"{f.ratio:.3f}x"
        met = {"met": "yes", "missed": "**no**", "info": "-", "unavailable": "n/a"}.get(f.status, f.status)
        title = f.title + (f" ({f.note})" if f.note else "")
        rows.append(f"| {title} | {f.measured} | {f.baseline} | {ratio} | {f.target} | {met} |")
    versions = ", ".join(f"{k} {v}" for k, v in machine["packages"].items() if v)
    rows.append("")
    rows.append(
        f"Machine: {machine['cpu_model']}, {machine['nproc']} cores, {machine['implementation']} "
        f"{machine['python']} on {machine['platform']}; {versions}; otel-toolcall-eval build: {machine['build']}."
    )
    return "\n".join(rows) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.rounds is not None:
        sizes = replace(sizes, rounds=args.rounds)
    # piped output (make bench | tee, CI logs) would otherwise wrap the table at 80 columns
    console = Console() if sys.stdout.isatty() else Console(width=160)
    started = time.time()
    figures = run_suites(sizes, args.only, console)
    duration = time.time() - started
    machine = machine_info()
    console.print(table(figures, f"otel-toolcall-eval benchmarks ({sizes.name} sizes, {duration:.0f} s)"))
    console.print(
        f"[dim]{machine['cpu_model']}, {machine['nproc']} cores, Python {machine['python']}, "
        f"otel-toolcall-eval {machine['build']}; results in {args.json}[/]"
    )
    report = {
        "sizes": asdict(sizes),
        "started_unix": round(started),
        "duration_s": round(duration, 1),
        "machine": machine,
        "figures": [f.as_json() for f in figures],
    }
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.markdown is not None:
        args.markdown.write_text(markdown(figures, machine))
    if any(f.status == "error" for f in figures):
        return 1
    if args.fail_on_miss and any(f.status == "missed" for f in figures):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
