"""``judge agreement LABELS.jsonl``: the labels format, its errors, and the figures it prints per question."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sklearn.metrics import cohen_kappa_score

from otel_toolcall_eval.checks.agreement import krippendorff_alpha
from otel_toolcall_eval.cli import main
from otel_toolcall_eval.commands.agreement import _scales, summarize
from otel_toolcall_eval.dataset.labels import MAX_LINE_BYTES, read_labels

Q = "tool_appropriateness"
# (judge, human reference) per item: 20 items, the judge mostly right, sometimes one step off
PAIRS = (
    [("appropriate", "appropriate")] * 8
    + [("acceptable", "acceptable")] * 4
    + [("inappropriate", "inappropriate")] * 3
    + [("acceptable", "appropriate")] * 2
    + [("appropriate", "acceptable")] * 1
    + [("inappropriate", "appropriate")] * 1
    + [("appropriate", "inappropriate")] * 1
)


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def _write(tmp_path: Path, rows: list[dict[str, Any] | str], name: str = "labels.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def _rows() -> list[dict[str, Any] | str]:
    return [{"item": f"call-{i}", "question": Q, "judge": j, "human": h} for i, (j, h) in enumerate(PAIRS)]


def test_the_figures_are_the_reference_implementations_on_the_same_pairs(tmp_path: Path) -> None:
    records = read_labels(_write(tmp_path, _rows()), {Q: ["appropriate", "acceptable", "inappropriate"]})
    [result] = summarize(records, _scales(None), "linear", resamples=300)
    judge = [j for j, _ in PAIRS]
    human = [h for _, h in PAIRS]
    labels = ["appropriate", "acceptable", "inappropriate"]
    assert result.stats.kappa == pytest.approx(cohen_kappa_score(human, judge, labels=labels))
    # scores 1.0, 0.5, 0.0 are evenly spaced: linear weights by score are scikit-learn's by index
    assert result.weighted == pytest.approx(cohen_kappa_score(human, judge, labels=labels, weights="linear"))
    assert result.stats.raw == pytest.approx(15 / 20)
    assert result.stats.matrix[0] == (8, 2, 1)  # human appropriate: judge appropriate, acceptable, inappropriate
    assert result.kappa_ci is not None and result.kappa_ci[0] < result.stats.kappa < result.kappa_ci[1]  # type: ignore[operator]
    assert result.multi_rated == 0 and result.alpha is None


def test_the_command_prints_each_question_and_writes_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        *_rows(),
        {"item": "a", "question": "custom_q", "judge": "[red]yes[/red]", "human": "[red]yes[/red]"},
        {"item": "b", "question": "custom_q", "judge": "no", "human": "no"},
        {"item": "c", "question": "custom_q", "judge": "no|<b>", "human": "no"},
    ]
    markdown = tmp_path / "agreement.md"
    assert main(["judge", "agreement", str(_write(tmp_path, rows)), "--markdown", str(markdown)]) == 0
    out = capsys.readouterr().out
    kappa = cohen_kappa_score([h for _, h in PAIRS], [j for j, _ in PAIRS])
    assert f"judge agreement: {Q}" in out and f"{kappa:.3f} [" in out
    assert "κ weighted (linear, by score)" in out and "raw agreement" in out and "0.750" in out
    assert "[red]yes[/red]" in out  # untrusted labels print as text, never as markup
    text = markdown.read_text()
    assert f"#### `{Q}`" in text and "| appropriate | 8 | 2 | 1 |" in text
    assert "no\\|&lt;b>" in text and "<b>" not in text  # escaped in the Markdown too (the project's escaper)
    assert "#### `custom_q`" in text and "weighted" not in text.split("#### `custom_q`")[1]  # nominal: no scale


def test_several_raters_majority_reference_ties_and_their_own_alpha(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    humans = [
        {"ana": "appropriate", "bo": "appropriate", "cy": "acceptable"},  # majority appropriate
        {"ana": "acceptable", "bo": "appropriate"},  # a tie: left out of judge-human
        {"ana": "inappropriate", "bo": "inappropriate"},
        {"ana": "acceptable", "cy": "acceptable"},
    ]
    judges = ["appropriate", "appropriate", "acceptable", "acceptable"]
    rows: list[dict[str, Any] | str] = [
        {"item": f"i{n}", "question": Q, "judge": j, "humans": h}
        for n, (j, h) in enumerate(zip(judges, humans, strict=True))
    ]
    [result] = summarize(read_labels(_write(tmp_path, rows)), _scales(None), None, resamples=50)
    assert result.items == 4 and result.ties == 1 and result.stats.n == 3
    assert result.stats.matrix == ((1, 0, 0), (0, 1, 0), (0, 1, 0))
    assert result.raters == 3 and result.multi_rated == 4
    assert result.alpha == pytest.approx(krippendorff_alpha(humans))
    assert main(["judge", "agreement", str(tmp_path / "labels.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "1 left out: their humans tie" in out and "Krippendorff's α among humans (3 raters" in out


def test_a_config_defines_custom_scales(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "toolcall-eval.yaml"
    config.write_text(
        "judge:\n  provider: openai\n  model: m\n  base_url: http://127.0.0.1:9/v1\n"
        "  price: {input_per_million: 0, output_per_million: 0}\n"
        "  questions:\n    - name: tone\n      prompt: Is the reply polite?\n      fields: [request]\n"
        "      scale:\n        - {label: polite, score: 1}\n        - {label: neutral, score: 0.5}\n"
        "        - {label: rude, score: 0}\n"
    )
    good = _write(tmp_path, [{"item": "1", "question": "tone", "judge": "rude", "human": "neutral"}] * 1)
    assert main(["judge", "agreement", str(good), "--config", str(config), "--weights", "quadratic"]) == 0
    assert "κ weighted (quadratic, by score)" in capsys.readouterr().out
    bad = _write(tmp_path, [{"item": "1", "question": "tone", "judge": "grumpy", "human": "rude"}], "bad.jsonl")
    assert main(["judge", "agreement", str(bad), "--config", str(config)]) == 2
    assert "bad.jsonl:1: judge: 'grumpy' is not on tone's scale (polite, neutral, rude)" in capsys.readouterr().err


GOOD = {"item": "x", "question": Q, "judge": "appropriate", "human": "acceptable"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "labels.jsonl:2: not JSON"),
        ("[1, 2]", "labels.jsonl:2: expected a JSON object"),
        ({**GOOD, "item": "y", "judje": "x"}, "labels.jsonl:2: judje: unknown field"),
        ({**GOOD, "item": ""}, "labels.jsonl:2: item: required"),
        ({k: v for k, v in GOOD.items() if k != "question"}, "labels.jsonl:2: question: required"),
        ({**GOOD, "item": "y", "judge": 1}, "labels.jsonl:2: judge: required: a label"),
        ({**GOOD, "item": "y", "judge": "great"}, "labels.jsonl:2: judge: 'great' is not on tool_appropriateness's"),
        ({**GOOD, "item": "y", "humans": {"a": "appropriate"}}, "labels.jsonl:2: human: give either"),
        ({k: v for k, v in GOOD.items() if k != "human"} | {"item": "y"}, "labels.jsonl:2: human: give either"),
        ({"item": "y", "question": Q, "judge": "appropriate", "humans": {}}, "labels.jsonl:2: humans: expected"),
        (
            {"item": "y", "question": Q, "judge": "appropriate", "humans": {"ana": "meh"}},
            "labels.jsonl:2: humans.ana: 'meh' is not on",
        ),
        (GOOD, "labels.jsonl:2: item: 'x' is labelled twice (first on line 1)"),
        ("x" * (MAX_LINE_BYTES + 10), f"labels.jsonl:2: line longer than {MAX_LINE_BYTES:,} bytes"),
    ],
)
def test_bad_lines_exit_2_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: dict[str, Any] | str, message: str
) -> None:
    path = _write(tmp_path, [GOOD, line])
    assert main(["judge", "agreement", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err.replace("\n", "") and "Traceback" not in err


def test_empty_missing_and_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judge", "agreement", str(_write(tmp_path, ["", ""]))]) == 2
    assert "no labelled items" in capsys.readouterr().err
    assert main(["judge", "agreement", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl: cannot read" in capsys.readouterr().err
    path = _write(tmp_path, [GOOD])
    assert main(["judge", "agreement", str(path), "--resamples", "0"]) == 2
    assert main(["judge", "agreement", str(path), "--confidence", "1.5"]) == 2
    assert "--confidence" in capsys.readouterr().err


def test_blank_lines_keep_line_numbers(tmp_path: Path) -> None:
    records = read_labels(_write(tmp_path, [GOOD, "", {**GOOD, "item": "z"}]))
    assert [r.line for r in records] == [1, 3]
