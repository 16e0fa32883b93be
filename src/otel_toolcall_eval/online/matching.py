"""Request matching: the calls a trace's model turns requested, until tool spans answer them.

A sub-record of a trace's state (``TraceState.requests``), made only when it is needed: by the first model turn
that requests calls, or by the first tool span that ran before any request (it is remembered as answered: its
request may still come). A trace of plain spans, or of model turns that requested nothing, has none. Every method
runs under the trace's lock (``TraceState.lock``).

Model turns add their requests here (``add_turn``); calls claim them in the call stage (``call.claim_request``: the
turn, or parallel batch, that issued the call, beside the arguments the model sent for a call whose span records
none, ``call_arguments``), under the same lock. What it tells the verdict: the requested calls no tool span
answered (``unexecuted_calls``) and those of tools nothing lists (``unknown_tool_requests``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from otel_toolcall_eval import _json
from otel_toolcall_eval.records import ToolDefinition


@dataclass(slots=True)
class Requests:
    """The requests of one trace (bounded: ``max_entries``, the trace's ``limits.max_calls_per_trace``)."""

    turns: int = 0  # model turns that requested calls
    call_batches: dict[str, int] = field(default_factory=dict)
    # tool name -> the turns of its unclaimed requests, oldest first (lists, not deques: a deque is ~600 bytes and a
    # trace rarely has more than a few requests of one tool; emptied entries are deleted)
    pending_names: dict[str, list[int]] = field(default_factory=dict)
    call_names: dict[str, str] = field(default_factory=dict)  # requested call id -> tool name, until answered
    # requested call id -> the arguments the model sent (JSON text within ``limits.max_argument_bytes``), until a tool
    # span of that id claims them because it records none of its own
    call_arguments: dict[str, str] | None = None
    unknown_replies: set[str] | None = None  # requested call ids the framework answered "unknown tool" (rare)
    # tool spans scored before any turn requested them (the Vercel AI SDK's legacy spans: a model call's span ends
    # after the tools it asked for; a JS span clock's millisecond skew): their call ids; and, for remote-parented
    # ones (another service's, its own ids), per tool name how many no request has matched yet. The later request
    # is answered already.
    answered_early: set[str] | None = None
    early_names: dict[str, int] | None = None
    identified: bool = False  # a turn requested calls by id: a tool span with an unknown id claims none by name

    def add_requested_arguments(self, arguments: dict[str, Any], max_entries: int, max_bytes: int) -> None:
        stored = self.call_arguments
        if stored is None:
            stored = self.call_arguments = {}
        for call_id, value in arguments.items():
            text = value if isinstance(value, str) else _json.dumps(value)
            if len(stored) < max_entries and len(text) <= max_bytes:  # oversized: left unrecorded, not cut
                stored[call_id] = text

    def add_turn(self, calls: list[tuple[str | None, str | None]], max_entries: int) -> None:
        """One model turn that requested tool calls: they form one parallel batch."""
        self.turns += 1
        if len(self.call_batches) >= max_entries:
            return
        early = self.answered_early
        names = self.early_names
        for call_id, name in calls:
            if early is not None and call_id is not None and call_id in early:
                early.discard(call_id)
                continue
            if names and name is not None and self._spend_early(name):
                continue  # a span of that name ran before this request, under an id of its own (an MCP server's)
            if call_id is not None:
                self.identified = True
                self.call_batches[call_id] = self.turns
                if name is not None:
                    self.call_names[call_id] = name
            if name is not None:
                self.pending_names.setdefault(name, []).append(self.turns)

    def note_unknown_replies(self, call_ids: list[str]) -> None:
        """Pending requests the framework answered with "unknown tool" in the conversation (no tool span ran)."""
        for call_id in call_ids:
            if call_id in self.call_names:
                if self.unknown_replies is None:
                    self.unknown_replies = set()
                self.unknown_replies.add(call_id)

    @property
    def unexecuted_calls(self) -> int:
        """Requested calls no tool span claimed (by id or by name)."""
        return sum(len(batches) for batches in self.pending_names.values())

    def unknown_tool_requests(
        self, tools: dict[str, ToolDefinition] | None, configured: dict[str, ToolDefinition]
    ) -> int:
        """Unclaimed requests naming a tool neither the trace's definitions (``tools``) nor the config know; 0 when
        neither lists any tool (nothing to tell a known tool by)."""
        if not self.pending_names:
            return 0
        tools = tools or {}
        listed = bool(tools or configured)  # else nothing to tell a known tool by, but a framework's reply

        def unlisted(name: str) -> bool:
            return listed and name not in tools and name not in configured

        count = sum(len(batches) for name, batches in self.pending_names.items() if batches and unlisted(name))
        # requests answered "unknown tool" whose name the definitions do list (or no definitions were recorded)
        replies = self.unknown_replies or ()
        return count + sum(1 for cid in replies if cid in self.call_batches and not unlisted(self.call_names[cid]))

    def _spend_early(self, name: str | None) -> bool:
        """One tool span of ``name`` that ran before its request is matched to a request now."""
        names = self.early_names
        if not names or name is None or not names.get(name):
            return False
        names[name] -= 1
        if not names[name]:
            del names[name]
        return True
