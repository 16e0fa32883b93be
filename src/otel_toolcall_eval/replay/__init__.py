"""Replay recorded traces through the same processor code path, and fetch them from Jaeger or Tempo."""

from otel_toolcall_eval.replay.engine import ReplayResult, replay_spans
from otel_toolcall_eval.replay.formats import ReplayInputError, read_file

__all__ = ["ReplayInputError", "ReplayResult", "read_file", "replay_spans"]
