"""The config's trajectory policies in ``otel-toolcall-eval eval``: the online checks, the offline gate.

The fixture (tests/fixtures/policies/) has one compliant run, one run per policy kind broken, a parallel-batch
prerequisite, a malformed prerequisite, a failed run and a must-not-call call; the online ``Scorer`` is the
oracle for what a call sequence violates.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.engine import Scorer
from otel_toolcall_eval.offline.pipeline import run_pipeline
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runner import evaluate
from otel_toolcall_eval.offline.runs import parse_run_line
from otel_toolcall_eval.offline.score import score_case
from otel_toolcall_eval.records import CallHistory, ErrorEvidence

FIXTURES = Path(__file__).parents[1] / "fixtures" / "policies"
SEND_WITHOUT_AUTH = "policy: missing_required_step:authenticate (send_email, call 2)"
REASONS = {
    "compliant": [],
    "skip-auth": ["policy: missing_required_step:authenticate (send_email, call 1)"],
    "same-turn-auth": [SEND_WITHOUT_AUTH],  # one model turn: the login does not count
    "bad-auth": [  # the login failed its schema: a malformed call is no prerequisite
        SEND_WITHOUT_AUTH,
        'authenticate arguments fail the schema (/user: 7 is not of type "string")',
    ],
    "unconfirmed-delete": ["policy: unconfirmed_destructive (delete_records, call 1)"],
    "unscoped-delete": ["policy: unscoped_arguments (delete_records, call 2)"],
    "over-budget": ["policy: over_budget (5 calls, budget 4)"],
    "failed-run": [
        "run error: send_email: SMTP timeout",
        "policy: missing_required_step:authenticate (send_email, call 2; the run recorded an error, so no call "
        "counts as succeeded)",
    ],
    "unordered-ok": [],  # no batches: turns unknown, an earlier success counts (as online)
    "drop-db": ["must-not-call: drop_database", "unexpected drop_database"],
}
BROKEN = {
    "skip-auth": ["missing_required_step:authenticate"],
    "same-turn-auth": ["missing_required_step:authenticate"],
    "bad-auth": ["missing_required_step:authenticate"],
    "unconfirmed-delete": ["unconfirmed_destructive"],
    "unscoped-delete": ["unscoped_arguments"],
    "over-budget": ["over_budget"],
    "failed-run": ["missing_required_step:authenticate"],
}
POLICY_CASES = "skip-auth, same-turn-auth, bad-auth, unconfirmed-delete, unscoped-delete, over-budget, failed-run"


pytestmark = pytest.mark.usefixtures("wide_console")  # conftest.py


def _eval(tmp_path: Path, config: Path, *runs: Path) -> tuple[int, dict[str, Path]]:
    out = {k: tmp_path / f"report.{k}" for k in ("json", "md", "xml", "html")}
    code = main(
        ["eval", "--dataset", str(FIXTURES / "dataset.jsonl"), "--runs", *map(str, runs), "--config", str(config),
         "--json", str(out["json"]), "--markdown", str(out["md"]), "--junit", str(out["xml"]),
         "--html", str(out["html"])]
    )  # fmt: skip
    return code, out


def test_every_policy_kind_fails_its_case_and_the_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _eval(tmp_path, FIXTURES / "config.yaml", FIXTURES / "run.jsonl")
    assert code == 1
    report = json.loads(out["json"].read_text())
    rows = {r["id"]: r for r in report["cases"]}
    assert {i: r["reasons"] for i, r in rows.items()} == REASONS
    assert {i: r["policy_violations"] for i, r in rows.items() if r["policy_violations"]} == BROKEN
    assert [i for i, r in rows.items() if r["passed"]] == ["compliant", "unordered-ok"]
    assert (
        rows["drop-db"]["must_not_call_violations"] == ["drop_database"] and rows["drop-db"]["policy_violations"] == []
    )
    summary = report["summary"]
    assert summary["policy_violations"] == 7 and summary["must_not_call_violations"] == 1  # counted apart
    assert report["slices"]["single-tool"]["policy_violations"] == 2  # skip-auth, unconfirmed-delete
    assert report["gate"]["failures"] == [
        "must-not-call: 1 call(s) of forbidden tools (cases: drop-db)",
        f"policy: 7 violation(s) of configured policies (cases: {POLICY_CASES})",
    ]
    gate_check = next(c for c in report["gate"]["checks"] if c["metric"] == "policy_violations")
    assert (gate_check["kind"], gate_check["value"], gate_check["passed"]) == ("policy", 7, False)

    junit = ET.parse(out["xml"]).getroot()
    failures = {tc.get("name"): tc.find("failure") for tc in junit.iter("testcase")}
    gate_failure = failures["policy_violations policy"]
    assert gate_failure is not None and gate_failure.get("message", "").startswith("policy: 7 violation(s)")
    unscoped = failures["unscoped-delete"]
    assert unscoped is not None and unscoped.get("message") == "policy: unscoped_arguments (delete_records, call 2)"
    assert failures["compliant"] is None and failures["unordered-ok"] is None
    md = out["md"].read_text()
    assert "| ❌ | `policy_violations` | 7 | none allowed |" in md and "| `policy_violations` | 7 |" in md
    assert "| `skip-auth` | single-tool | policy: missing_required_step:authenticate (send_email, call 1) |" in md
    assert "policy: over_budget (5 calls, budget 4)" in out["html"].read_text()
    stdout = capsys.readouterr().out
    assert f"✘ policy: 7 violation(s) of configured policies (cases: {POLICY_CASES})" in stdout


def test_a_compliant_run_passes_the_policy_gate(tmp_path: Path) -> None:
    compliant = tmp_path / "run.jsonl"
    lines = [json.loads(line) for line in (FIXTURES / "run.jsonl").read_text().splitlines()]
    good = next(line["tool_calls"] for line in lines if line["id"] == "compliant")
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text(next(x for x in (FIXTURES / "dataset.jsonl").read_text().splitlines() if '"compliant"' in x))
    compliant.write_text(json.dumps({"id": "compliant", "tool_calls": good}) + "\n")
    js = tmp_path / "r.json"
    args = ["eval", "--dataset", str(dataset), "--runs", str(compliant), "--config", str(FIXTURES / "config.yaml")]
    assert main([*args, "--json", str(js)]) == 0
    report = json.loads(js.read_text())
    assert report["summary"]["policy_violations"] == 0 and report["cases"][0]["policy_violations"] == []
    assert {"metric": "policy_violations", "kind": "policy", "threshold": 0, "value": 0, "passed": True,
            "message": "no policy violations"} in report["gate"]["checks"]  # fmt: skip


def test_without_policies_the_reports_carry_no_policy_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "plain.yaml"
    config.write_text("policies:\n  must_not_call: [drop_database]\n")
    code, out = _eval(tmp_path, config, FIXTURES / "run.jsonl")
    assert code == 1  # the must-not-call call alone
    report = json.loads(out["json"].read_text())
    assert report["gate"]["failures"] == ["must-not-call: 1 call(s) of forbidden tools (cases: drop-db)"]
    rows = {r["id"]: r for r in report["cases"]}
    assert rows["skip-auth"]["passed"] and rows["over-budget"]["passed"] and rows["same-turn-auth"]["passed"]
    assert not rows["failed-run"]["passed"] and rows["failed-run"]["reasons"] == ["run error: send_email: SMTP timeout"]
    for name, path in out.items():
        assert "policy" not in path.read_text(), name
    assert "policy" not in capsys.readouterr().out


def test_n_runs_sum_the_count_and_union_the_violations(tmp_path: Path) -> None:
    fixed = tmp_path / "fixed.jsonl"
    lines = [json.loads(line) for line in (FIXTURES / "run.jsonl").read_text().splitlines()]
    for line in lines:  # the next run logs in first everywhere, and leaves the database alone
        if line["id"] in ("skip-auth", "same-turn-auth", "bad-auth", "failed-run"):
            send = {**line["tool_calls"][-1], "batch": 2}
            line["tool_calls"] = [{"name": "authenticate", "arguments": {"user": "ana"}, "batch": 1}, send]
            line.pop("error", None)
        if line["id"] == "drop-db":
            line["tool_calls"] = line["tool_calls"][:1]
    fixed.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, out = _eval(tmp_path, FIXTURES / "config.yaml", FIXTURES / "run.jsonl", fixed)
    assert code == 1
    report = json.loads(out["json"].read_text())
    assert [r["summary"]["policy_violations"] for r in report["runs_detail"]] == [7, 3]
    assert report["summary"]["policy_violations"] == 10  # counts add up across runs, as must-not-call does
    rows = {r["id"]: r for r in report["cases"]}
    assert rows["skip-auth"]["policy_violations"] == ["missing_required_step:authenticate"]
    assert rows["skip-auth"]["reasons"] == [
        "run 1: policy: missing_required_step:authenticate (send_email, call 1)",
        "run 2: unexpected authenticate",  # the dataset expects the email only
    ]
    assert rows["same-turn-auth"]["pass_rate"] == 0.5 and rows["unscoped-delete"]["pass_rate"] == 0.0


def test_chunks_and_worker_processes_agree_on_the_policies() -> None:
    config = EvalConfig.load(FIXTURES / "config.yaml")
    dataset, run = FIXTURES / "dataset.jsonl", str(FIXTURES / "run.jsonl")
    with evaluate(dataset, [run], config) as inline:
        expected_rows = list(inline.cases)
        expected_summary = inline.report["summary"]
    outcome = run_pipeline(dataset, [run], config, Preparer(config), chunk_size=3)  # merged from four chunks
    try:
        assert [r["policy_violations"] for r in outcome.store] == [r["policy_violations"] for r in expected_rows]
        report = outcome.aggregates[0].report(policies=True)
        assert report["summary"]["policy_violations"] == 7 and len(report["examples"]["policy"]) == 7
    finally:
        outcome.store.close()
    with evaluate(dataset, [run], config, jobs=2) as parallel:
        assert list(parallel.cases) == expected_rows and parallel.report["summary"] == expected_summary
        assert parallel.gate.failures == [
            "must-not-call: 1 call(s) of forbidden tools (cases: drop-db)",
            f"policy: 7 violation(s) of configured policies (cases: {POLICY_CASES})",
        ]


# --- the decisions a run line leaves open, on score_case ------------------------------------------------------

CONFIG = EvalConfig.from_dict(
    {
        "policies": {
            "required_steps": [{"tool": "authenticate", "before": ["send_email"]}],
            "destructive_tools": [{"tool": "delete_records", "confirm_with": ["confirm"]}],
            "argument_rules": [{"tool": "delete_records", "name": "unscoped", "schema": {"required": ["filter"]}}],
            "step_budget": 6,
        }
    }
)
PREP = Preparer(CONFIG)
CASE = PREP.prepare(DatasetCase.model_validate({"id": "c", "user_input": "x", "expected_tool_calls": [{"name": "a"}]}))


def _violations(calls: list[dict[str, Any]], **line: Any) -> list[tuple[str, str | None, int]]:
    run = parse_run_line("run.jsonl", 1, orjson.dumps({"id": "c", "tool_calls": calls, **line}))
    result = score_case(CASE, run, PREP)
    assert result.policy_violations is not None
    return [(v.violation, v.tool, v.call) for v in result.policy_violations]


def _call(name: str, batch: int | None = None, arguments: Any = None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments}
    if batch is not None:
        call["batch"] = batch
    return call


def test_turns_follow_the_order_batch_labels_first_appear() -> None:
    assert _violations([_call("authenticate", 7), _call("send_email", 3)]) == []  # labels, not numbers
    assert _violations([_call("authenticate", 7), _call("send_email", 7)]) == [
        ("missing_required_step:authenticate", "send_email", 2)
    ]
    assert _violations([_call("send_email", 1), _call("authenticate", 2), _call("send_email", 3)]) == [
        ("missing_required_step:authenticate", "send_email", 1)
    ]


def test_a_call_without_a_batch_has_an_unknown_turn_as_online() -> None:
    assert _violations([_call("authenticate"), _call("send_email", 1)]) == []
    assert _violations([_call("authenticate", 1), _call("send_email")]) == []
    assert _violations([_call("confirm", 1), _call("delete_records", 1, {"filter": {}})]) == [
        ("unconfirmed_destructive", "delete_records", 2)
    ]


def test_an_unparsed_prerequisite_does_not_count_and_rules_skip_unparsed_arguments() -> None:
    assert _violations([_call("authenticate", 1, "{broken"), _call("send_email", 2)]) == [
        ("missing_required_step:authenticate", "send_email", 2)
    ]
    assert _violations([_call("confirm", 1), _call("delete_records", 2, "{broken")]) == []  # nothing to judge


def test_one_reason_per_rule_and_tool_naming_its_calls() -> None:
    calls = [_call("send_email", i) for i in range(1, 8)]
    result = score_case(CASE, parse_run_line("r", 1, orjson.dumps({"id": "c", "tool_calls": calls})), PREP)
    assert result.reasons[:2] == [
        "policy: missing_required_step:authenticate (send_email, calls 1, 2, 3, 4, 5 and 2 more)",
        "policy: over_budget (7 calls, budget 6)",
    ]


def test_no_policies_means_no_checker_and_no_verdict() -> None:
    assert not Preparer(EvalConfig.from_dict({"policies": {"must_not_call": ["x"]}})).has_policies
    plain = Preparer(EvalConfig())
    case = plain.prepare(
        DatasetCase.model_validate({"id": "c", "user_input": "x", "expected_tool_calls": [{"name": "a"}]})
    )
    run = parse_run_line("r", 1, orjson.dumps({"id": "c", "tool_calls": [_call("send_email")]}))
    assert score_case(case, run, plain).policy_violations is None


# --- the online scorer is the oracle ------------------------------------------------------------------------

TOOLS = ["authenticate", "send_email", "confirm", "delete_records", "list_records"]
ARGUMENTS = [{}, {"filter": {"id": 1}}, "{broken", '{"filter": 1}']
CALLS = st.lists(
    st.tuples(st.sampled_from(TOOLS), st.one_of(st.none(), st.integers(0, 3)), st.sampled_from(ARGUMENTS)),
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(calls=CALLS, failed=st.booleans())
def test_offline_verdicts_equal_the_online_scorers(calls: list[tuple[str, int | None, Any]], failed: bool) -> None:
    """For any call sequence, what ``Scorer.score`` records on the spans, call by call, is what offline reports
    (turns numbered as they first appear; a failed run's calls carry the error on every span)."""
    line = {"id": "c", "tool_calls": [_call(n, b, a) for n, b, a in calls], **({"error": "boom"} if failed else {})}
    run = parse_run_line("r", 1, orjson.dumps(line))
    scorer, history = Scorer(CONFIG.policy()), CallHistory()
    turns: dict[int, int] = {}
    online: list[tuple[str, str | None, int]] = []
    over = False
    for record, (_, batch, _) in zip(run.calls, calls, strict=True):
        if failed:
            record.error = ErrorEvidence(status_error=True, status_description="boom")
        turn = None if batch is None else turns.setdefault(batch, len(turns))
        score = scorer.score(record, history, batch=turn)
        online += [(v, score.name, score.step) for v in score.violations]
        over = over or bool(score.over_budget)
    if over:
        online.append(("over_budget", None, len(calls)))
    assert _violations(line["tool_calls"], **({"error": "boom"} if failed else {})) == online
