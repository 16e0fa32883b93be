"""Argument-rule check: per-tool JSON Schema fragments that arguments must satisfy beyond the tool's schema
(e.g. ``delete_records`` must carry a filter). JSON Schema, so that no new rule language is invented."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from otel_toolcall_eval.checks.schema import ValidatorCache
from otel_toolcall_eval.policy import ArgumentRule


def argument_rule_violations(
    name: str, arguments: dict[str, Any] | None, rules: Sequence[ArgumentRule], cache: ValidatorCache
) -> list[str]:
    if arguments is None:
        return []
    out = []
    for rule in rules:
        if rule.tool != name:
            continue
        validator = cache.get(rule.schema_key, rule.schema)
        if not validator.is_valid(arguments):
            out.append(rule.name)
    return out
