"""The LLM judge: budget-paced sampling of scored tool calls, judged off the application thread.

Importing this package is cheap (the configuration only); the worker, providers and telemetry load on
first use, so ``otel_toolcall_eval.config`` can name ``JudgeConfig`` without pulling in httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otel_toolcall_eval.config.judge import JudgeConfig

if TYPE_CHECKING:
    from otel_toolcall_eval.judge.judge import Judge

__all__ = ["Judge", "JudgeConfig"]


def __getattr__(name: str) -> Any:
    if name == "Judge":
        from otel_toolcall_eval import extras

        extras.require("judge", "the LLM judge (the config's judge section)")  # exit 2 in the CLI, else raised
        from otel_toolcall_eval.judge.judge import Judge

        return Judge
    raise AttributeError(name)
