"""Render the documentation's reference tables from the modules that define them (one source of truth).

``python -m otel_toolcall_eval._docs`` rewrites the tables between the ``<!-- table:NAME -->`` markers of every
page in ``PAGES``; ``tests/test_docs.py`` fails when a page and the code disagree.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from otel_toolcall_eval.attributes import SESSION_ATTRIBUTES, SPAN_ATTRIBUTES
from otel_toolcall_eval.conventions.builtin import BUILTIN
from otel_toolcall_eval.conventions.frameworks import FRAMEWORKS
from otel_toolcall_eval.metrics import METRICS


def attribute_table() -> str:
    rows = ["| attribute | type | on | meaning |", "|---|---|---|---|"]
    rows += [f"| `{a.name}` | {a.type} | {a.where} | {a.meaning} |" for a in SPAN_ATTRIBUTES + SESSION_ATTRIBUTES]
    return "\n".join(rows)


def metric_table() -> str:
    rows = ["| metric | kind | unit | labels | Prometheus name | meaning |", "|---|---|---|---|---|---|"]
    rows += [f"| `{m.name}` | {m.kind} | `{m.unit}` | {m.labels} | `{m.prometheus}` | {m.meaning} |" for m in METRICS]
    return "\n".join(rows)


def convention_table() -> str:
    rows = ["| convention | detected by | tool name | arguments | result |", "|---|---|---|---|---|"]
    for c in BUILTIN:
        detect = (
            f"span name `{'`/`'.join(sorted(c.detect_values))}`"
            if not c.detect_key
            else (f"`{c.detect_key}` = `{'`/`'.join(sorted(c.detect_values))}`")
        )
        name = " or ".join(f"`{k}`" for k in c.name_keys) or "span name"
        args = " or ".join(f"`{k}`" for k in c.argument_keys)
        result = " or ".join(f"`{k}`" for k in c.result_keys)
        rows.append(f"| `{c.name}` | {detect} | {name} | {args} | {result} |")
    return "\n".join(rows)


def framework_table() -> str:
    rows = [
        "| framework | instrumentation | scored in its default mode | the other mode | scored there | test |",
        "|---|---|---|---|---|---|",
    ]
    for f in FRAMEWORKS:
        rows.append(f"| {f.name} | {f.instrumentation} | {f.default} | {f.setting} | {f.other} | `{f.test}` |")
    return "\n".join(rows)


TABLES = {
    "attributes": attribute_table,
    "metrics": metric_table,
    "conventions": convention_table,
    "frameworks": framework_table,
}


# which page (relative to the repository root) carries which generated tables
PAGES: dict[str, tuple[str, ...]] = {
    "README.md": ("attributes", "metrics", "conventions"),
    "docs/frameworks.md": ("frameworks",),
}


def render(text: str, names: tuple[str, ...] = tuple(TABLES)) -> str:
    for name in names:
        pattern = re.compile(rf"(<!-- table:{name} -->\n)(?:.*?\n)?(<!-- /table:{name} -->)", re.S)
        m = pattern.search(text)
        if m is None:
            raise ValueError(f"the page lacks the <!-- table:{name} --> markers")
        text = text[: m.start()] + m.group(1) + TABLES[name]() + "\n" + m.group(2) + text[m.end() :]
    return text


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    for page, tables in PAGES.items():
        path = root / page
        path.write_text(render(path.read_text(), tables))
