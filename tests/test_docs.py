"""The README stays true to the code: tables are generated, the example config is the demo's, commands exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from otel_toolcall_eval import _docs
from otel_toolcall_eval.demo import default_config_path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("page", sorted(_docs.PAGES))
def test_reference_tables_match_the_code(page: str) -> None:
    text = (ROOT / page).read_text()
    assert _docs.render(text, _docs.PAGES[page]) == text, "run: python -m otel_toolcall_eval._docs"


def test_readme_opens_with_the_two_setup_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_example_config_is_the_demo_config() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", README, re.S)
    assert default_config_path().read_text() in blocks


def test_every_attribute_written_is_documented() -> None:
    from otel_toolcall_eval import attributes as A

    written = {v for k, v in vars(A).items() if k.isupper() and isinstance(v, str) and v.startswith(A.PREFIX)}
    documented = {a.name for a in A.SPAN_ATTRIBUTES + A.JUDGE_ATTRIBUTES + A.SESSION_ATTRIBUTES + A.GUARD_ATTRIBUTES}
    # the session record's `gen_ai.evaluation.name` value, not an attribute name
    assert written - {A.PREFIX, A.SESSION_EVALUATION_NAME} <= documented


def test_every_yaml_example_in_the_readme_is_a_valid_config() -> None:
    import yaml

    from otel_toolcall_eval import EvalConfig

    blocks = re.findall(r"```yaml\n(.*?)```", README, re.S)
    assert len(blocks) >= 4
    for block in blocks:
        EvalConfig.from_dict(yaml.safe_load(block), source="README.md")
