"""The CLI's exit codes: 2 (with a message, never a traceback) for every input and OS error, 1 only for a failed
gate, and outputs written whole or not at all."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from otel_toolcall_eval._files import _umask, write_atomically
from otel_toolcall_eval.cli import main
from otel_toolcall_eval.demo import default_config_path
from otel_toolcall_eval.demo.agent import FAILURE_CLASSES
from otel_toolcall_eval.errors import ExitCode, ToolcallEvalError, UsageError
from otel_toolcall_eval.offline.runs import RunFileError
from otel_toolcall_eval.replay import ReplayInputError

from .helpers import GOOD, record_demo_traces, write_run

pytestmark = pytest.mark.usefixtures("wide_console")  # conftest.py


def test_exit_codes_are_named_once() -> None:
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 130]
    from otel_toolcall_eval.config import ConfigError
    from otel_toolcall_eval.dataset.errors import LocatedError
    from otel_toolcall_eval.errors import JudgeUncalibrated

    assert JudgeUncalibrated(["q: why"]).exit_code == ExitCode.JUDGE_UNCALIBRATED == 3
    assert ToolcallEvalError("x").exit_code == ExitCode.BAD_INPUT

    for error in (UsageError, ConfigError, LocatedError, RunFileError, ReplayInputError):
        assert issubclass(error, ToolcallEvalError), error


def test_commands_import_the_error_base_from_errors_not_from_cli() -> None:
    for module in Path(__file__).parents[1].joinpath("src/otel_toolcall_eval/commands").glob("*.py"):
        assert "from otel_toolcall_eval.cli import" not in module.read_text(), module.name


@pytest.mark.parametrize("flag", ["--html", "--junit", "--json", "--markdown"])
def test_unwritable_report_exits_2_not_1(
    tmp_path: Path, dataset: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path, GOOD)
    target = tmp_path / "missing-dir" / "report.out"
    assert main(["eval", "--dataset", str(dataset), "--runs", str(run), flag, str(target)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "report.out: cannot write" in err and "Traceback" not in err


def test_unwritable_replay_out_and_dataset_outputs_exit_2(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = record_demo_traces(tmp_path / "traces.jsonl", dict.fromkeys(FAILURE_CLASSES, 0.0), traces=2)
    nowhere = tmp_path / "missing-dir"
    assert main(["replay", str(traces), "--out", str(nowhere / "scored.jsonl")]) == 2
    assert "scored.jsonl: cannot write" in capsys.readouterr().err
    assert main(["dataset", "convert", str(dataset), str(nowhere / "cases.csv")]) == 2
    assert "cases.csv: cannot write" in capsys.readouterr().err
    assert main(["dataset", "template", "--out", str(nowhere / "t.jsonl")]) == 2
    assert "t.jsonl: cannot write" in capsys.readouterr().err
    assert main(["dataset", "schema", "--out", str(nowhere / "s.json")]) == 2
    assert "s.json: cannot write" in capsys.readouterr().err


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("previous")
    with pytest.raises(RuntimeError), write_atomically(target) as handle:
        handle.write("half a report")
        raise RuntimeError("rendering failed half-way")
    assert target.read_text() == "previous" and sorted(tmp_path.iterdir()) == [target]
    with write_atomically(target) as handle:
        handle.write("new")
    assert target.read_text() == "new" and sorted(tmp_path.iterdir()) == [target]
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()


def test_a_directory_as_report_path_exits_2(tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, GOOD)
    target = tmp_path / "a-directory"
    target.mkdir()
    assert main(["eval", "--dataset", str(dataset), "--runs", str(run), "--junit", str(target)]) == 2
    assert "a-directory: cannot write" in capsys.readouterr().err and target.is_dir()


def test_dataset_with_deep_json_exits_2_naming_the_line(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    rows[2]["expected_tool_calls"][0]["args"] = {"a": json.loads("[" * 300 + "]" * 300)}
    deep = tmp_path / "deep.jsonl"
    deep.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = write_run(tmp_path, GOOD)
    assert main(["eval", "--dataset", str(deep), "--runs", str(run)]) == 2
    err = capsys.readouterr().err
    assert "deep.jsonl:3: expected_tool_calls" in err and "deeper than" in err and "Traceback" not in err
    assert main(["dataset", "validate", str(deep)]) == 2
    assert "deep.jsonl:3: expected_tool_calls" in capsys.readouterr().err
    csv_path = tmp_path / "deep.csv"
    assert main(["dataset", "convert", str(deep), str(csv_path)]) == 2 and not csv_path.exists()


def test_run_file_with_deep_arguments_is_a_parse_failure_not_a_crash(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path, {k: v for k, v in GOOD.items() if k != "order-status"})
    deep = '{"order_id": ' + "[" * 1000 + "]" * 1000 + "}"  # orjson reads 1,024 levels; Python's json does not
    call = '{"id": "order-status", "tool_calls": [{"name": "get_order", "arguments": ' + deep + "}]}"
    run.write_text(run.read_text() + call + "\n")
    report = tmp_path / "report.json"
    assert main(["eval", "--dataset", str(dataset), "--runs", str(run), "--json", str(report)]) == 0  # no gate set
    case = next(c for c in json.loads(report.read_text())["cases"] if c["id"] == "order-status")
    assert case["parse_failures"] == 1 and case["passed"] is False
    assert "Traceback" not in capsys.readouterr().err


def test_harvest_to_an_unknown_format_exits_2_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failures = dict.fromkeys(FAILURE_CLASSES, 0.0)
    failures["must_not_call"] = 1.0
    traces = record_demo_traces(tmp_path / "traces.jsonl", failures, traces=2)
    out = tmp_path / "cases.txt"
    assert main(["harvest", str(traces), "--where", "violation = must_not_call", "--out", str(out)]) == 2
    assert "cases.txt: cannot tell the format" in capsys.readouterr().err and not out.exists()


def test_harvest_writes_both_outputs_or_neither(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failures = dict.fromkeys(FAILURE_CLASSES, 0.0)
    failures["must_not_call"] = 1.0
    traces = record_demo_traces(tmp_path / "traces.jsonl", failures, traces=2)
    out = tmp_path / "cases.jsonl"
    args = ["harvest", str(traces), "--where", "violation = must_not_call", "--out", str(out)]
    args += ["--config", str(default_config_path())]
    assert main([*args, "--runs-out", str(tmp_path / "missing-dir" / "runs.jsonl")]) == 2
    assert "runs.jsonl: cannot write" in capsys.readouterr().err
    assert not out.exists()  # the dataset was not written without its run file
    (tmp_path / "runs-dir").mkdir()
    assert main([*args, "--runs-out", str(tmp_path / "runs-dir")]) == 2
    assert "runs-dir: cannot write" in capsys.readouterr().err and not out.exists()
    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"id": "earlier", "tool_calls": []}\n')
    assert main([*args, "--runs-out", str(runs)]) == 0
    assert len(out.read_text().splitlines()) == 2 and len(runs.read_text().splitlines()) == 3  # appended
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases.jsonl", "runs-dir", "runs.jsonl", "traces.jsonl"]


def test_harvest_on_a_malformed_trace_file_exits_2_and_lenient_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failures = dict.fromkeys(FAILURE_CLASSES, 0.0)
    failures["must_not_call"] = 1.0
    traces = record_demo_traces(tmp_path / "traces.jsonl", failures, traces=2)
    traces.write_text(traces.read_text() + '{"data": [{"traceID": "ab", "spans": 5}]}\n')
    out = tmp_path / "cases.jsonl"
    args = ["harvest", str(traces), "--where", "violation = must_not_call", "--out", str(out)]
    args += ["--config", str(default_config_path())]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "traces.jsonl:2: data[0].spans: expected a list, got int" in err and "Traceback" not in err
    assert not out.exists()
    assert main([*args, "--lenient"]) == 0
    assert len(out.read_text().splitlines()) == 2
