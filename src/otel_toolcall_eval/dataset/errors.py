"""Errors in an input file, located so a person can fix them: ``file:line (row N): field: message``."""

from __future__ import annotations

from pathlib import Path

from otel_toolcall_eval.errors import ToolcallEvalError


class LocatedError(ToolcallEvalError, ValueError):
    """Bad input at a place: the CLI prints it and exits with code 2."""

    def __init__(
        self, path: str | Path, line: int | None, field: str | None, message: str, row: int | None = None
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.row = row
        self.message = message
        where = self.path if line is None else f"{self.path}:{line}"
        if row is not None:
            where += f" (row {row})"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")

    def __reduce__(self) -> tuple[type[LocatedError], tuple[str, int | None, str | None, str, int | None]]:
        # crosses process boundaries (the parallel evaluator) intact
        return type(self), (self.path, self.line, self.field, self.message, self.row)


class DatasetError(LocatedError):
    """A dataset file is unreadable or a case in it is invalid; ``field`` is the column."""
