"""``make pictures`` keeps working: each picture of the documentation is taken again, into a scratch directory,
from the real command line and pages (Debian's chromium for the two pages, as the HTML report's own test uses)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
needs_chromium = pytest.mark.skipif(
    shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists(),
    reason="Debian's chromium is not installed (apt-get install chromium)",
)


@pytest.fixture
def pictures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("pictures", ROOT / "scripts" / "pictures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "OUT", tmp_path)
    return module


def test_the_scored_trace_shows_the_verdict_and_the_scores(pictures: ModuleType) -> None:
    svg = pictures.scored_trace().read_text()
    for shown in ("trace.composite_ok", "False", "must_not_call", "repeated_failure", "malformed_call"):
        assert shown in svg


@needs_chromium
def test_the_page_pictures_are_taken_at_1400_by_1000(pictures: ModuleType, tmp_path: Path) -> None:
    for take in (pictures.html_report, pictures.label_page):
        work = tmp_path / take.__name__
        work.mkdir()
        with Image.open(take(work)) as image:
            assert image.size == (1400, 1000)
            darkest, lightest = image.convert("L").getextrema()
            assert lightest - darkest > 100  # drawn, not a blank page
