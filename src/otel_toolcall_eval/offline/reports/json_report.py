"""The JSON report: the summary blocks, the gate, and ``cases[]`` streamed from the spool, one case per line.

Written without holding the cases in memory; the file is one ordinary JSON document (and the next run's
``--baseline``).
"""

from __future__ import annotations

from pathlib import Path

import orjson

from otel_toolcall_eval.offline.result import EvalResult


def write_json(result: EvalResult, path: str | Path) -> None:
    head = orjson.dumps(result.head(), option=orjson.OPT_INDENT_2)
    with open(path, "wb") as out:
        out.write(head[:-1].rstrip() + b',\n  "cases": [\n')  # reopen the object to append the case list
        result.cases.copy_rows(out)  # spooled as this list's lines already
        out.write(b"\n  ]\n}\n")
