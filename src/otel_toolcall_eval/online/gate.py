"""The gate: which spans are worth a look. Most spans are plain traffic (neither a tool nor an LLM span, nor a
root): they go straight on, tested against one frozenset of attribute keys in C (``_sdk.is_plain_child``).

The keys are the conventions' detection keys, the LLM checks' (``LLM_KEYS``) and the features' watched keys
(``hooks.KeyWatch``: sessions' conversation id). They are recomputed only when the conventions change (a
convention registered after start-up): the pipeline's ``on_end`` compares one reference per span and calls no
function of this module on a plain span (``tests/online/test_plain_span_path.py`` counts the frames).
"""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import _sdk
from otel_toolcall_eval.conventions.llm_spans import LLM_KEYS
from otel_toolcall_eval.online.hooks import KeyWatch


class Gate:
    """The gate's keys for one set of conventions and watches."""

    def __init__(self, watches: tuple[KeyWatch, ...]) -> None:
        self.watches = watches
        watched = frozenset().union(*(w.keys for w in watches))
        self.watched: frozenset[str] | None = watched or None
        self.of: frozenset[str] | None = None  # the conventions' keys these were computed from
        self.keys: frozenset[str] | None = None  # a span carrying none of these is plain (None: every span)
        self.work: frozenset[str] | None = None  # the keys a convention or an LLM check reads
        # a watch noted a value (set by the pipeline, which does the noting): until then ``on_end`` reads this and
        # calls nothing here for a span carrying a gate key
        self.noting = False

    def refresh(self, detect_keys: frozenset[str] | None) -> None:
        """The conventions' keys changed (or are read for the first time)."""
        work = None if detect_keys is None else detect_keys | LLM_KEYS
        watched = self.watched
        self.of, self.work = detect_keys, work
        self.keys = work if work is None or watched is None else work | watched

    def only_watched(self, span: ReadableSpan) -> bool:
        """A span the gate let through only for a watched key, in a trace whose value is noted already: it goes on
        as plain traffic (OpenInference's ``using_session`` puts ``session.id`` on every span). Only spans carrying
        a gate key get here, so plain traffic pays nothing for the watches."""
        if not self.watches:
            return False
        key = _sdk.span_key(span)
        if key is None or not all(w.noted(key[0]) for w in self.watches):
            return False
        work = self.work
        # a root, or a span a convention or an LLM check reads: evaluated
        return not (key[2] is None or key[3] or work is None or _sdk.carries_any(span, work))
