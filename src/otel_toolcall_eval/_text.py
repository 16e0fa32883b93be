"""Untrusted text (tool names, error messages, ids from traces and run files) made safe for where it is shown.

A run file's error text ends up in a pull-request comment and in a CI log: in Markdown it must not close the
report's ``<details>``, open an HTML comment that swallows the rest, load a remote image (a tracking pixel) or
ping people with @mentions; on a terminal it must not carry escape sequences (clear the screen, retitle the
window, fake a green verdict). Rich escapes its own markup (``rich.markup.escape``) but passes ESC through.
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final) and OSC (ESC ] ... BEL or ST) sequences, any other ESC pair, then the remaining C0/C1
# controls and DEL. Tab and newline stay (messages list several errors on their own lines).
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: object) -> str:
    """``text`` without escape sequences or control characters (tab and newline kept)."""
    value = str(text)
    if value.isprintable():  # the usual case: one C-level scan
        return value
    return _CONTROLS.sub("", _ESCAPES.sub("", value))


# What could turn text into markup that does something in a table cell: a code span, a link or an image
# (``[`` and ``]``: ``![x](http://...)`` would load a remote image), the cell separator, and the backslash
# itself. Emphasis characters stay as they are (``get_order`` reads as written; intraword ``_`` is not
# emphasis in GitHub's Markdown). ``<`` and ``&`` become entities: no tag, comment or entity survives (a lone
# ``>`` starts nothing inside a cell, so ``a > b`` stays readable in the source).
_MD_PUNCT = re.compile(r"([\\`\[\]|])")
_HTML = {"&": "&amp;", "<": "&lt;"}
_HTML_RE = re.compile(r"[&<]")
_MENTION = re.compile(r"@(?=[A-Za-z0-9_-])")  # @user, @org/team: a zero-width space breaks the mention


def markdown_text(text: object) -> str:
    """Plain text in a Markdown table cell, shown as written: no HTML, links, images, mentions or line breaks."""
    value = _one_line(text)
    value = _HTML_RE.sub(lambda m: _HTML[m.group()], value)
    value = _MD_PUNCT.sub(r"\\\1", value)
    return _MENTION.sub("@&#8203;", value)


def markdown_code(text: object) -> str:
    """Text for inside a code span in a table cell (``\\`...\\```): nothing in it is markup, but a backtick would
    end the span and a pipe the cell."""
    return _one_line(text).replace("`", "'").replace("|", "\\|")


def _one_line(text: object) -> str:
    value = terminal_safe(text)
    return value.replace("\r\n", " ").replace("\n", " ").replace("\r", " ").replace("\t", " ")
