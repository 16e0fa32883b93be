"""Undeclared arguments: argument names the tool's schema does not declare.

JSON Schema leaves ``additionalProperties`` open by default, and schemas generated from functions and pydantic
models rarely close it, so schema validity lets an invented argument name through. This check names those
arguments, as a finding of its own, unless the schema explicitly allows extra keys (``additionalProperties:
true`` or a schema). With ``additionalProperties: false`` the schema already fails the call; the names are
reported all the same.

Only what the schema says plainly is read: a schema without ``properties``, or one that declares properties
elsewhere (``patternProperties``, whose regexes are not run on untrusted input here, ``allOf``/``anyOf``/
``oneOf``, ``$ref``, ``if``, ``dependentSchemas``, ``unevaluatedProperties``), reports nothing. Bounded: at
most ``MAX_REPORTED`` names, in the order of the arguments, each cut to ``max_length``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VIOLATION = "undeclared_argument"  # the violation name when ``policies.undeclared_arguments: fail``
MAX_REPORTED = 16
_ELSEWHERE = (
    "patternProperties", "allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "dependentSchemas",
    "unevaluatedProperties",
)  # fmt: skip
_NONE: tuple[str, ...] = ()


def declared_names(parameters: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The argument names ``parameters`` declares, or None when it allows extra keys or cannot tell (the
    engine memoises this per schema, so a call costs only the loop over its own keys)."""
    if not isinstance(parameters, Mapping):
        return None
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return None
    extra = parameters.get("additionalProperties")
    if extra is not None and extra is not False:
        return None  # true or a schema: extra keys explicitly allowed (absent counts as not allowed)
    if any(key in parameters for key in _ELSEWHERE):
        return None
    return frozenset(properties)


def undeclared_in(
    arguments: Mapping[str, Any] | None, declared: frozenset[str] | None, max_length: int = 256
) -> tuple[str, ...]:
    """The names in ``arguments`` not in ``declared`` (``declared_names``), each cut to ``max_length``
    characters (they are the model's text, written as attributes)."""
    if not arguments or declared is None:
        return _NONE
    out = None
    for key in arguments:
        if key not in declared:
            if out is None:
                out = []
            out.append(key[:max_length])
            if len(out) == MAX_REPORTED:
                break
    return tuple(out) if out else _NONE


def undeclared_arguments(
    arguments: Mapping[str, Any] | None, parameters: Mapping[str, Any] | None, max_length: int = 256
) -> tuple[str, ...]:
    """The names in ``arguments`` that ``parameters`` (the tool's JSON Schema) does not declare."""
    if not arguments:
        return _NONE
    return undeclared_in(arguments, declared_names(parameters), max_length)
