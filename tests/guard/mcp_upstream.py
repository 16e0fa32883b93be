"""The MCP server behind the guard's proxy in tests/guard/test_mcp.py: a real FastMCP server whose tools append
their name to the file named by ``GUARD_TEST_LOG`` when they run, so a test can tell which calls executed.

``python tests/guard/mcp_upstream.py`` serves stdio; ``... http PORT`` serves streamable HTTP on 127.0.0.1.
"""

from __future__ import annotations

import os
import sys

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError

mcp = FastMCP("records")


def _ran(name: str) -> None:
    with open(os.environ["GUARD_TEST_LOG"], "a", encoding="utf-8") as log:
        log.write(name + "\n")


@mcp.tool
def search(q: str) -> str:
    """Search the records."""
    _ran("search")
    if q == "fail":
        raise ToolError("index unavailable")
    return f"3 records match {q}"


@mcp.tool
def delete_all() -> str:
    """Delete every record."""
    _ran("delete_all")
    return "deleted"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False)
    else:
        mcp.run(transport="stdio", show_banner=False)
