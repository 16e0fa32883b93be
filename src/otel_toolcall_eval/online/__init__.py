"""The online side's private pipeline: what ``ToolCallEvalProcessor`` (``otel_toolcall_eval.processor``, the
public face) runs for every span.

Nothing here is public API: import ``ToolCallEvalProcessor`` from ``otel_toolcall_eval``. ``LAYERS`` lists the
modules top down; each may import its own layer or those below (``tests/test_architecture.py`` checks it, and
docs/design.md's layout table is generated from it and the modules' docstrings).
"""

from __future__ import annotations

# top down: what assembles, flushes, shuts down and times the pipeline; the pipeline; its stages in the order a span
# meets them (the gate, scoring a call, observing a model turn, finishing a trace, forwarding); what holds spans back
# and the features plugged into the hooks (the judge, a package of its own, sits in this layer too); per-trace state
# and numbers, the enriched copy, metrics and the queue; containment and the hook types
LAYERS: tuple[tuple[str, ...], ...] = (
    ("build", "lifecycle"),
    ("pipeline",),
    ("gate", "call", "turn", "finish", "forward"),
    ("held_spans", "sessions", "judging"),
    ("trace_state", "matching", "trace_stats", "enrich", "metrics", "background", "prevented"),
    ("contain", "hooks"),
)
