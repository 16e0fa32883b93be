"""CLI conventions: ``python -m``, a description and an example in every subcommand's help (each example parses),
exit codes listed from their one definition, and a completion script generated from the parser."""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from otel_toolcall_eval._docs import _commands
from otel_toolcall_eval.cli import EXAMPLES, build_parser, main
from otel_toolcall_eval.errors import EXIT_CODE_MEANINGS, ExitCode

COMMANDS = [(" ".join(path), parser) for path, _, parser in _commands(build_parser(), ())]


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_subcommand_has_a_description_and_an_example_that_parses(
    path: str, parser: argparse.ArgumentParser
) -> None:
    assert parser.description, path
    assert parser.epilog and "example:" in parser.epilog, path
    words = shlex.split(EXAMPLES[path])
    assert words[0] == "otel-toolcall-eval"
    build_parser().parse_args(words[1:])  # SystemExit (fails the test) if the example is not valid usage


def test_every_exit_code_has_a_meaning_and_help_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(EXIT_CODE_MEANINGS) == set(ExitCode)
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for code in ExitCode:
        assert f"  {code.value:<4} {EXIT_CODE_MEANINGS[code]}" in out


def test_python_dash_m_runs_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "otel_toolcall_eval", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.startswith("otel-toolcall-eval ")


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completion_completes_commands_subcommands_and_options(tmp_path: Path) -> None:
    script = tmp_path / "complete.sh"
    done = subprocess.run(
        [sys.executable, "-m", "otel_toolcall_eval", "completion", "bash"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    script.write_text(done.stdout)
    probe = (
        f"source {script}\n"
        't() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _otel_toolcall_eval; echo "${COMPREPLY[*]}"; }\n'
        "t otel-toolcall-eval ju\n"
        't otel-toolcall-eval judge ""\n'
        "t otel-toolcall-eval eval --config x.yaml --mark\n"
    )
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.splitlines() == ["judge", "--help check agreement run queue label", "--markdown"]


def test_zsh_gets_the_same_function_through_bashcompinit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "zsh"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("autoload -U +X bashcompinit && bashcompinit\n") and "complete -o default -F" in out
