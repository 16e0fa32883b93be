"""``otel-toolcall-eval judge agreement LABELS.jsonl``: how far the judge agrees with people, per question.

For each question in the labels file (format: ``dataset/labels.py``): Cohen's kappa of the judge against the human
reference label with a bootstrap interval, the kappa weighted by the scale's scores (ordinal questions), raw
agreement, each label's base rate for human and judge, the judge's precision and recall per label, the confusion
matrix, and, where several people labelled the same items, their own agreement (Krippendorff's alpha), which
bounds what a judge can be expected to reach. The human reference is the majority of an item's human labels; an
item whose humans tie is left out of the judge-human figures and counted.

With ``--config`` (and its ``judge.calibration.file``, or ``--calibration FILE``) each question's figures are also
appended as a calibration record bound to the config's judge fingerprint (``judge.calibration``): what the gate
reads before it lets a judge metric gate.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from otel_toolcall_eval._files import write_atomically
from otel_toolcall_eval._text import markdown_code, markdown_text, terminal_safe
from otel_toolcall_eval.checks.agreement import (
    MAX_RESAMPLES,
    Agreement,
    Weights,
    agreement,
    bootstrap_ci,
    cohen_kappa,
    kappa_from_matrix,
    krippendorff_alpha,
    pass_fail_rates,
)
from otel_toolcall_eval.commands._types import finite
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.config.judge import BUILTIN, QuestionConfig
from otel_toolcall_eval.dataset.labels import Labelled, read_labels
from otel_toolcall_eval.errors import ExitCode, UsageError
from otel_toolcall_eval.judge.calibration import CalibrationRecord, append_records, current, read_records
from otel_toolcall_eval.judge.fingerprint import fingerprints


@dataclass(frozen=True)
class Scale:
    labels: tuple[str, ...]
    scores: tuple[float, ...] | None  # None: a question the config does not define (nominal only)


@dataclass(frozen=True)
class QuestionAgreement:
    """Every figure of one question, ready to print."""

    question: str
    items: int
    ties: int  # items whose human labels tie: no reference label
    stats: Agreement
    kappa_ci: tuple[float, float] | None
    weights: Weights | None
    weighted: float | None
    weighted_ci: tuple[float, float] | None
    raters: int
    multi_rated: int  # items with two or more human labels
    alpha: float | None  # Krippendorff's alpha among the humans (nominal)


def register(judge_sub: Any) -> None:
    parser = judge_sub.add_parser("agreement", help="judge-human agreement per question from a labels file")
    parser.add_argument("labels", type=Path, help="labels file, JSONL (see docs/judge.md)")
    parser.add_argument("--config", type=Path, help="config whose judge questions define custom scales")
    parser.add_argument(
        "--weights",
        choices=["linear", "quadratic", "none"],
        default="linear",
        help="weighted kappa on ordinal scales, by the labels' scores (default linear)",
    )
    parser.add_argument("--resamples", type=int, default=1000, help=f"bootstrap resamples (max {MAX_RESAMPLES:,})")
    parser.add_argument("--confidence", type=finite, default=0.95, help="interval's confidence (default 0.95)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (the same data, the same interval)")
    parser.add_argument("--markdown", type=Path, help="also write the tables as Markdown (e.g. for pr-comment)")
    parser.add_argument(
        "--calibration",
        type=Path,
        help="append a calibration record per question, bound to --config's judge fingerprint, to this JSONL file "
        "(default: --config's judge.calibration.file, when set)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console) -> int:
    if not 0 < args.confidence < 1:
        raise UsageError(f"--confidence: {args.confidence} is not between 0 and 1")
    if not 1 <= args.resamples <= MAX_RESAMPLES:
        raise UsageError(f"--resamples: {args.resamples} is not between 1 and {MAX_RESAMPLES:,}")
    scales = _scales(args.config)
    resolved: list[str] = []
    records = read_labels(args.labels, {q: s.labels for q, s in scales.items()}, resolved)  # LabelsError: exit 2
    err = Console(stderr=True)
    for note in resolved:  # a rater's label given twice (the labelling page open twice): the later one kept
        err.print(Text(terminal_safe(f"warning: {note}")), soft_wrap=True)
    if not records:
        raise UsageError(f"{args.labels}: no labelled items")
    weights: Weights | None = None if args.weights == "none" else args.weights
    results = summarize(records, scales, weights, resamples=args.resamples, confidence=args.confidence, seed=args.seed)
    for result in results:
        _print(result, args.confidence, console)
    target = _calibration_target(args)
    if target is not None:
        _calibrate(target, args.config, records, results, console)
    if args.markdown:
        with write_atomically(args.markdown) as handle:
            handle.write(render_markdown(results, args.confidence))
        console.print(Text(terminal_safe(f"markdown: {args.markdown}")))
    return ExitCode.OK


def _calibration_target(args: argparse.Namespace) -> Path | None:
    if args.calibration is not None:
        if args.config is None:
            raise UsageError("--calibration: needs --config (a calibration is bound to that judge's fingerprint)")
        return Path(args.calibration)
    if args.config is None:
        return None
    judge = EvalConfig.load(args.config).judge
    return judge.calibration.file if judge is not None and judge.calibration is not None else None


def _calibrate(
    target: Path,
    config_path: Path,
    records: Sequence[Labelled],
    results: Sequence[QuestionAgreement],
    console: Console,
) -> None:
    """One calibration record per question, bound to the config's fingerprint; says how kappa moved since the
    previous record of the same fingerprint (agreement over time)."""
    judge = EvalConfig.load(config_path).judge
    assert judge is not None  # _scales refused a config without one
    prints = fingerprints(judge)
    questions = {q.name: q for q in judge.questions}
    unknown = [r.question for r in results if r.question not in prints]
    if unknown:
        raise UsageError(
            f"--calibration: {unknown[0]!r} is not a question of {config_path}'s judge section (no fingerprint)"
        )
    previous = read_records(target)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    written = []
    for result in results:
        items = [r for r in records if r.question == result.question]
        human, judged = _pairs(items)
        tpr, tnr = pass_fail_rates(human, judged, questions[result.question].passing)
        dates = sorted(r.labelled_at for r in items if r.labelled_at)
        record = CalibrationRecord(
            question=result.question,
            fingerprint=prints[result.question],
            provider=judge.provider,
            model=judge.model,
            n=result.stats.n,
            kappa=result.stats.kappa,
            kappa_ci=result.kappa_ci,
            weighted_kappa=result.weighted,
            raw_agreement=result.stats.raw,
            tpr=tpr,
            tnr=tnr,
            labels_from=dates[0] if dates else None,
            labels_to=dates[-1] if dates else None,
            created_at=now,
        )
        written.append(record)
        before = current(previous, record.question, record.fingerprint)
        change = ""
        if before is not None and before.kappa is not None and record.kappa is not None:
            change = f", {record.kappa - before.kappa:+.3f} since the record of {before.created_at}"
        console.print(
            Text(
                terminal_safe(
                    f"calibration: {record.question} (fingerprint {record.fingerprint}): kappa {_num(record.kappa)}, "
                    f"TPR {_num(tpr)}, TNR {_num(tnr)}, n {record.n}{change}"
                )
            )
        )
    append_records(target, written)
    console.print(Text(terminal_safe(f"calibration records appended to {target}")))


def _pairs(items: Sequence[Labelled]) -> tuple[list[str], list[str]]:
    human: list[str] = []
    judge: list[str] = []
    for record in items:
        reference = _majority([label for _, label in record.humans])
        if reference is not None:
            human.append(reference)
            judge.append(record.judge)
    return human, judge


def _scales(config_path: Path | None) -> dict[str, Scale]:
    questions: dict[str, QuestionConfig] = dict(BUILTIN)
    if config_path is not None:
        config = EvalConfig.load(config_path)
        if config.judge is None:
            raise UsageError(f"{config_path}: no judge section (its questions define the scales)")
        questions.update({q.name: q for q in config.judge.questions})
    return {
        name: Scale(tuple(s.label for s in q.scale), tuple(s.score for s in q.scale)) for name, q in questions.items()
    }


def summarize(
    records: Sequence[Labelled],
    scales: dict[str, Scale],
    weights: Weights | None,
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[QuestionAgreement]:
    """One result per question, in the order the questions first appear in the file."""
    by_question: dict[str, list[Labelled]] = {}
    for record in records:
        by_question.setdefault(record.question, []).append(record)
    out = []
    for question, items in by_question.items():
        scale = scales.get(question)
        given = {r.judge for r in items} | {label for r in items for _, label in r.humans}
        labels = list(scale.labels) if scale else sorted(given)
        human, judge = _pairs(items)
        ties = len(items) - len(human)
        stats = agreement(human, judge, labels)
        bootstrap = {"resamples": resamples, "confidence": confidence, "seed": seed}
        ci = bootstrap_ci(human, judge, kappa_from_matrix, labels, **bootstrap)  # type: ignore[arg-type]
        weighted = weighted_ci = None
        use = weights if scale is not None and scale.scores is not None and len(labels) >= 3 else None
        if use is not None and scale is not None and scale.scores is not None:
            positions = list(scale.scores)
            weighted = cohen_kappa(human, judge, labels, weights=use, positions=positions)
            weighted_ci = bootstrap_ci(
                human,
                judge,
                lambda m, w=use, p=positions: kappa_from_matrix(m, w, p),  # type: ignore[misc]
                labels,
                **bootstrap,  # type: ignore[arg-type]
            )
        multi = [dict(r.humans) for r in items if len(r.humans) >= 2]
        out.append(
            QuestionAgreement(
                question=question,
                items=len(items),
                ties=ties,
                stats=stats,
                kappa_ci=ci,
                weights=use,
                weighted=weighted,
                weighted_ci=weighted_ci,
                raters=len({name for r in items for name, _ in r.humans if name}),
                multi_rated=len(multi),
                alpha=krippendorff_alpha(multi) if multi else None,
            )
        )
    return out


def _majority(labels: list[str]) -> str | None:
    counts = Counter(labels).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _with_ci(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return "n/a (one label throughout)"
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else " [interval n/a: too few items]")


def _rows(result: QuestionAgreement, confidence: float) -> list[tuple[str, str]]:
    s = result.stats
    compared = f"{s.n} compared" + (f", {result.ties} left out: their humans tie" if result.ties else "")
    rows = [
        ("items", f"{result.items}: {compared}"),
        (f"Cohen's κ [{confidence:.0%} bootstrap]", _with_ci(s.kappa, result.kappa_ci)),
    ]
    if result.weights is not None:
        rows.append((f"κ weighted ({result.weights}, by score)", _with_ci(result.weighted, result.weighted_ci)))
    rows.append(("raw agreement", _num(s.raw)))
    if result.multi_rated:
        rows.append(
            (
                f"Krippendorff's α among humans ({result.raters} raters, {result.multi_rated} items rated twice+)",
                _num(result.alpha),
            )
        )
    return rows


def _per_label(result: QuestionAgreement) -> list[tuple[str, str, str, str, str]]:
    return [
        (p.label, f"{p.human_rate:.1%}", f"{p.judge_rate:.1%}", _num(p.precision), _num(p.recall))
        for p in result.stats.per_label
    ]


def _print(result: QuestionAgreement, confidence: float, console: Console) -> None:
    title = Text(terminal_safe(f"judge agreement: {result.question}"))
    summary = Table(title=title, show_header=False, title_justify="left")
    for name, value in _rows(result, confidence):
        summary.add_row(Text(terminal_safe(name)), Text(terminal_safe(value)))
    console.print(summary)
    labels = Table("label", "human rate", "judge rate", "precision", "recall")
    for row in _per_label(result):
        labels.add_row(*(Text(terminal_safe(cell)) for cell in row))
    console.print(labels)
    matrix = Table(title=Text("confusion (rows: human, columns: judge)"), title_justify="left")
    for header in ("", *result.stats.labels):
        matrix.add_column(Text(terminal_safe(header)))
    for label, counts in zip(result.stats.labels, result.stats.matrix, strict=True):
        matrix.add_row(Text(terminal_safe(label)), *(Text(str(c)) for c in counts))
    console.print(matrix)


def render_markdown(results: Sequence[QuestionAgreement], confidence: float) -> str:
    """The same tables as Markdown: a section to add below the gate's report in the pull-request comment."""
    out = ["### Judge agreement with human labels (not gated)", ""]
    for result in results:
        out += [f"#### `{markdown_code(result.question)}`", "", "| | |", "|---|---|"]
        out += [f"| {markdown_text(name)} | {markdown_text(value)} |" for name, value in _rows(result, confidence)]
        out += ["", "| label | human rate | judge rate | precision | recall |", "|---|---|---|---|---|"]
        out += ["| " + " | ".join(markdown_text(c) for c in row) + " |" for row in _per_label(result)]
        labels = result.stats.labels
        header = " | ".join(markdown_text(x) for x in labels)
        out += ["", f"| human \\ judge | {header} |", "|---" * (len(labels) + 1) + "|"]
        for label, row in zip(labels, result.stats.matrix, strict=True):
            out.append(f"| {markdown_text(label)} | " + " | ".join(str(c) for c in row) + " |")
        out.append("")
    return "\n".join(out)
