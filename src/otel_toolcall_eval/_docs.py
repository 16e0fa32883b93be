"""Render the documentation's reference tables from the modules that define them (one source of truth).

``python -m otel_toolcall_eval._docs`` rewrites the tables between the ``<!-- table:NAME -->`` markers of every
page in ``PAGES``; ``tests/test_docs.py`` fails when a page and the code disagree.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from otel_toolcall_eval.attributes import GUARD_ATTRIBUTES, SESSION_ATTRIBUTES, SPAN_ATTRIBUTES
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.conventions.builtin import BUILTIN
from otel_toolcall_eval.conventions.frameworks import FRAMEWORKS
from otel_toolcall_eval.conventions.shapes import SHAPES
from otel_toolcall_eval.dataset.models import JSON_COLUMNS, DatasetCase, ExpectedCall, TrajectoryOptions
from otel_toolcall_eval.errors import EXIT_CODE_MEANINGS, ExitCode
from otel_toolcall_eval.guard.record import GUARD_METRICS
from otel_toolcall_eval.judge.emit import JUDGE_METRICS
from otel_toolcall_eval.judge.emit import NOT_BY_SOURCE as JUDGE_NOT_BY_SOURCE
from otel_toolcall_eval.offline import docs as offline_docs
from otel_toolcall_eval.offline import runs
from otel_toolcall_eval.online import LAYERS as ONLINE_LAYERS
from otel_toolcall_eval.online.metrics import METRICS, NOT_BY_SOURCE, MetricDoc
from otel_toolcall_eval.serve.metrics import NOT_BY_SOURCE as SERVE_NOT_BY_SOURCE


def attribute_table() -> str:
    rows = ["| attribute | type | on | meaning |", "|---|---|---|---|"]
    rows += [f"| `{a.name}` | {a.type} | {a.where} | {a.meaning} |" for a in SPAN_ATTRIBUTES + SESSION_ATTRIBUTES]
    return "\n".join(rows)


def metric_table(metrics: tuple[MetricDoc, ...] = METRICS) -> str:
    rows = ["| metric | kind | unit | labels | Prometheus name | meaning |", "|---|---|---|---|---|---|"]
    rows += [f"| `{m.name}` | {m.kind} | `{m.unit}` | {m.labels} | `{m.prometheus}` | {m.meaning} |" for m in metrics]
    return "\n".join(rows)


def not_by_source_table() -> str:
    """The metrics without the source labels, and why (``online.metrics.NOT_BY_SOURCE``, the judge's, the
    service's)."""
    rows = ["| metric | why it carries no service, agent or version |", "|---|---|"]
    rows += [f"| `{name}` | {why} |" for name, why in NOT_BY_SOURCE.items()]
    rows += [f"| `toolcall_eval.judge.*` | {JUDGE_NOT_BY_SOURCE} |"]
    rows += [f"| `toolcall_eval.serve.*` | {SERVE_NOT_BY_SOURCE} |"]
    return "\n".join(rows)


def guard_attribute_table() -> str:
    rows = ["| attribute | type | on | meaning |", "|---|---|---|---|"]
    rows += [f"| `{a.name}` | {a.type} | {a.where} | {a.meaning} |" for a in GUARD_ATTRIBUTES]
    return "\n".join(rows)


def guard_metric_table() -> str:
    rows = ["| metric | kind | labels | Prometheus name | meaning |", "|---|---|---|---|---|"]
    rows += [f"| `{name}` | {kind} | {labels} | `{prom}` | {meaning} |" for name, kind, labels, prom, meaning in
             GUARD_METRICS]  # fmt: skip
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


def shape_table() -> str:
    """The shape table (``conventions/shapes.py``): per instrumentation scope, where it keeps what, its switch."""
    rows = [
        "| instrumentation scope | instrumentation | definitions | content switch | cannot record |",
        "|---|---|---|---|---|",
    ]
    for s in SHAPES:
        cells = (s.instrumentation, s.definitions or "-", s.content_switch or "-", s.cannot_record or "-")
        rows.append(f"| `{s.scope}` | " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


def _cell(text: str) -> str:
    """One table cell: one line, pipes escaped, reStructuredText's double backticks as Markdown's single ones."""
    return re.sub(r"``([^`]+)``", r"`\1`", " ".join(text.split())).replace("|", "\\|")


def _strip(annotation: Any) -> Any:
    """The annotation without ``Annotated[...]`` (validators are no part of the type a user writes)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _sections(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """The config sections a field holds, each with the key suffix it is written under: a section (``""``), a
    list of them (``"[]"``) or a mapping of them (``".<name>"``)."""
    annotation = _strip(annotation)
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    if origin in (typing.Union, types.UnionType):
        return [s for a in typing.get_args(annotation) for s in _sections(a)]
    if origin is list:
        return [("[]", m) for _, m in _sections(typing.get_args(annotation)[0])]
    if origin is dict:
        return [(".<name>", m) for _, m in _sections(typing.get_args(annotation)[1])]
    return []


def _type(annotation: Any) -> str:
    annotation = _strip(annotation)
    args = tuple(_strip(a) for a in typing.get_args(annotation))
    if typing.get_origin(annotation) is list and args and _sections(args[0]):
        return "list of objects"
    if typing.get_origin(annotation) is dict and len(args) == 2 and _sections(args[1]):
        return "object of objects"
    if _sections(annotation):
        return "section"
    return offline_docs._type(annotation)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "-"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, list) and value and all(isinstance(v, BaseModel) and hasattr(v, "name") for v in value):
        value = [v.name for v in value]  # e.g. the built-in judge questions, by name
    text = json.dumps(value, default=str)
    if len(text) <= 60 or (isinstance(value, list) and len(text) <= 160):
        return f"`{text}`"
    return f"{len(value)} entries" if isinstance(value, list | dict) else "-"


def _meaning(field: FieldInfo, sections: list[tuple[str, type[BaseModel]]]) -> str:
    if field.description:
        return field.description
    docs = [inspect.getdoc(m) or "" for _, m in sections if m.__doc__]
    return docs[0].split("\n\n")[0] if docs else ""


def config_rows(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    """Every key of the config file, depth first: key, type, default, meaning."""
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        sections = _sections(field.annotation)
        yield key, _type(field.annotation), _default(field), _meaning(field, sections)
        for suffix, section in sections:
            if section is not model:
                yield from config_rows(section, f"{key}{suffix}.")


def config_table() -> str:
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{k}` | {_cell(t)} | {_cell(d)} | {_cell(m)} |" for k, t, d, m in config_rows(EvalConfig)]
    return "\n".join(rows)


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), helps.get(name, ""), sub
                yield from _commands(sub, (*path, name))


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`" + (" ..." if action.nargs in ("*", "+") else "")
    metavar = ""
    if action.nargs != 0:
        metavar = " " + (
            "{" + ",".join(map(str, action.choices)) + "}"
            if action.choices
            else str(action.metavar or action.dest.upper())
        )
    return ", ".join(f"`{o}{metavar}`" for o in action.option_strings)


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "default": action.default}
    if action.default not in (None, False, argparse.SUPPRESS, []) and "default" not in text and action.nargs != 0:
        text += f" (default: `{action.default}`)"
    return text


def cli_reference() -> str:
    """Every command and option of ``otel-toolcall-eval``, from the argparse parser the command line runs."""
    from otel_toolcall_eval.cli import build_parser

    out = ["Exit codes (`otel_toolcall_eval.errors.ExitCode`):", "", "| code | name | meaning |", "|---|---|---|"]
    out += [f"| {c.value} | `{c.name}` | {_cell(EXIT_CODE_MEANINGS[c])} |" for c in ExitCode]
    root = build_parser()
    for path, summary, parser in [((), "", root), *_commands(root, ())]:
        out += ["", f"## `{' '.join(('otel-toolcall-eval', *path))}`", ""]
        sentence = summary[0].upper() + summary[1:] + ("" if summary.endswith(".") else ".") if summary else ""
        if sentence:
            out += [sentence, ""]
        if parser.description and parser.description.strip() != sentence:  # cli.py makes it the summary when absent
            out += [re.sub(r"``([^`]+)``", r"`\1`", parser.description.strip()), ""]
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            names = ", ".join(f"`{n}`" for n in subs[0].choices)
            out += [f"Subcommands: {names}.", ""]
        rows = [a for a in parser._actions if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)]
        if rows:
            out += ["| argument | meaning |", "|---|---|"]
            out += [f"| {_argument(a)} | {_cell(_help(a))} |" for a in rows]
            out.append("")
        if parser.epilog and path:  # the root's lists the exit codes: the table above
            out += ["```text", textwrap.dedent(parser.epilog).strip(), "```", ""]  # as --help prints it
        while out[-1] == "":
            out.pop()
    return "\n".join(out)


def online_layout_table() -> str:
    """The online package's modules (``online.LAYERS``), top layer first, each with its docstring's first
    paragraph."""
    rows = ["| layer | module | what it is |", "|---|---|---|"]
    for i, layer in enumerate(ONLINE_LAYERS, 1):
        for module in layer:
            doc = importlib.import_module(f"otel_toolcall_eval.online.{module}").__doc__ or ""
            summary = doc.strip().split("\n\n")[0]
            rows.append(f"| {i} | `online/{module}.py` | {_cell(summary)} |")
    return "\n".join(rows)


def _run_file_text() -> str:
    doc = inspect.getdoc(runs) or ""
    return re.sub(r"``([^`]+)``", r"`\1`", doc.split("\n\n", 1)[1])


def _signature(obj: Callable[..., Any]) -> str:
    """The signature with the annotations resolved and each type by its own name (``ReadableSpan``, not
    ``opentelemetry.sdk.trace.ReadableSpan``)."""
    try:
        text = str(inspect.signature(obj, eval_str=True))
    except (NameError, TypeError, ValueError):  # a forward reference only a type checker resolves
        text = str(inspect.signature(obj))
    parts = re.split(r"""('[^']*'|"[^"]*")""", text)  # string defaults stay as they are
    return "".join(
        p if i % 2 else re.sub(r"\b(?:[a-z_][a-z0-9_]*\.)+([A-Za-z_]\w*)", r"\1", p) for i, p in enumerate(parts)
    )


def _summary(obj: object) -> str:
    first = (inspect.getdoc(obj) or "").split("\n\n")[0]
    return _cell(re.sub(r":\w+:`~?([^`]+)`", r"`\1`", first))  # Sphinx roles (the SDK's docstrings) as code


def api_reference() -> str:
    """Every name of ``otel_toolcall_eval.__all__``: its signature, what its docstring says first, and the public
    methods its class defines itself (not the ones pydantic or the SDK's base classes give it)."""
    import otel_toolcall_eval

    out: list[str] = []
    for name in otel_toolcall_eval.__all__:
        obj = getattr(otel_toolcall_eval, name)
        if not callable(obj):
            out += [f"## `{name}`", "", f"The installed version, a `{type(obj).__name__}`.", ""]
            continue
        model = isinstance(obj, type) and issubclass(obj, BaseModel)
        if isinstance(obj, type) and (issubclass(obj, BaseException) or getattr(obj, "_is_protocol", False)):
            head = f"class {name}({', '.join(b.__name__ for b in obj.__bases__ if b is not typing.Generic)})"
        else:
            head = f"{name}(...)" if model else f"{name}{_signature(obj)}"
        out += [f"## `{name}`", "", f"```python\n{head}\n```", "", _summary(obj), ""]
        if model:
            out += ["Its fields are the keys of the [configuration](config.md).", ""]
        if isinstance(obj, type):
            for attr, member in vars(obj).items():
                function = member.__func__ if isinstance(member, classmethod | staticmethod) else member
                if attr.startswith(("_", "model_")) or not inspect.isfunction(function):
                    continue
                bound = isinstance(member, classmethod | staticmethod)  # the class's attribute has no cls
                signature = _signature(getattr(obj, attr) if bound else function)
                signature = signature.replace("(self, ", "(", 1).replace("(self)", "()", 1)
                summary = _summary(function)
                out += [f"- `{name}.{attr}{signature}`" + (f": {summary}" if summary else "")]
            if out[-1].startswith("- "):
                out.append("")
    return "\n".join(out).rstrip()


TABLES: dict[str, Callable[[], str]] = {
    "attributes": attribute_table,
    "metrics": metric_table,
    "metrics-not-by-source": not_by_source_table,
    "judge-metrics": lambda: metric_table(JUDGE_METRICS),
    "conventions": convention_table,
    "frameworks": framework_table,
    "shapes": shape_table,
    "config": config_table,
    "cli": cli_reference,
    "dataset-case": lambda: offline_docs.fields_table(DatasetCase, json_columns=JSON_COLUMNS),
    "dataset-call": lambda: offline_docs.fields_table(ExpectedCall),
    "dataset-trajectory": lambda: offline_docs.fields_table(TrajectoryOptions),
    "run-file": _run_file_text,
    "offline-metrics": offline_docs.metrics_table,
    "tool-metrics": offline_docs.tool_metrics_table,
    "guard-attributes": guard_attribute_table,
    "guard-metrics": guard_metric_table,
    "python-api": api_reference,
    "online-layout": online_layout_table,
}


# which page (relative to the repository root) carries which generated tables
PAGES: dict[str, tuple[str, ...]] = {
    "docs/frameworks.md": ("frameworks", "shapes"),
    "docs/reference/attributes.md": ("attributes",),
    "docs/reference/metrics.md": ("metrics", "metrics-not-by-source"),
    "docs/reference/conventions.md": ("conventions",),
    "docs/reference/config.md": ("config",),
    "docs/reference/cli.md": ("cli",),
    "docs/reference/formats.md": ("dataset-case", "dataset-call", "dataset-trajectory", "run-file"),
    "docs/explanation/formulas.md": ("offline-metrics", "tool-metrics"),
    "docs/guardrail.md": ("guard-attributes", "guard-metrics"),
    "docs/judge.md": ("judge-metrics",),
    "docs/reference/python-api.md": ("python-api",),
    "docs/explanation/online-pipeline.md": ("online-layout",),
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
