"""``AttributeConvention``: a convention that is a detection attribute and where to read each field from.

Interpreted in every build: it is a frozen slots dataclass that users (and ``builtin.py``) subclass, and a
compiled dataclass loses the fields of an interpreted subclass that declares slots of its own (mypyc's native
layout is not the ``__slots__`` the subclass's dataclass looks for). Its methods are one line each: the work runs
in the compiled ``spans.py``, and the registry asks ``match`` without a call when a class keeps this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.conventions import spans
from otel_toolcall_eval.conventions.protocol import Attrs
from otel_toolcall_eval.records import ToolCallRecord


@dataclass(frozen=True, slots=True)
class AttributeConvention:
    """A convention that is just a detection attribute and where to read each field from.

    ``name_keys`` empty means the span name is the tool name (Laminar, Langfuse).
    """

    name: str
    detect_key: str
    detect_values: frozenset[str]
    name_keys: tuple[str, ...] = ()
    argument_keys: tuple[str, ...] = ()
    result_keys: tuple[str, ...] = ()
    call_id_keys: tuple[str, ...] = (A.GEN_AI_TOOL_CALL_ID,)
    schema_keys: tuple[str, ...] = ()
    unwrap_args: bool = False
    span_name_prefixes: tuple[str, ...] = ()
    # set per subclass: ``extract`` calls a subclass's own ``tool_name``, and reads the name in compiled code else
    _overrides_tool_name: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # not ``super()``: ``slots=True`` makes a new class, and the zero-argument form would name the old one
        super(AttributeConvention, cls).__init_subclass__(**kwargs)
        cls._overrides_tool_name = cls.tool_name is not AttributeConvention.tool_name

    @property
    def detect_keys(self) -> tuple[str, ...]:
        """A span this convention matches carries at least one of these keys (lets the registry skip the rest)."""
        return (self.detect_key,)

    def match(self, span: ReadableSpan, attrs: Attrs) -> bool:
        # the registry tests this itself (``registry.py``) for a class that does not override it
        value = attrs.get(self.detect_key)
        return value is not None and value in self.detect_values

    def tool_name(self, span: ReadableSpan, attrs: Attrs) -> Any:
        return spans.tool_name(self, span, attrs)

    def extract(self, span: ReadableSpan, attrs: Attrs) -> ToolCallRecord | None:
        return spans.attribute_record(self, span, attrs)
