"""Side sessions forked from a conversation (``/background``), and the history they read.

A fork is created with its conversation's stored system prompt, pinned tools and model
configuration, and linked to it by ``forked_from``; it copies no messages. Its history is the
conversation's messages up to the fork point (``model_config["fork_seq"]``) followed by its own,
so its first request begins with the very bytes the conversation's next request would begin
with, and the provider's prompt cache serves that prefix.

A fork is never compressed (:func:`is_fork`): its history is mostly its conversation's, which
compresses itself; a fork that outgrows the context window fails like any over-long request.
"""

from __future__ import annotations

from typing import Any, Sequence

from vigil.store import SessionNotFound, SessionRecord, SessionStore
from vigil.store.records import MessageRecord

FORK_SEQ = "fork_seq"
"""In a fork's model configuration: the last message of its conversation that it reads."""

_DEPTH = 8
"""Forks of forks followed at most (a fork's session may itself be resumed and forked)."""


def is_fork(session: SessionRecord) -> bool:
    """Whether ``session`` reads its history from the session it was forked from."""
    return session.forked_from is not None


def fork_point(records: Sequence[MessageRecord], *, turn_running: bool) -> int:
    """The ``seq`` of the last message a fork of these records reads: all of them, or, while a
    turn runs there, up to the last finished answer (the running turn's question and steps are
    left out: they would end the fork's history half way through a turn)."""
    if not turn_running:
        return records[-1].seq if records else 0
    for record in reversed(records):
        if record.role == "assistant" and not record.tool_calls and record.meta.get("stop_reason") != "interrupted":
            return record.seq
    return 0


def fork_session(
    store: SessionStore,
    session_id: str,
    *,
    source: str,
    title: str | None,
    turn_running: bool,
    config: dict[str, Any] | None = None,
) -> SessionRecord:
    """Create a fork of ``session_id`` (synchronous: call it in a worker thread). ``config`` is
    added to the model configuration the fork takes over."""
    parent = store.get_session(session_id)
    prompt = store.get_prompt(parent.system_prompt_hash) if parent.system_prompt_hash else None
    seq = fork_point(store.get_messages(parent.id), turn_running=turn_running)
    return store.create_session(
        source=source,
        model=parent.model,
        model_config={**parent.model_config, **(config or {}), FORK_SEQ: seq},
        title=title,
        tool_names=parent.tool_names,
        system_prompt=prompt,
        forked_from=parent.id,
    )


def history_records(store: SessionStore, session: SessionRecord) -> tuple[list[MessageRecord], int]:
    """The stored messages ``session``'s history is built from, and how many of them came from
    the sessions it was forked from (none for a session that is no fork)."""
    own = store.get_messages(session.id)
    inherited = _inherited(store, session, _DEPTH)
    return [*inherited, *own], len(inherited)


def _inherited(store: SessionStore, session: SessionRecord, depth: int) -> list[MessageRecord]:
    if session.forked_from is None or depth == 0:
        return []
    try:
        parent = store.get_session(session.forked_from)
    except SessionNotFound:  # deleted a moment ago (the link is cleared with it)
        return []
    until = session.model_config.get(FORK_SEQ)
    if not isinstance(until, int) or until <= 0:
        return []
    before = _inherited(store, parent, depth - 1)
    return [*before, *(r for r in store.get_messages(parent.id, limit=until) if r.seq <= until)]
