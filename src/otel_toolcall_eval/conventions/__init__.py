"""Span typing: which spans are tool calls, and what LLM spans tell about them."""

from otel_toolcall_eval.conventions.base import (
    AttributeConvention,
    Convention,
    ConventionRegistry,
    base_record,
    error_evidence,
)
from otel_toolcall_eval.conventions.builtin import BUILTIN


def default_registry() -> ConventionRegistry:
    """A fresh registry of the built-in conventions, most specific first."""
    return ConventionRegistry(BUILTIN)


__all__ = [
    "BUILTIN",
    "AttributeConvention",
    "Convention",
    "ConventionRegistry",
    "base_record",
    "default_registry",
    "error_evidence",
]
