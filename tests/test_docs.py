"""The documentation stays true to the code: reference pages are generated, the example config is the demo's,
every config example loads, the README's quickstart runs as written and the commands it opens with exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from otel_toolcall_eval import _docs
from otel_toolcall_eval.demo import default_config_path
from tests.helpers import COMPILED

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# the pages written for the site (the older long pages have their own tests: test_judge_config, test_dataset, ...)
SITE_PAGES = sorted(
    p for d in ("tutorials", "how-to", "reference", "explanation") for p in (ROOT / "docs" / d).glob("*.md")
)
PAGES = [ROOT / "README.md", ROOT / "docs" / "index.md", *SITE_PAGES]


@pytest.mark.parametrize("page", sorted(_docs.PAGES))
def test_reference_pages_match_the_code(page: str) -> None:
    text = (ROOT / page).read_text()
    assert _docs.render(text, _docs.PAGES[page]) == text, "run: python -m otel_toolcall_eval._docs"


def test_a_stale_page_is_detected() -> None:
    page = (ROOT / "docs" / "reference" / "config.md").read_text()
    stale = page.replace("| `limits.max_traces` |", "| `limits.max_trace` |")
    assert stale != page and _docs.render(stale, ("config",)) == page


def test_readme_opens_with_the_two_setup_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_readme_stays_short() -> None:
    assert len(README.encode()) <= 10 * 1024


def test_the_readme_quickstart_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first Python block needs no config file; it builds a provider whose processor scores tool spans."""
    from opentelemetry import trace

    from otel_toolcall_eval import ToolCallEvalProcessor

    block = re.search(r"```python\n(.*?)```", README, re.S)
    assert block is not None and "EvalConfig" not in block.group(1)
    monkeypatch.setattr(trace, "set_tracer_provider", lambda provider: None)  # leave the global provider alone
    namespace: dict[str, object] = {}
    exec(compile(block.group(1), "README.md", "exec"), namespace)
    provider = namespace["provider"]
    processors = provider._active_span_processor._span_processors  # type: ignore[attr-defined]
    assert [type(p) for p in processors] == [ToolCallEvalProcessor]
    provider.shutdown()  # type: ignore[attr-defined]


def test_example_config_is_the_demo_config() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "reference" / "config.md").read_text(), re.S)
    assert default_config_path().read_text() in blocks


def test_every_attribute_written_is_documented() -> None:
    from otel_toolcall_eval import attributes as A

    written = {v for k, v in vars(A).items() if k.isupper() and isinstance(v, str) and v.startswith(A.PREFIX)}
    documented = {a.name for a in A.SPAN_ATTRIBUTES + A.JUDGE_ATTRIBUTES + A.SESSION_ATTRIBUTES + A.GUARD_ATTRIBUTES}
    # the session record's `gen_ai.evaluation.name` value, not an attribute name
    assert written - {A.PREFIX, A.SESSION_EVALUATION_NAME} <= documented


def test_every_config_field_has_a_meaning() -> None:
    from otel_toolcall_eval.config import EvalConfig

    missing = [key for key, _, _, meaning in _docs.config_rows(EvalConfig) if not meaning]
    assert missing == [], "give these fields a Field(description=...): it is their row in docs/reference/config.md"


def test_every_yaml_example_is_a_valid_config() -> None:
    import yaml

    from otel_toolcall_eval import EvalConfig

    blocks = [(p, b) for p in PAGES for b in re.findall(r"```yaml\n(.*?)```", p.read_text(), re.S)]
    assert len(blocks) >= 5
    for page, block in blocks:
        EvalConfig.from_dict(yaml.safe_load(block), source=str(page.relative_to(ROOT)))


def test_every_link_of_the_readme_reaches_a_file() -> None:
    """The README is not part of the site (whose strict build checks the pages' links), so its links are checked
    here: every relative target exists."""
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    relative = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert relative and [t for t in relative if not (ROOT / t).exists()] == []


@pytest.mark.skipif(COMPILED, reason="the walk is counted on the interpreted build (compiled calls are unseen)")
def test_the_online_pipeline_page_states_the_span_walk_as_measured() -> None:
    """docs/explanation/online-pipeline.md's "now" rows are what ``benchmarks/span_walk.py`` counts (deterministic:
    the same code, the same walk)."""
    from benchmarks.span_walk import layer_of_modules, walk_one_tool_span

    page = (ROOT / "docs" / "explanation" / "online-pipeline.md").read_text()
    block = re.search(r"<!-- walk:now -->\n(.*?)<!-- /walk:now -->", page, re.S)
    assert block is not None
    for label, valid in (("valid arguments", True), ("invalid arguments", False)):
        walk = walk_one_tool_span(valid=valid)
        got = walk.summary(layer_of_modules(walk.stays))
        row = f"| {label} | {got['stays']} | {got['modules']} | {got['climbs']} | {got['returns']} |"
        assert row in block.group(1), f"measured: {row}"
