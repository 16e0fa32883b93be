"""Harvest: turn selected production traces into draft dataset rows, so new failure classes enter the eval set."""

from otel_toolcall_eval.harvest.cases import case_from_trace, case_id, run_line
from otel_toolcall_eval.harvest.select import WhereError, check_fields, matches, parse_where

__all__ = ["WhereError", "case_from_trace", "case_id", "check_fields", "matches", "parse_where", "run_line"]
