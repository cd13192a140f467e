"""The conversation list and one conversation's history, as the web chat shows them.

Synchronous (store calls): the gateway runs these in a worker thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vigil.gateway.waiting import waiting_view
from vigil.gateway.wire import conversation_summary, heartbeat_view, message_view
from vigil.schedule.heartbeat.record import Heartbeat, HeartbeatError
from vigil.store import archive

if TYPE_CHECKING:
    from vigil.gateway.parts import ViewsHost

SEARCH_HITS = 200
"""Message matches looked at when the list is searched."""


def _heartbeats(gateway: "ViewsHost") -> dict[str, Heartbeat]:
    try:
        return {h.session_id: h for h in gateway.heartbeat_repo.list()}
    except HeartbeatError:
        return {}


def owner_text(gateway: "ViewsHost", session_id: str) -> str | None:
    """Who fires the heartbeat of ``session_id``: ``gateway`` when this gateway owns it."""
    return "gateway" if gateway.heartbeats.owns(session_id) else None


def conversations(gateway: "ViewsHost", query: str | None, limit: int, archived: bool = False) -> list[dict[str, Any]]:
    """The conversation list: those not archived, or (``archived``) only the archived ones. A
    search (``query``) looks through the archived ones too, unless only they are asked for:
    archiving puts a conversation out of the way, not out of reach."""
    store = gateway.store
    query = (query or "").strip()
    put_away = archive.archived_roots(store)
    heads = store.list_conversations(limit=None if query or archived else limit + len(put_away))
    if archived or not query:
        heads = archive.split(heads, put_away)[1 if archived else 0]
    if query:
        folded = query.casefold()
        matched = {hit.session_id for hit in store.search(query, limit=SEARCH_HITS)}
        keep = []
        for head in heads:
            members = {s.id for s in store.conversation_sessions(head.head.id)} if matched else set()
            if folded in (head.head.title or "").casefold() or members & matched:
                keep.append(head)
        heads = keep
    heads = heads[:limit]
    heartbeats = _heartbeats(gateway)
    out = []
    for head in heads:
        session = head.head
        live = gateway.live.get(session.id)
        view = heartbeat_view(heartbeats.get(session.id), owner_text(gateway, session.id))
        summary = conversation_summary(session, view, busy=bool(live and live.conversation.busy))
        out.append({**summary, "archived": head.root_id in put_away})
    return out


def summary(gateway: "ViewsHost", session_id: str) -> dict[str, Any]:
    """One conversation's list entry (``session_id``: its newest session)."""
    store = gateway.store
    session = store.get_session(session_id)
    try:
        heartbeat = gateway.heartbeat_repo.get(session_id)
    except HeartbeatError:
        heartbeat = None
    live = gateway.live.get(session_id)
    view = conversation_summary(session, heartbeat_view(heartbeat, owner_text(gateway, session_id)),
                                busy=bool(live and live.conversation.busy))
    return {**view, "archived": archive.is_archived(store, session_id)}


def conversation(gateway: "ViewsHost", ref: str) -> dict[str, Any]:
    store = gateway.store
    session_id = store.newest_continuation(store.resolve_session(ref))
    session = store.get_session(session_id)
    messages = [message_view(m) for m in store.get_messages(session_id)]
    try:
        heartbeat = gateway.heartbeat_repo.get(session_id)
    except HeartbeatError:
        heartbeat = None
    live = gateway.live.get(session_id)
    return {
        "id": session.id,
        "title": session.title,
        "source": session.source,
        "ended": session.is_ended,
        "messages": messages,
        "heartbeat": heartbeat_view(heartbeat, owner_text(gateway, session_id)),
        "busy": bool(live and live.conversation.busy),
        "queued": live.conversation.queued if live else 0,
        "waiting": waiting_view(live),
        "archived": archive.is_archived(store, session_id),
    }
