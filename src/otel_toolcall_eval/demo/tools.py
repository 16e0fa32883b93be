"""The demo's calendar / email / reminder tools: plain functions over an in-memory backend.

Their JSON Schemas are derived from the signatures once (``schema_from_function``), the same way agent
frameworks do it, so the schema the "model" sees and the one the config would register cannot disagree.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from otel_toolcall_eval.config import schema_from_function


class InvalidArgument(ValueError):
    """The tool rejected its input: classified as the model's fault (``malformed_call``)."""


class BackendUnavailable(ConnectionError):
    """The calendar service timed out: an infrastructure failure, not the model's."""


@dataclass
class Backend:
    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    outbox: list[dict[str, Any]] = field(default_factory=list)
    reminders: list[dict[str, Any]] = field(default_factory=list)
    authenticated: bool = False
    fail_next: bool = False
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def _maybe_fail(self) -> None:
        if self.fail_next:
            self.fail_next = False
            raise BackendUnavailable("calendar backend timed out after 5000 ms")


def make_tools(backend: Backend) -> dict[str, Callable[..., Any]]:
    def authenticate(user: str) -> dict[str, Any]:
        """Sign the user in to their calendar and mailbox."""
        backend.authenticated = True
        return {"user": user, "ok": True}

    def list_events(date: str, limit: int = 10) -> list[dict[str, Any]]:
        """List calendar events on a date (YYYY-MM-DD)."""
        backend._maybe_fail()
        standup = {"id": "evt_standup", "title": "Standup", "start": f"{date}T09:00:00", "attendees": []}
        return [standup, *(e for e in backend.events.values() if e["start"].startswith(date))][:limit]

    def create_event(
        title: str, start: str, duration_minutes: int, attendees: list[str] | None = None
    ) -> dict[str, Any]:
        """Create a calendar event starting at an ISO date-time."""
        backend._maybe_fail()
        event_id = f"evt_{next(backend._ids)}"
        backend.events[event_id] = {"id": event_id, "title": title, "start": start, "attendees": attendees or []}
        return backend.events[event_id]

    def delete_event(event_id: str) -> dict[str, Any]:
        """Delete a calendar event. Irreversible."""
        backend._maybe_fail()
        if event_id not in backend.events:
            raise KeyError(f"no event {event_id}")
        return {"deleted": backend.events.pop(event_id)["id"]}

    def confirm_action(summary: str) -> dict[str, Any]:
        """Ask the user to confirm an irreversible action."""
        return {"confirmed": True, "summary": summary}

    def send_email(to: list[str], subject: str, body: str) -> dict[str, Any]:
        """Send an email."""
        backend._maybe_fail()
        backend.outbox.append({"to": to, "subject": subject, "body": body})
        return {"queued": True}

    def create_reminder(text: str, at: str) -> dict[str, Any]:
        """Create a reminder at an ISO date-time."""
        backend.reminders.append({"text": text, "at": at})
        return {"ok": True}

    def delete_all_events() -> dict[str, Any]:
        """Wipe the calendar. Must never be called by the assistant."""
        backend.events.clear()
        return {"deleted": "all"}

    funcs: list[Callable[..., Any]] = [
        authenticate,
        list_events,
        create_event,
        delete_event,
        confirm_action,
        send_email,
        create_reminder,
        delete_all_events,
    ]
    return {f.__name__: f for f in funcs}


def contact_tools() -> dict[str, Callable[..., Any]]:
    """The contacts server's tool: offered only while that server is up (``demo.agent``: the tool list changes)."""

    def find_contact(name: str) -> dict[str, Any]:
        """Look up a contact's email address by name."""
        return {"name": name, "email": f"{name.lower()}@example.com"}

    return {"find_contact": find_contact}


def tool_definitions(tools: dict[str, Callable[..., Any]]) -> list[dict[str, Any]]:
    """The flat GenAI ``gen_ai.tool.definitions`` shape, as pydantic-ai records it."""
    return [
        {
            "type": "function",
            "name": name,
            "description": (f.__doc__ or "").strip(),
            "parameters": schema_from_function(f),
        }
        for name, f in tools.items()
    ]
