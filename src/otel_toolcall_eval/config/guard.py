"""The ``guard:`` block: how the pre-execution guard enforces the policies the rest of the file defines.

The guard has no policies of its own: ``policies``, ``tools`` and ``limits`` are the ones the processor scores
against. This block only says what to do about each broken policy, and whether to do it (``mode``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ActionName = Literal["allow", "warn", "ask", "block"]


class GuardConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["enforce", "shadow"] = Field(
        default="enforce",
        description="enforce: stopped calls never run; shadow: decide and record, never stop a call",
    )
    actions: dict[str, ActionName] = Field(
        default_factory=dict,
        description=(
            "action per policy (must_not_call, required_steps, destructive_tools, argument_rules, "
            "undeclared_arguments, step_budget, unknown_tool, schema, repeated_failure, duplicate); "
            "unset ones keep their default (destructive_tools: ask, duplicate: warn, the others: block)"
        ),
    )
    record: Literal["findings", "all"] = Field(
        default="findings",
        description="which decisions get an apply_guardrail span: those with a finding, or every call",
    )
    policy_id: str = Field(
        default="toolcall-eval",
        min_length=1,
        description="gen_ai.guardrail.policy.id of the span: which configuration the guard enforced",
    )
    max_scopes: int = Field(
        default=10_000, ge=1, description="traces (or explicit scopes) whose call history the guard holds (LRU)"
    )

    @field_validator("actions")
    @classmethod
    def _known_policies(cls, value: dict[str, str]) -> dict[str, str]:
        # here, not at the top: the processor imports this module, and only the guard needs its engine
        from otel_toolcall_eval.engine.guard import POLICIES

        unknown = sorted(set(value) - set(POLICIES))
        if unknown:
            raise ValueError(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
        return value
