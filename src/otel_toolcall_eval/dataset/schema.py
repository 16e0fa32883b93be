"""The dataset's JSON Schema, for editors and other tools: derived from the models, never written by hand.

It describes one case (one JSONL line, or one CSV row with its JSON cells decoded). Rules that span columns
(``expected_no_tool`` against ``expected_tool_calls``, a slice's requirements, expected tools being offered
and not forbidden) are checked by ``otel-toolcall-eval dataset validate``, which JSON Schema cannot express.
"""

from __future__ import annotations

from typing import Any

from otel_toolcall_eval.dataset.models import DatasetCase

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def dataset_json_schema() -> dict[str, Any]:
    schema = DatasetCase.model_json_schema()
    return {
        "$schema": SCHEMA_DIALECT,
        "title": "otel-toolcall-eval dataset case",
        "description": "One evaluation case: one JSONL line, or one CSV row whose JSON-valued cells hold JSON text.",
        **{k: v for k, v in schema.items() if k not in ("title", "description")},
    }
