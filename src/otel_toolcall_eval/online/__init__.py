"""The online side's private pipeline: what ``ToolCallEvalProcessor`` (``otel_toolcall_eval.processor``, the
public face) runs for every span.

Nothing here is public API: import ``ToolCallEvalProcessor`` from ``otel_toolcall_eval``. The modules, bottom up
(``tests/test_architecture.py`` checks that each imports only its own layer or below; docs/design.md describes
them): per-trace state and numbers, the enriched copy, metrics and the background queue; failed spans held
until their recovery class is known and the session rollup; the pipeline that runs them in the order a span
meets them.
"""
