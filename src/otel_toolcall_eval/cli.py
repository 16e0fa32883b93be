"""The ``otel-toolcall-eval`` command line: a thin adapter over the library.

Exceptions become exit codes here and nowhere else; the codes and what they mean are defined once, in
``errors.ExitCode`` and ``errors.EXIT_CODE_MEANINGS``, which ``--help`` and docs/reference/cli.md list.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from otel_toolcall_eval import extras
from otel_toolcall_eval._console import escape, new_console
from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval._version import __version__
from otel_toolcall_eval.errors import ExitCode, ToolcallEvalError, UsageError, exit_codes_text

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["ExitCode", "UsageError", "build_parser", "main"]  # UsageError: where it was defined before errors.py


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="otel-toolcall-eval",
        description="Score LLM-agent tool calls where they already live: in OpenTelemetry traces.",
        epilog=f"{exit_codes_text()}\n\nexample:\n  otel-toolcall-eval demo",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    for module, name, extra in COMMANDS:
        try:
            importlib.import_module(module).register(sub)
        except ModuleNotFoundError as exc:  # its extra is not installed: listed, and exit 2 naming the extra
            missing = extras.missing_extra(exc, f"otel-toolcall-eval {name}")
            if missing is None:
                raise
            _unavailable(sub, name, extra or missing.extra)
            continue
        if extra is not None:
            sub.choices[name].set_defaults(extra=extra)
        _describe(sub.choices[name], (name,), sub)
    return parser


def _describe(parser: argparse.ArgumentParser, path: tuple[str, ...], parent: Any) -> None:
    """Every subcommand's ``--help`` opens with what it does (its one-line help, unless it has a description)
    and ends with an example (``EXAMPLES``), down the tree."""
    if getattr(parser, "_unavailable", False):
        return
    summary = next((a.help for a in parent._choices_actions if a.dest == path[-1]), None) or ""
    if parser.description is None and summary:
        parser.description = summary[0].upper() + summary[1:] + ("" if summary.endswith(".") else ".")
    example = EXAMPLES.get(" ".join(path))
    if example and parser.epilog is None:
        parser.epilog = "example:\n  " + example
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                _describe(child, (*path, name), action)


# One example a command, shown at the end of its ``--help`` (tests/test_cli_help.py parses each).
EXAMPLES: dict[str, str] = {
    "demo": "otel-toolcall-eval demo --traces 50 --inject invalid_args=0.2",
    "config": "otel-toolcall-eval config check toolcall-eval.yaml",
    "config check": "otel-toolcall-eval config check toolcall-eval.yaml",
    "replay": "otel-toolcall-eval replay traces.json --config toolcall-eval.yaml",
    "harvest": "otel-toolcall-eval harvest traces.json --where 'outcome=success' --out cases.jsonl",
    "doctor": "otel-toolcall-eval doctor traces.json --config toolcall-eval.yaml",
    "judge": "otel-toolcall-eval judge check toolcall-eval.yaml --traffic 20",
    "judge check": "otel-toolcall-eval judge check toolcall-eval.yaml --traffic 20 --flagged 0.1",
    "judge agreement": "otel-toolcall-eval judge agreement labels.jsonl --config toolcall-eval.yaml",
    "judge run": "otel-toolcall-eval judge run --dataset cases.jsonl --run run.jsonl --config toolcall-eval.yaml "
    "--out verdicts.jsonl",
    "judge queue": "otel-toolcall-eval judge queue verdicts.jsonl --config toolcall-eval.yaml --out queue.jsonl",
    "judge label": "otel-toolcall-eval judge label queue.jsonl --labels labels.jsonl --rater alice",
    "dataset": "otel-toolcall-eval dataset validate cases.jsonl",
    "dataset validate": "otel-toolcall-eval dataset validate cases.jsonl",
    "dataset convert": "otel-toolcall-eval dataset convert cases.csv cases.jsonl",
    "dataset import": "otel-toolcall-eval dataset import BFCL_v4_simple.json --from bfcl --out cases.jsonl",
    "dataset template": "otel-toolcall-eval dataset template --out cases.jsonl",
    "dataset schema": "otel-toolcall-eval dataset schema --out case.schema.json",
    "eval": "otel-toolcall-eval eval --dataset cases.jsonl --runs run.jsonl --markdown report.md --baseline old.json",
    "serve": "otel-toolcall-eval serve --config toolcall-eval.yaml --export-endpoint http://collector:4317",
    "pr-comment": "otel-toolcall-eval pr-comment --report report.md --no-comment",
    "completion": "otel-toolcall-eval completion bash",  # then: eval \"$(otel-toolcall-eval completion bash)\"
}


def _unavailable(sub: Any, name: str, extra: str) -> None:
    """A command whose module needs an extra that is not installed: it still shows in ``--help``, and running it
    (any arguments) is exit 2 with the ``pip install`` line."""
    needs = f"needs the '{extra}' extra: {extras.install_line(extra)}"
    parser = sub.add_parser(
        name,
        help=f"({needs})",
        description=f"otel-toolcall-eval {name} {needs}",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the install line unbroken, to copy
    )
    parser.set_defaults(extra=extra, func=None, unavailable=True)
    parser._unavailable = True  # no example: its options are unknown here


# One module per command (as pip's ``cli/``): each adds its subcommands with ``register(subparsers)`` and sets
# ``func=handler`` on them; a handler takes the parsed arguments and a Console and returns the exit code. The
# extra a command needs beyond the core (pyproject.toml, ``extras.EXTRAS``) is checked before it runs: exit 2
# naming the ``pip install`` line, never a traceback. (module, the command it registers, its extra)
COMMANDS: tuple[tuple[str, str, str | None], ...] = (
    ("otel_toolcall_eval.commands.demo", "demo", None),
    ("otel_toolcall_eval.commands.config", "config", None),
    ("otel_toolcall_eval.commands.replay", "replay", "eval"),
    ("otel_toolcall_eval.commands.harvest", "harvest", "eval"),
    ("otel_toolcall_eval.commands.doctor", "doctor", "eval"),
    ("otel_toolcall_eval.commands.judge", "judge", "judge"),
    ("otel_toolcall_eval.commands.dataset", "dataset", "eval"),
    ("otel_toolcall_eval.commands.eval", "eval", "eval"),
    ("otel_toolcall_eval.commands.serve", "serve", "serve"),
    ("otel_toolcall_eval.commands.pr_comment", "pr-comment", "eval"),
    ("otel_toolcall_eval.commands.completion", "completion", None),
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the only place exceptions become exit codes."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "unavailable", False):  # an unavailable command's arguments are not known
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.root_parser = parser  # for the commands that describe the command line itself (completion)
    feature = f"otel-toolcall-eval {args.command}"
    try:
        if getattr(args, "extra", None):
            extras.require(args.extra, feature)
        return int(_dispatch(args, new_console()))
    except ToolcallEvalError as exc:
        return _fail(str(exc), exc.exit_code)
    except ModuleNotFoundError as exc:  # an option's extra that the command did not check up front
        missing = extras.missing_extra(exc, feature)
        if missing is None:
            raise
        return _fail(str(missing), missing.exit_code)
        return _fail(str(exc), exc.exit_code)
    except OSError as exc:  # a file the command opened itself, outside the readers (which name the file)
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}")
    except RecursionError:  # a last guard: every walk over input is depth-bounded, so this is a bug
        return _fail("input nested too deeply to process")
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED


def _dispatch(args: argparse.Namespace, console: Console) -> int:
    handler = getattr(args, "func", None)
    if handler is None:
        return ExitCode.BAD_INPUT
    return int(handler(args, console))


def _fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> int:
    err = new_console(stderr=True)
    err.print(f"[red]error:[/] {escape(terminal_safe(message))}", highlight=False, soft_wrap=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
