"""``ConventionRegistry``: the ordered conventions, asked on every span the processor scores; compiled in the
opt-in build (``setup.py``), where ``recognise`` is a native method and, for a convention whose class keeps
``AttributeConvention.match``, the detection test runs inline instead of as a Python call per convention asked.
``base.py`` re-exports it (``from otel_toolcall_eval import ConventionRegistry`` is the public path).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mypy_extensions import mypyc_attr
from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import _sdk
from otel_toolcall_eval.conventions.attribute import AttributeConvention
from otel_toolcall_eval.conventions.protocol import Attrs, Convention
from otel_toolcall_eval.conventions.spans import plain_attributes
from otel_toolcall_eval.records import ToolCallRecord

_CANDIDATE_SETS = 1024  # distinct detect-key sets remembered per registry (traffic shows a handful)
# A convention to ask, whether its ``match`` is ``AttributeConvention``'s (the registry then tests its detection
# attribute and values itself: the same two operations without a call; False: call ``match``), and those two,
# typed ``Any``: a user's values (a set, a list) are tested as they are, as ``match`` would.
_Asked = tuple[Convention, bool, Any, Any]
# (conventions, the gate, detect-key set -> conventions to ask, each convention's detect keys, each one as asked):
# one tuple, so a reader on another thread never sees one part of a change without the rest
_Index = tuple[
    tuple[Convention, ...],
    frozenset[str] | None,
    dict[frozenset[str], tuple[_Asked, ...]],
    tuple[frozenset[str], ...],
    tuple[_Asked, ...],
]


# ``read_span``'s answer: the span's (trace id, span id, parent span id or None, remote parent), its attributes (None:
# not copied, ``_sdk.read_span``) and the tool call a convention reads from it (None: none)
SpanReading = tuple[tuple[int, int, int | None, bool], dict[str, Any] | None, ToolCallRecord | None]


def _asked(convention: Convention) -> _Asked:
    """How the registry asks ``convention``: inline when its class keeps ``AttributeConvention.match``."""
    if isinstance(convention, AttributeConvention) and type(convention).match is AttributeConvention.match:
        fields: Any = convention  # read untyped: compiled code would check the declared frozenset (a set is fine)
        return (convention, True, fields.detect_key, fields.detect_values)
    return (convention, False, None, None)


def _candidates(
    asked_all: tuple[_Asked, ...],
    keysets: tuple[frozenset[str], ...],
    present: frozenset[str],
    memo: dict[frozenset[str], tuple[_Asked, ...]],
) -> tuple[_Asked, ...]:
    """The conventions, in order, that detect on one of the ``present`` keys (remembered in ``memo``)."""
    asked = tuple(a for a, keys in zip(asked_all, keysets, strict=True) if not present.isdisjoint(keys))
    if len(memo) >= _CANDIDATE_SETS:
        memo.clear()
    memo[present] = asked
    return asked


def _gate(conventions: tuple[Convention, ...]) -> frozenset[str] | None:
    """Every key some convention needs to see, or None when one of them does not say (then no span is skipped)."""
    keys: set[str] = set()
    for convention in conventions:
        detect = getattr(convention, "detect_keys", None)
        if not detect or not all(isinstance(k, str) for k in detect):
            return None
        keys.update(detect)
    return frozenset(keys)


@mypyc_attr(allow_interpreted_subclasses=True)
class ConventionRegistry:
    """Ordered conventions; the first match wins. Thread-safe for reads once the processor runs.

    Most spans are not tool spans: when every convention names its ``detect_keys``, a span that carries none of
    them is rejected with one set operation instead of a ``match`` call per convention.
    """

    def __init__(self, conventions: Iterable[Convention] = ()) -> None:
        self._set(tuple(conventions))

    def _set(self, conventions: tuple[Convention, ...]) -> None:
        gate = _gate(conventions)
        # the detect keys a span carries -> the conventions to ask, in registry order (a chat span is offered to
        # the one convention that detects on ``gen_ai.operation.name``, not to every convention); filled as key
        # sets are seen: at most one entry per subset of the gate that traffic shows, and at most _CANDIDATE_SETS
        keysets = tuple(frozenset(getattr(c, "detect_keys", None) or ()) for c in conventions)
        # ``detect_keys`` is None (no skipping) while the conventions change, so no reader ever skips a span
        # that the new conventions would match; ``_index`` is one assignment for ``recognise``.
        self.detect_keys: frozenset[str] | None = None
        self._index: _Index = (conventions, gate, {}, keysets, tuple(_asked(c) for c in conventions))
        self.detect_keys = gate  # a span needs one of these keys for any convention here to match

    @property
    def _conventions(self) -> tuple[Convention, ...]:
        return self._index[0]

    def __iter__(self) -> Any:
        return iter(self._conventions)

    def __len__(self) -> int:
        return len(self._conventions)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self._conventions]

    def register(self, convention: Convention, *, first: bool = True) -> None:
        """Add a convention; ``first=True`` (default) lets it override the built-in ones."""
        if not isinstance(convention, Convention):
            raise TypeError(f"{convention!r} lacks name/match/extract")
        existing = tuple(c for c in self._conventions if c.name != convention.name)
        self._set((convention, *existing) if first else (*existing, convention))

    def copy(self) -> ConventionRegistry:
        return ConventionRegistry(self._conventions)

    def read(self, span: ReadableSpan, attrs: Attrs) -> ToolCallRecord | None:
        """The tool call the recognising convention reads from the span; None when no convention recognises it or
        the one that does finds no call (the online pipeline's one move into the conventions per span)."""
        convention = self.recognise(span, attrs)
        return None if convention is None else convention.extract(span, attrs)

    def recognise(self, span: ReadableSpan, attrs: Attrs) -> Convention | None:
        """The first convention, in registry order, that matches. Only the conventions whose detect keys the span
        carries are asked (``detect_keys``' contract: a convention matches no span without one of them)."""
        _, gate, candidates, keysets, asked = self._index
        if gate is not None:
            present = gate.intersection(attrs)  # in C, over the span's keys
            if not present:
                return None
            known = candidates.get(present)
            asked = _candidates(asked, keysets, present, candidates) if known is None else known
        plain = plain_attributes(attrs)
        for convention, inline, detect_key, detect_values in asked:
            if inline:  # ``AttributeConvention.match``, without the call
                value = plain.get(detect_key)
                if value is not None and value in detect_values:
                    return convention
            elif convention.match(span, plain):
                return convention
        return None


def read_span(
    registry: ConventionRegistry, span: ReadableSpan, gate: frozenset[str] | None, gate_children: bool
) -> SpanReading | None:
    """Read a span and recognise it in one call (the online pipeline's one move into the conventions per span): its
    ids and one copy of its attributes (``_sdk.read_span``; ``gate``: its keys, see there), and the tool call the
    recognising convention reads (``ConventionRegistry.read``), which every later step reads instead of the span.
    None for a span with nothing to read and, with ``gate_children`` (inline: the gate and the read are this one
    call), for a plain child (``_sdk.is_plain_child``: forwarded as it came). The attributes are not copied, nor the
    span recognised, for a root carrying none of the ``gate`` keys (no convention can match it: ``gate`` holds every
    detect key)."""
    if gate_children and _sdk.is_plain_child(span, gate):
        return None
    read = _sdk.read_span(span, gate)
    if read is None:
        return None
    key, attrs = read
    return key, attrs, None if attrs is None else registry.read(span, attrs)
