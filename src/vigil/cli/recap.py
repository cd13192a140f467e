"""The short recap ``vigil chat --continue`` and ``--resume`` show before the prompt.

It holds the last exchange the person had (their message and the answer to it) and the
heartbeat turns that fired while the conversation was not open in a REPL — run by the
gateway, so nobody saw them. The REPL marks when it closes a conversation
(:func:`mark_closed`); a conversation never opened in a REPL before (started with ``chat -q``)
counts every heartbeat turn after the last exchange as unseen.
"""

from __future__ import annotations

from dataclasses import dataclass

from vigil.schedule.heartbeat.text import is_heartbeat_message
from vigil.store import MessageRecord, SessionStore

CLOSED_KEY = "repl.closed:"
"""``state_meta`` key prefix: when a REPL last closed the conversation of that session."""

SHOWN_HEARTBEATS = 3
"""Heartbeat turns shown in full; older unseen ones are only counted."""


@dataclass(frozen=True)
class Exchange:
    """One turn as the recap shows it: what was asked and the answer (``None``: none yet)."""

    asked: str
    answer: str | None
    at: float


@dataclass(frozen=True)
class Recap:
    last: Exchange | None
    unseen_heartbeats: list[Exchange]


def mark_closed(store: SessionStore, session_id: str, when: float) -> None:
    """Note that a REPL closed this conversation at ``when``."""
    store.set_meta(CLOSED_KEY + session_id, when)


def build_recap(store: SessionStore, session_id: str) -> Recap:
    """The recap of the conversation whose newest session is ``session_id``. Its earlier
    sessions (before a compression) are read only as far back as the last exchange."""
    chain = store.parent_chain(session_id)  # oldest first, ending with session_id
    closed = store.get_meta_many([CLOSED_KEY + s.id for s in chain])
    closed_at = max((float(e.value) for e in closed.values() if isinstance(e.value, (int, float))), default=None)
    turns: list[tuple[bool, Exchange]] = []
    for session in reversed(chain):
        turns = _turns(store.get_messages(session.id)) + turns
        if any(not beat for beat, _ in turns):
            break
    last_index = max((n for n, (beat, _) in enumerate(turns) if not beat), default=-1)
    last = turns[last_index][1] if last_index >= 0 else None
    unseen = [
        exchange
        for n, (beat, exchange) in enumerate(turns)
        if beat and (exchange.at > closed_at if closed_at is not None else n > last_index)
    ]
    return Recap(last, unseen)


def _turns(messages: list[MessageRecord]) -> list[tuple[bool, Exchange]]:
    """Each user message with the last answer text that followed it (``True``: a heartbeat)."""
    turns: list[tuple[bool, Exchange]] = []
    current: tuple[bool, str, float] | None = None
    answer: str | None = None
    for message in messages:
        if message.role == "user":
            if current is not None:
                turns.append((current[0], Exchange(current[1], answer, current[2])))
            current, answer = (is_heartbeat_message(message.content), message.content or "", message.created_at), None
        elif message.role == "assistant" and message.content and current is not None:
            answer = message.content
    if current is not None:
        turns.append((current[0], Exchange(current[1], answer, current[2])))
    return turns
