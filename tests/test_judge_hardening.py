"""The judge against hostile input (issue 15): answers that stall a regex, secrets cut in half, numbers."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from otel_toolcall_eval.judge.questions import BUILTIN, MAX_ANSWER_CHARS, AnswerError, parse_answer

APPROPRIATE = BUILTIN["tool_appropriateness"]


def test_a_huge_answer_with_a_whitespace_run_is_rejected_without_scanning_it() -> None:
    """Red before: the code-fence regex backtracked over the run (quadratic: a 1 MB answer runs for hours).

    The parse runs in a subprocess with a 60 s timeout, so the old code fails by timing out instead of hanging
    the suite; the new code rejects the answer by its length, before any scan.
    """
    script = textwrap.dedent(
        """
        from otel_toolcall_eval.judge.questions import BUILTIN, AnswerError, parse_answer
        text = '```json\\n{"label": "appropriate", "explanation": "fits"}' + ' ' * 1_000_000 + 'x'
        try:
            parse_answer(BUILTIN["tool_appropriateness"], text, None)
        except AnswerError as exc:
            print(exc.kind)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "answer_too_large"


@pytest.mark.parametrize(
    "text",
    [
        # a run of whitespace just inside the cap, between the fences and after the object
        "```json\n" + '{"label": "acceptable", "explanation": "ok"}' + " \t" * (MAX_ANSWER_CHARS // 2 - 40) + "\n```",
        "```" + " " * (MAX_ANSWER_CHARS - 100) + '{"label": "acceptable"}' + "x",
        '{"label": "acceptable"}' + "`" * (MAX_ANSWER_CHARS - 100),
    ],
)
def test_pathological_answers_within_the_cap_parse(text: str) -> None:
    assert len(text) <= MAX_ANSWER_CHARS
    assert parse_answer(APPROPRIATE, text, None).label == "acceptable"


def test_the_cap_is_on_the_answer_text() -> None:
    fits = '{"label": "appropriate"}'.ljust(MAX_ANSWER_CHARS)
    assert parse_answer(APPROPRIATE, fits, None).label == "appropriate"
    with pytest.raises(AnswerError) as info:
        parse_answer(APPROPRIATE, fits + " ", None)
    assert info.value.kind == "answer_too_large"
