"""``otel-toolcall-eval dataset``: validate, convert (CSV <-> JSONL), import (BFCL), start from a template, export
the JSON Schema."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from otel_toolcall_eval._files import write_atomically
from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval.dataset import bfcl
from otel_toolcall_eval.dataset.errors import DatasetError, LocatedError
from otel_toolcall_eval.dataset.expected_args import ToolSchemas, argument_errors
from otel_toolcall_eval.dataset.io import detect_format, dump_cases, iter_rows
from otel_toolcall_eval.dataset.models import Slice
from otel_toolcall_eval.dataset.schema import dataset_json_schema
from otel_toolcall_eval.dataset.template import template_cases
from otel_toolcall_eval.errors import ExitCode, UsageError

MAX_ERRORS_SHOWN = 50


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "dataset", help="ground-truth dataset commands (validate, convert, import, template, schema)"
    )
    commands = parser.add_subparsers(dest="dataset_command", required=True)

    validate = commands.add_parser("validate", help="check every row; errors name the line, row and column")
    validate.add_argument("file", type=Path)
    validate.add_argument("--format", choices=["jsonl", "csv"], help="default: from the extension")
    validate.set_defaults(func=run_validate)

    convert = commands.add_parser("convert", help="convert between CSV and JSONL (lossless)")
    convert.add_argument("input", type=Path)
    convert.add_argument("output", type=Path)
    convert.add_argument("--from", dest="from_format", choices=["jsonl", "csv"], help="default: from the extension")
    convert.add_argument("--to", dest="to_format", choices=["jsonl", "csv"], help="default: from the extension")
    convert.set_defaults(func=run_convert)

    imports = commands.add_parser(
        "import", help="import a benchmark's files (BFCL: question + possible_answer) as a dataset"
    )
    imports.add_argument("--from", dest="source", choices=["bfcl"], required=True, help="the benchmark")
    imports.add_argument(
        "questions", type=Path, nargs="+", help="BFCL_v4_<category>.json files (answers: possible_answer/ beside them)"
    )
    imports.add_argument("--answers", type=Path, help="the answer key, when one question file is given")
    imports.add_argument("--category", choices=bfcl.CATEGORIES, help="default: from the file name")
    imports.add_argument("--out", type=Path, required=True, help="dataset file to write (.jsonl or .csv)")
    imports.add_argument("--format", choices=["jsonl", "csv"], help="default: from --out's extension")
    imports.set_defaults(func=run_import)

    template = commands.add_parser("template", help="a starter dataset with one case per slice")
    template.add_argument("--out", type=Path, help="file to write (default: standard output)")
    template.add_argument("--format", choices=["jsonl", "csv"], help="default: from --out's extension, else jsonl")
    template.set_defaults(func=run_template)

    schema = commands.add_parser("schema", help="the JSON Schema of one case, for editors")
    schema.add_argument("--out", type=Path, help="file to write (default: standard output)")
    schema.set_defaults(func=run_schema)


def run_validate(args: argparse.Namespace, console: Console) -> int:
    errors: list[LocatedError] = []
    collected: list[DatasetError] = []
    first_line: dict[str, int] = {}
    slices: Counter[str] = Counter()
    difficulty: Counter[str] = Counter()
    schemas = ToolSchemas()
    try:
        for row in iter_rows(args.file, args.format, collect=collected):
            case = row.case
            if case.id in first_line:
                errors.append(
                    DatasetError(
                        args.file,
                        row.line,
                        "id",
                        f"duplicate id '{case.id}' (also line {first_line[case.id]})",
                        row.row,
                    )
                )
                continue
            first_line[case.id] = row.line
            for column, message in argument_errors(case, schemas):
                errors.append(DatasetError(args.file, row.line, column, message, row.row))
            slices[case.effective_slice.value] += 1
            difficulty[case.difficulty.value] += 1
    except DatasetError as exc:  # unreadable file or bad header: no row can be checked
        raise UsageError(str(exc)) from None
    errors = sorted([*collected, *errors], key=lambda e: e.line or 0)
    err = Console(stderr=True)
    if errors:
        for problem in errors[:MAX_ERRORS_SHOWN]:
            err.print(f"[red]error:[/] {escape(str(problem))}", highlight=False, soft_wrap=True)
        if len(errors) > MAX_ERRORS_SHOWN:
            err.print(f"... and {len(errors) - MAX_ERRORS_SHOWN} more errors")
        err.print(
            f"{escape(str(args.file))}: {len(errors)} invalid row(s), {len(first_line)} valid",
            highlight=False,
            soft_wrap=True,
        )
        return ExitCode.BAD_INPUT
    if not first_line:
        raise UsageError(f"{args.file}: no cases")
    console.print(f"[green]{escape(str(args.file))}: {len(first_line)} cases valid[/]", highlight=False, soft_wrap=True)
    console.print(
        "slices: " + ", ".join(f"{s.value} {slices.get(s.value, 0)}" for s in Slice)
        + " · difficulty: " + ", ".join(f"{k} {v}" for k, v in sorted(difficulty.items())),
        highlight=False,
        soft_wrap=True,
    )  # fmt: skip
    empty = [s.value for s in Slice if not slices.get(s.value)]
    if empty:
        console.print(f"[yellow]note:[/] no cases in slice(s) {', '.join(empty)}", highlight=False, soft_wrap=True)
    return ExitCode.OK


def run_convert(args: argparse.Namespace, console: Console) -> int:
    source = detect_format(args.input, args.from_format)
    target = detect_format(args.output, args.to_format)
    rows = iter_rows(args.input, source)
    # written next to the target and renamed, so a bad row never leaves half a file behind
    with write_atomically(args.output) as handle:
        count = dump_cases(handle, (row.case for row in rows), target)
    console.print(
        f"{escape(str(args.input))} ({source}) -> {escape(str(args.output))} ({target}): {count} cases", highlight=False
    )
    return ExitCode.OK


def run_import(args: argparse.Namespace, console: Console) -> int:
    if len(args.questions) > 1 and (args.answers or args.category):
        raise UsageError("--answers and --category apply to one question file; give one, or neither")
    fmt = detect_format(args.out, args.format)
    cases = []
    warnings: list[bfcl.ConversionWarning] = []
    skipped = 0
    seen: dict[str, Path] = {}
    for path in args.questions:
        imported = bfcl.import_bfcl(path, args.answers, args.category)
        for case in imported.cases:
            if case.id in seen:
                raise UsageError(f"{path}: id '{case.id}' is also in {seen[case.id]}")
            seen[case.id] = path
        cases.extend(imported.cases)
        warnings.extend(imported.warnings)
        skipped += imported.skipped
    err = Console(stderr=True)
    for warning in warnings[:MAX_ERRORS_SHOWN]:
        # names and values in the message come from the benchmark's files: no markup, no terminal escapes
        err.print(f"[yellow]warning:[/] {escape(terminal_safe(warning))}", highlight=False, soft_wrap=True)
    if len(warnings) > MAX_ERRORS_SHOWN:
        err.print(f"... and {len(warnings) - MAX_ERRORS_SHOWN} more warnings", highlight=False)
    with write_atomically(args.out) as handle:
        count = dump_cases(handle, cases, fmt)
    slices = Counter(case.effective_slice.value for case in cases)
    console.print(
        f"{escape(str(args.out))}: {count} cases from {len(args.questions)} BFCL file(s)"
        + f" ({', '.join(f'{k} {v}' for k, v in sorted(slices.items()))})"
        + f"; {len(warnings)} warning(s), {skipped} case(s) skipped",
        highlight=False,
        soft_wrap=True,
    )
    return ExitCode.OK


def run_template(args: argparse.Namespace, console: Console) -> int:
    cases = template_cases()
    fmt = detect_format(args.out, args.format) if args.out else detect_format("-", args.format or "jsonl")
    if args.out is None:
        dump_cases(sys.stdout, cases, fmt)
        return ExitCode.OK
    with write_atomically(args.out) as handle:
        dump_cases(handle, cases, fmt)
    console.print(
        f"{escape(str(args.out))}: {len(cases)} template cases, one per slice ({', '.join(s.value for s in Slice)})",
        highlight=False,
        soft_wrap=True,
    )
    return ExitCode.OK


def run_schema(args: argparse.Namespace, console: Console) -> int:
    text = json.dumps(dataset_json_schema(), indent=2, ensure_ascii=False) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        with write_atomically(args.out) as handle:
            handle.write(text)
        console.print(f"{escape(str(args.out))}: JSON Schema of one dataset case", highlight=False, soft_wrap=True)
    return ExitCode.OK
