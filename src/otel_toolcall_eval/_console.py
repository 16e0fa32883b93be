"""The terminal the commands print to: rich's ``Console`` when the ``cli`` extra is installed, else plain text.

The core install (what the processor needs) has no rich: rich pulls pygments and markdown-it, ~13 MB, a third of
the core's size. The commands that need no other extra (``demo``, ``config``, ``completion``) print through
``new_console()`` either way; the others declare the ``cli`` extra (``extras.py``) and get rich. Markup is the
commands' one way to style text, so ``escape`` follows rich's grammar exactly (it is what rich's ``escape`` does)
and the plain console removes the tags the same grammar recognises: the text reads the same in both.
"""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from rich.console import Console

# rich's markup grammar (rich.markup.RE_TAGS and the pattern of rich.markup.escape)
_TAG = re.compile(r"(\\*)\[([a-z#/@][^[]*?)]")
_ESCAPABLE = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def escape(text: str) -> str:
    """``text`` with every ``[tag]`` escaped, so that neither rich nor the plain console reads it as markup."""
    text = _ESCAPABLE.sub(lambda m: f"{m[1]}{m[1]}\\{m[2]}", text)
    return text + "\\" if text.endswith("\\") and not text.endswith("\\\\") else text


def strip_markup(text: str) -> str:
    """``text`` as rich shows it, without styles (rich.markup's parse): tags removed, an escaped tag (``\\[b]``)
    and an escaped bracket outside a tag (``\\[``) shown as written without the backslash."""
    out: list[str] = []
    position = 0
    for match in _TAG.finditer(text):
        start, end = match.span()
        if start > position:
            out.append(text[position:start].replace("\\[", "["))
        backslashes, escaped = divmod(len(match[1]), 2)
        out.append("\\" * backslashes)
        if escaped:
            out.append(f"[{match[2]}]")
        position = end
    out.append(text[position:].replace("\\[", "["))
    return "".join(out)


class PlainConsole:
    """What stands in for rich's ``Console`` without the ``cli`` extra: ``print`` of markup strings, as text."""

    def __init__(self, stderr: bool = False, file: TextIO | None = None) -> None:
        self._stderr = stderr
        self._file = file

    @property
    def file(self) -> TextIO:
        return self._file or (sys.stderr if self._stderr else sys.stdout)

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", **_options: Any) -> None:
        """rich's keyword options (style, highlight, soft_wrap, ...) are about looks: ignored here."""
        text = sep.join(strip_markup(o) if isinstance(o, str) else str(o) for o in objects)
        self.file.write(text + end)
        self.file.flush()

    def print_json(self, text: str) -> None:
        self.print(json.dumps(json.loads(text), indent=2, ensure_ascii=False))


def have_rich() -> bool:
    try:
        import rich.console  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def new_console(stderr: bool = False) -> Console:
    """rich's Console, or a ``PlainConsole`` (typed as rich's: the commands that receive one only ``print``)."""
    if have_rich():
        from rich.console import Console

        return Console(stderr=stderr)
    return cast("Console", PlainConsole(stderr=stderr))
