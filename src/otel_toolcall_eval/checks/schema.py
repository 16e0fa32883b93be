"""JSON-Schema validity of arguments, with compiled validators cached per schema (bounded in entries and bytes).

jsonschema-rs is the hot-path validator (measured ~40x faster than a prebuilt ``jsonschema`` validator,
same verdicts with format checking off, the Draft 2020-12 default of both).

Schemas come from trace data and datasets, so they are untrusted: every validator is compiled with a retriever
that resolves nothing. jsonschema-rs's default retriever follows a ``$ref`` to any URL or ``file://`` path
(blocking ``span.end()`` on a slow server, and quoting a local file's content back in validation errors);
here such a schema does not compile, which makes it a broken schema: no verdict. References inside the
document (``#/$defs/...``, anchors, the built-in meta-schemas of the known drafts) resolve as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from otel_toolcall_eval import _json
from otel_toolcall_eval._lru import BytesBoundedCache
from otel_toolcall_eval.records import ToolDefinition


@dataclass(slots=True, frozen=True)
class SchemaVerdict:
    valid: bool
    errors: tuple[str, ...] = ()


_VALID = SchemaVerdict(True)  # immutable, so every valid call shares one
_set: Any = object.__setattr__


def _invalid(errors: tuple[str, ...]) -> SchemaVerdict:
    """``SchemaVerdict(False, errors)`` without the Python frame of the frozen dataclass's generated ``__init__``
    (``records.new_trace_verdict`` says why): one per invalid call."""
    verdict = SchemaVerdict.__new__(SchemaVerdict)
    _set(verdict, "valid", False)
    _set(verdict, "errors", errors)
    return verdict


@dataclass(slots=True, frozen=True)
class ResolvedSchema:
    definition: ToolDefinition | None
    source: str | None  # "trace" or "config"
    drift: bool | None  # both known and different; None when only one is known


class SchemaCompileError(ValueError):
    """The schema does not compile: invalid, or it refers outside its own document."""


def _refuse(uri: str) -> Any:
    """The retriever of every validator: nothing outside the document is ever fetched or read."""
    raise ValueError(f"external reference refused: {uri}")


def compile_schema(schema: dict[str, Any]) -> Any:
    """A jsonschema-rs validator that never leaves the document; ``SchemaCompileError`` when it cannot be built."""
    try:
        return jsonschema_rs.validator_for(schema, retriever=_refuse)
    except Exception as exc:  # noqa: BLE001 - whatever the compiler raises, the schema is the problem
        first = str(exc).strip().splitlines()
        raise SchemaCompileError(first[0] if first else type(exc).__name__) from None


_BROKEN = object()  # cached in place of a validator for a schema that does not compile


# A compiled validator costs a multiple of its schema's text (measured 2-4x for jsonschema-rs); the key is the text.
VALIDATOR_COST_FACTOR = 4
DEFAULT_CACHE_BYTES = 16 * 1024 * 1024


class ValidatorCache:
    """Compiled validators keyed by the schema's canonical JSON, bounded in entries and in (estimated) bytes:
    schemas come from trace data. Thread-safe and fork-safe; building happens outside the lock.

    A schema that does not compile is remembered too (bounded like the rest), so a trace that repeats a broken
    or externally referencing schema pays the failed compilation once, not on every call.
    """

    def __init__(self, maxsize: int = 512, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self._items: BytesBoundedCache[str, Any] = BytesBoundedCache(max_bytes, maxsize)

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        return self._items.bytes

    def get(self, key: str, schema: dict[str, Any]) -> Any:
        validator = self._items.get(key)
        if validator is not None:
            if validator is _BROKEN:
                raise SchemaCompileError("the schema does not compile")
            return validator
        cost = VALIDATOR_COST_FACTOR * len(key) + 256
        try:
            validator = compile_schema(schema)
        except SchemaCompileError:
            self._items.put(key, _BROKEN, cost)
            raise
        self._items.put(key, validator, cost)
        return validator


def validate_arguments(
    arguments: dict[str, Any],
    definition: ToolDefinition,
    cache: ValidatorCache,
    *,
    max_errors: int = 3,
    max_length: int = 256,
) -> SchemaVerdict | None:
    """None when the tool has no usable schema (absent, or itself not a valid schema)."""
    validator = validator_for(definition, cache)
    if validator is None:
        return None
    return validate_with(validator, arguments, max_errors=max_errors, max_length=max_length)


def validator_for(definition: ToolDefinition, cache: ValidatorCache) -> Any:
    """The compiled validator of the tool's schema, or None when it has none or it is not a valid schema."""
    if definition.parameters is None:
        return None
    key = definition.schema_key or _json.canonical(definition.parameters)
    try:
        return cache.get(key, definition.parameters)
    except Exception:  # noqa: BLE001 - a broken schema is the tool author's bug, not the call's
        return None


def validate_with(
    validator: Any, arguments: dict[str, Any], max_errors: int = 3, max_length: int = 256
) -> SchemaVerdict:
    """The verdict of one compiled validator: the first ``max_errors`` errors, each ``path: message``."""
    if validator.is_valid(arguments):
        return _VALID
    errors = []
    for err in validator.iter_errors(arguments):
        errors.append(f"{_pointer(err.instance_path)}: {err.message}"[:max_length])
        if len(errors) >= max_errors:
            break
    return _invalid(tuple(errors))


def _pointer(path: list[str | int]) -> str:
    """The instance path as a JSON-Pointer-like ``/a/0/b``. Most argument errors sit at the top (``/``) or one
    key down: those skip the ``join`` over a ``map`` (a list and a call per part)."""
    if not path:
        return "/"
    if len(path) == 1:
        first = path[0]
        return "/" + (first if type(first) is str else str(first))
    return "/" + "/".join(map(str, path))


def resolve_schema(
    name: str,
    trace_tools: dict[str, ToolDefinition] | None,
    span_schema: ToolDefinition | None,
    config_tools: dict[str, ToolDefinition],
) -> ResolvedSchema:
    """The schema the model saw wins; the configured one fills in, and a difference is flagged as drift."""
    seen = span_schema if span_schema is not None and span_schema.parameters is not None else None
    if seen is None and trace_tools:
        seen = trace_tools.get(name)
        if seen is not None and seen.parameters is None:
            seen = None
    configured = config_tools.get(name)
    if seen is not None:
        drift = None if configured is None else seen is not configured and _key(seen) != _key(configured)
        return ResolvedSchema(seen, "trace", drift)
    if configured is not None:
        return ResolvedSchema(configured, "config", None)
    return ResolvedSchema(None, None, None)


def _key(definition: ToolDefinition) -> str:
    return definition.schema_key or _json.canonical(definition.parameters)
