"""What the gateway tells its adapters and pages, as JSON-ready dicts.

Live events carry ``type`` and ``session_id``:

``turn_began`` {kind: user|heartbeat, text, header} · ``delta`` {text} · ``tool_started``
{name, arguments} · ``tool_finished`` {name, content, is_error} · ``turn_ended`` {kind, content,
error, cancelled, usage} · ``command_reply`` {text, is_error} · ``approval_request`` {id, tool,
description, expires_at} · ``approval_resolved`` {id, approved} · ``heartbeat`` {heartbeat} ·
``session_moved`` {new_session_id, reason} · ``message_accepted`` {inbox_id, text, client_id} ·
``status`` {busy, queued} · ``note`` {text, reason: ended|over_budget} (a heartbeat vigil
ended or paused) · ``queue`` {waiting: [{position, text, inbox_id}]} (the messages waiting
behind the running turn, whenever that changes) · ``withdrawn`` {inbox_id, text} (a waiting
message withdrawn, see :mod:`vigil.gateway.waiting`). A heartbeat turn's ``turn_ended`` that
answered ``HEARTBEAT_OK`` carries ``silent: true`` (fold it); so does such an answer in a history
(``message_view``).
"""

from __future__ import annotations

from typing import Any

from vigil.agent.events import Compressed, TextDelta, ToolFinished, ToolStarted
from vigil.runtime.conversation_events import ConversationEvent, TurnBegan, TurnEnded
from vigil.schedule.heartbeat.record import Heartbeat
from vigil.schedule.heartbeat.text import HEADER_PREFIX, is_heartbeat_message, is_silent_answer
from vigil.schedule.intervals import format_interval
from vigil.store import MessageRecord, SessionRecord

TOOL_CONTENT_CHARS = 2_000
"""Characters of a tool result a live event carries (the history keeps all of it)."""


def event(type_: str, session_id: str | None, **fields: Any) -> dict[str, Any]:
    """A wire event of type ``type_`` about ``session_id``."""
    return {"type": type_, "session_id": session_id, **fields}


def live_event(session_id: str | None, item: ConversationEvent) -> dict[str, Any] | None:
    """The wire form of a conversation event, or ``None`` for events pages do not show."""
    if isinstance(item, TextDelta):
        return event("delta", session_id, text=item.text)
    if isinstance(item, TurnBegan):
        return event("turn_began", item.session_id or session_id, kind=item.kind, text=item.text, header=item.header)
    if isinstance(item, TurnEnded):
        error = None if item.error is None else str(item.error) or type(item.error).__name__
        content = item.result.answer if item.result is not None else None
        usage = item.result.usage.as_dict() if item.result is not None else None
        return event("turn_ended", session_id, kind=item.kind, content=content, error=error, cancelled=item.cancelled,
                     usage=usage)
    if isinstance(item, ToolStarted):
        return event("tool_started", session_id, name=item.name, arguments=item.arguments)
    if isinstance(item, ToolFinished):
        return event("tool_finished", session_id, name=item.name, content=shorten(item.content), is_error=item.is_error)
    if isinstance(item, Compressed):
        return event("session_moved", item.parent_id, new_session_id=item.child_id, reason="compression")
    return None


def shorten(text: str, limit: int = TOOL_CONTENT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters)"


def heartbeat_view(heartbeat: Heartbeat | None, owner: str | None = None) -> dict[str, Any] | None:
    if heartbeat is None:
        return None
    return {
        "interval": heartbeat.interval,
        "interval_text": format_interval(heartbeat.interval),
        "prompt": heartbeat.prompt,
        "status": heartbeat.status,
        "next_due": heartbeat.fire_at() if heartbeat.active else heartbeat.next_due,
        "fire_count": heartbeat.fire_count,
        "last_fire": heartbeat.last_fire,
        "owner": owner,
        "quiet": heartbeat.quiet,
        "zone": heartbeat.zone,
        "ends_at": heartbeat.ends_at,
        "loud": heartbeat.loud,
        "paused_by": heartbeat.paused_by,
    }


def message_view(message: MessageRecord) -> dict[str, Any]:
    heartbeat = message.role == "user" and is_heartbeat_message(message.content)
    header = None
    if heartbeat and message.content:
        header = message.content.split("\n", 1)[0]
        assert header.startswith(HEADER_PREFIX)
    return {
        "seq": message.seq,
        "role": message.role,
        "content": message.content,
        "tool_calls": [{"name": call.name, "arguments": call.arguments} for call in message.tool_calls],
        "tool_name": message.tool_name,
        "created_at": message.created_at,
        "heartbeat": heartbeat,
        "header": header,
        "inbox_id": message.meta.get("inbox") if message.role == "user" else None,
        "silent": message.role == "assistant" and is_silent_answer(message.content),
        "background": message.meta.get("background") if message.role == "note" else None,
    }


def conversation_summary(
    session: SessionRecord, heartbeat: dict[str, Any] | None, *, busy: bool, message_count: int | None = None
) -> dict[str, Any]:
    return {
        "id": session.id,
        "title": session.title,
        "source": session.source,
        "updated_at": session.updated_at,
        "started_at": session.started_at,
        "message_count": session.message_count if message_count is None else message_count,
        "heartbeat": heartbeat,
        "busy": busy,
    }
