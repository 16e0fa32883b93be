"""The JSON report: the summary blocks, the gate, and ``cases[]`` streamed from the spool, one case per line.

Written without holding the cases in memory; the file is one ordinary JSON document (and the next run's
``--baseline``).
"""

from __future__ import annotations

from pathlib import Path

import orjson

from otel_toolcall_eval.offline.runner import EvalResult


def write_json(result: EvalResult, path: str | Path) -> None:
    head = orjson.dumps(result.head(), option=orjson.OPT_INDENT_2)
    with open(path, "wb") as out:
        out.write(head[:-1].rstrip() + b',\n  "cases": [\n')  # reopen the object to append the case list
        pending = b""  # the separator owed before the next row: none before the first, ",\n" between rows
        for block in result.cases.row_blocks():
            # a block is whole rows, one per line: indent each, and put the commas between them
            rows = block[:-1].replace(b"\n", b",\n    ")
            out.write(pending + b"    " + rows)
            pending = b",\n"
        out.write(b"\n  ]\n}\n")
