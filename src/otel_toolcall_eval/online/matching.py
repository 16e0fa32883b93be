"""Request matching: the calls a trace's model turns requested, until tool spans answer them.

A sub-record of a trace's state (``TraceState.requests``), made only when it is needed: by the first model turn
that requests calls, or by the first tool span that ran before any request (it is remembered as answered: its
request may still come). A trace of plain spans, or of model turns that requested nothing, has none. Every method
runs under the trace's lock (``TraceState.lock``).

What it tells the verdict: which turn (parallel batch) issued each call (``batch_for``), the requested calls no
tool span answered (``unexecuted_calls``) and those of tools nothing lists (``unknown_tool_requests``); what it
tells the call stage: the arguments the model sent for a call whose span records none (``call_arguments``).
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

    def batch_for(
        self, call_id: str | None, name: str, max_early: int = 0, late: bool = False, remote: bool = False
    ) -> int | None:
        """The turn that issued this call: by call id, else the earliest unclaimed request of this name.

        Spans reach the engine in end order, and a tool span can come before the model call that asked for it:
        the JS SDK takes each span's start from Date.now() in whole milliseconds (a sub-millisecond tool then
        "ends" before its request), and separate exports, a Collector or another service's exporter reorder too.
        So a call id no request named yet, with no request of its name to claim, is remembered as answered
        (``max_early`` bounds how many; 0 for off): its request may still come. A ``remote`` span (its parent is in
        another service: an MCP server's) is remembered by its name instead, since its id is the server's own (a
        JSON-RPC id), never the model's: the next request of that name is answered. ``late`` is for conventions
        whose model-call span always ends after the tool span it caused (the Vercel AI SDK's legacy spans): such
        an id claims no other request by name once the requests came with ids."""
        pending = self.pending_names.get(name)
        batches = self.call_batches
        if call_id is not None and call_id in batches:
            batch = batches.pop(call_id)
            names = self.call_names
            names.pop(call_id, None)
            if pending and batch in pending:
                pending.remove(batch)
                if not pending:
                    self._answered(name)
            if not batches:  # every request answered: a dict keeps its grown table after pops, a cleared one not
                batches.clear()
                if not names:
                    names.clear()
            return batch
        claims_none = late and self.identified and call_id is not None
        if max_early and (claims_none or not pending):
            self._note_early(call_id, name, remote, max_early)
        if pending and not claims_none:
            batch = pending.pop(0)
            if not pending:
                self._answered(name)
            if self.call_names:  # the request's own id, if it had one: no reply scores that call again
                self._claim_id(name, batch)
            return batch
        return None

    def _claim_id(self, name: str, batch: int) -> None:
        names = self.call_names
        for call_id, named in names.items():
            if named == name and self.call_batches.get(call_id) == batch:
                del names[call_id]
                del self.call_batches[call_id]
                return

    def _answered(self, name: str) -> None:
        """Every request of ``name`` is claimed: its entry goes (the dict's table too, once it is empty)."""
        names = self.pending_names
        del names[name]
        if not names:
            names.clear()

    def _note_early(self, call_id: str | None, name: str, remote: bool, max_early: int) -> None:
        if remote:
            names = self.early_names
            if names is None:
                names = self.early_names = {}
            if len(names) < max_early or name in names:
                names[name] = min(names.get(name, 0) + 1, max_early)
        elif call_id is not None:
            early = self.answered_early
            if early is None:
                early = self.answered_early = set()
            if len(early) < max_early:
                early.add(call_id)

    def _spend_early(self, name: str | None) -> bool:
        """One tool span of ``name`` that ran before its request is matched to a request now."""
        names = self.early_names
        if not names or name is None or not names.get(name):
            return False
        names[name] -= 1
        if not names[name]:
            del names[name]
        return True
