"""The documentation site builds with ``mkdocs build --strict``: a broken link, an unknown anchor or a page missing
from the nav fails the suite (and so CI), as the reader would otherwise meet it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _nav_pages(nav: list[object]) -> list[str]:
    pages: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [str(value)]
    return pages


def test_every_page_is_in_the_nav_and_the_nav_has_the_four_sections() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    sections = [next(iter(e)) for e in config["nav"] if isinstance(e, dict)]
    assert sections[-4:] == ["Tutorials", "How-to guides", "Reference", "Explanation"]
    on_disk = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(_nav_pages(config["nav"])) == on_disk, "add each page to mkdocs.yml's nav, in its section"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its successor, on every build
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()
