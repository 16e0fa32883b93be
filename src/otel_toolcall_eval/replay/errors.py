"""The errors of reading recorded traces: ``RecordError`` says where in one record (a JSON line, a protobuf
message, a whole-file document) and what is wrong; ``formats`` adds the file and line and raises
``ReplayInputError`` (exit 2), or skips the record with ``--lenient``."""

from __future__ import annotations

from otel_toolcall_eval.errors import ToolcallEvalError


class ReplayInputError(ToolcallEvalError, ValueError):
    """A recorded-trace file that cannot be read; the message names the file, the line or message, and the field."""


class RecordError(ValueError):
    """One malformed record: ``where`` is a field path like ``resourceSpans[0].scopeSpans[0].spans[3].spanId``."""

    def __init__(self, where: str, what: str) -> None:
        self.where = where
        self.what = what
        super().__init__(f"{where}: {what}" if where else what)

    def inside(self, prefix: str) -> RecordError:
        """The same error, one level further out (``prefix`` is the enclosing path)."""
        return RecordError(f"{prefix}.{self.where}" if self.where else prefix, self.what)
