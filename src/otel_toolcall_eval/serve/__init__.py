"""The scoring service (``otel-toolcall-eval serve``): the online processor behind OTLP receivers, for agents in
any language. See docs/serve.md for what it guarantees.
"""

from __future__ import annotations

from otel_toolcall_eval.serve.service import Service, StopReport

__all__ = ["Service", "StopReport"]
