"""Unknown-tool check: was the called name among the tools the model was offered?"""

from __future__ import annotations

from collections.abc import Container


def tool_known(name: str, available: Container[str] | None) -> bool | None:
    """None when no tool list is known: absence of evidence is not an unknown tool."""
    if available is None:
        return None
    return name in available
