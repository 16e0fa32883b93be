"""The judge's fingerprint: a hash of everything that can change its verdicts, defined here once.

A calibration (judge-human agreement on labelled calls) holds only for the judge that was measured. The
fingerprint covers the provider, model and endpoint, the sampling parameters of the model (``temperature``,
``max_output_tokens``, ``json_mode``, ``token_limit_param``), what the judge is shown (the field and request cuts,
the free-text threshold, the redaction) and the prompt template itself (rendered with a fixed nonce, so an edit
of ``questions.build_prompt`` changes it too). Each question has its own fingerprint: the common part plus the
question (prompt, fields, scale, ``when``), so editing one question invalidates only that question's calibration.
Budget, sampling rates, concurrency and timeouts are left out: they decide which calls are judged, not how.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from otel_toolcall_eval import _json
from otel_toolcall_eval.config.judge import JudgeConfig, QuestionConfig
from otel_toolcall_eval.judge.questions import build_prompt

FINGERPRINT_CHARS: Final = 16  # hex characters kept: 64 bits, shown in reports and stored in records
_TEMPLATE_NONCE: Final = "0" * 16


def _template(question: QuestionConfig) -> dict[str, str]:
    prompt = build_prompt(question, {name: f"<{name}>" for name in question.fields}, nonce=_TEMPLATE_NONCE)
    return {"system": prompt.system, "user": prompt.user}


def _common(config: JudgeConfig) -> dict[str, Any]:
    return {
        "provider": config.provider,
        "model": config.model,
        "url": config.url,
        "temperature": config.temperature,
        "max_output_tokens": config.max_output_tokens,
        "json_mode": config.json_mode,
        "token_limit_param": config.token_limit_param,
        "max_field_chars": config.max_field_chars,
        "max_request_chars": config.max_request_chars,
        "min_free_text_chars": config.min_free_text_chars,
        "redact": config.redact.model_dump(mode="json"),
    }


def _digest(value: Any) -> str:
    return hashlib.sha256(_json.canonical(value).encode()).hexdigest()[:FINGERPRINT_CHARS]


def question_fingerprint(config: JudgeConfig, question: QuestionConfig) -> str:
    """The fingerprint a calibration of ``question`` under ``config`` is bound to."""
    return _digest({"judge": _common(config), "question": question.model_dump(mode="json"), **_template(question)})


def fingerprints(config: JudgeConfig) -> dict[str, str]:
    """Question name -> its fingerprint, for every question of the config."""
    return {q.name: question_fingerprint(config, q) for q in config.questions}
