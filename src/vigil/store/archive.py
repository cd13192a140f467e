"""Archived conversations: put out of the way without deleting anything.

A conversation is archived as a whole, by its root session (the oldest of its parent chain,
``ConversationHead.root_id``), as one ``state_meta`` entry under :data:`ARCHIVE_PREFIX` holding
when it was archived. Every backend has ``state_meta``, and a store copied to another backend
carries it, so no schema change is needed. Lists (the web chat's, ``vigil sessions list``) leave
archived conversations out unless asked for them; everything else (search, ``/resume``, its
heartbeat) is unchanged. Deleting a conversation removes its entry (:func:`forget`).
"""

from __future__ import annotations

from typing import Any

from vigil.store.base import SessionStore
from vigil.store.records import ConversationHead

ARCHIVE_PREFIX = "conversation-archived:"


def root_of(store: SessionStore, session_id: str) -> str:
    """The root session of the conversation ``session_id`` belongs to (``SessionNotFound``)."""
    return store.conversation_sessions(session_id)[0].id


def archived_roots(store: SessionStore) -> dict[str, float]:
    """Root session id → when it was archived, for every archived conversation."""
    found: dict[str, float] = {}
    for entry in store.list_meta(ARCHIVE_PREFIX):
        value: Any = entry.value
        at = value.get("archived_at") if isinstance(value, dict) else None
        found[entry.key[len(ARCHIVE_PREFIX):]] = float(at) if isinstance(at, (int, float)) else entry.updated_at
    return found


def set_archived(store: SessionStore, session_id: str, archived: bool, *, now: float) -> bool:
    """Archive (or bring back) the conversation of ``session_id``; whether anything changed.
    Raises ``SessionNotFound`` for an unknown session (nothing is written)."""
    key = ARCHIVE_PREFIX + root_of(store, session_id)
    if archived:
        return store.compare_and_set_meta(key, None, {"archived_at": now})
    return store.delete_meta(key)


def is_archived(store: SessionStore, session_id: str) -> bool:
    return store.get_meta(ARCHIVE_PREFIX + root_of(store, session_id)) is not None


def split(heads: list[ConversationHead], roots: dict[str, float]) -> tuple[list[ConversationHead], list[ConversationHead]]:
    """``heads`` as (not archived, archived), each in the order given."""
    kept = [h for h in heads if h.root_id not in roots]
    put_away = [h for h in heads if h.root_id in roots]
    return kept, put_away


def forget(store: SessionStore, root_ids: list[str]) -> None:
    """Drop the archive entries of conversations that were deleted."""
    for root in root_ids:
        store.delete_meta(ARCHIVE_PREFIX + root)
