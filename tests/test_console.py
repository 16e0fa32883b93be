"""The plain console (no rich) shows what rich shows, without styles; ``escape`` is rich's own escaping."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st
from rich.markup import escape as rich_escape
from rich.text import Text

from otel_toolcall_eval._console import PlainConsole, escape, strip_markup

TEXT = st.text(alphabet=st.sampled_from("ab[]/\\#@ =x1"), max_size=30)


@given(TEXT)
def test_escape_is_richs(text: str) -> None:
    assert escape(text) == rich_escape(text)


@given(TEXT)
def test_escaped_text_reads_as_itself_in_both(text: str) -> None:
    shown = strip_markup(escape(text))
    assert shown == Text.from_markup(escape(text)).plain
    if "\\" not in text:  # rich's own escape does not round-trip backslashes (a trailing one, "\\[")
        assert shown == text


@given(TEXT)
def test_any_markup_reads_as_rich_reads_it(text: str) -> None:
    try:
        plain = Text.from_markup(text).plain
    except Exception:  # rich rejects some (a closing tag with nothing open): no reading to compare with
        return
    assert strip_markup(text) == plain


def test_markup_is_removed_as_rich_removes_it() -> None:
    for markup in ("[bold red]fail[/] ok", "[green]a[/green] \\[b] c", "x [link=http://a]y[/link]", "[dim]z[/]"):
        assert strip_markup(markup) == Text.from_markup(markup).plain


def test_plain_console_prints_text_and_json() -> None:
    out = io.StringIO()
    console = PlainConsole(file=out)
    console.print("[bold]a[/]", "b", highlight=False, soft_wrap=True)
    console.print_json('{"k": [1]}')
    assert out.getvalue() == 'a b\n{\n  "k": [\n    1\n  ]\n}\n'
