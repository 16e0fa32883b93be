"""Unknown-tool check: is the called name among the agent's tools?

The agent's tools are the ones offered in the trace (or a dataset case's ``available_tools``) together with the
configured ones (see ``engine.call`` for why both count). No list at all is no verdict: absence of evidence is
not an unknown tool.
"""

from __future__ import annotations

from collections.abc import Container


def tool_known(name: str, offered: Container[str] | None, configured: Container[str] | None = None) -> bool | None:
    """True when ``name`` is offered or configured; None when neither list is known (an empty one is unknown)."""
    if offered:
        return name in offered or (configured is not None and name in configured)
    if configured:
        return name in configured
    return None
