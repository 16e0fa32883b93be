"""The project's user-facing errors and the command line's exit codes, each defined once.

Every error a person can fix (a bad input file, config or argument, a report that cannot be written) derives
from ``ToolcallEvalError``; the CLI maps it to ``ExitCode.BAD_INPUT`` in one place, so CI can tell "the gate
failed" (1) from "the run could not be judged" (2). This module imports nothing of the package: the command
modules, the readers and the config import their error base from here, never from ``cli``.
"""

from __future__ import annotations

from enum import IntEnum
from pathlib import Path


class ExitCode(IntEnum):
    OK = 0
    GATE_FAILED = 1
    BAD_INPUT = 2
    JUDGE_UNCALIBRATED = 3
    JUDGE_FAILED = 4
    INTERRUPTED = 130  # the shell's 128 + SIGINT


# What each exit code means: the one list that ``--help`` and the reference page (docs/reference/cli.md) print.
EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.GATE_FAILED: "a gate failed (eval, doctor --fail-on-gaps): the run was judged and did not pass",
    ExitCode.BAD_INPUT: "bad input, config or usage, a missing extra, or an output that cannot be written "
    "(the message names the file and field)",
    ExitCode.JUDGE_UNCALIBRATED: "the gate names a judge metric, but the judge has no valid calibration record",
    ExitCode.JUDGE_FAILED: "judge run: questions were asked and none got a verdict (the provider's error is printed)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}


def exit_codes_text() -> str:
    """The exit codes, one a line, for ``--help``."""
    return "exit codes:\n" + "\n".join(f"  {code.value:<4} {EXIT_CODE_MEANINGS[code]}" for code in ExitCode)


class ToolcallEvalError(Exception):
    """An error in what the user gave (files, config, arguments): printed without a traceback, exit 2."""

    exit_code: ExitCode = ExitCode.BAD_INPUT


class JudgeUncalibrated(ToolcallEvalError):
    """The gate would use judge verdicts that no calibration record vouches for: exit 3, naming each question
    and what to do (label calls, run ``judge agreement --calibration``)."""

    exit_code = ExitCode.JUDGE_UNCALIBRATED

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        lines = "\n  ".join(problems)
        super().__init__(
            "the gate uses judge verdicts, but the judge is not calibrated:\n  "
            f"{lines}\n"
            "label judged calls (`otel-toolcall-eval judge queue` and `judge label`), then record the agreement "
            "with `otel-toolcall-eval judge agreement LABELS --config CONFIG --calibration FILE`; "
            "or remove the judge metrics from gate.min / gate.max"
        )


class UsageError(ToolcallEvalError, ValueError):
    """Bad input or usage: exit code 2 with a message naming the file, line and field."""


class OutputError(ToolcallEvalError):
    """A file the user asked for cannot be written (a missing or read-only directory, a full disk)."""

    def __init__(self, path: str | Path, exc: OSError) -> None:
        self.path = str(path)
        super().__init__(f"{path}: cannot write: {exc.strerror or exc}")
