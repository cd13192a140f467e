"""What a person may do to a conversation as a whole from a front end: stop its running turn,
withdraw a message waiting behind it, rename it, archive it (out of the list, nothing lost) and
delete it (for good).

:class:`ConversationManagement` is part of :class:`~vigil.gateway.core.Gateway` (and so of the
:class:`~vigil.gateway.adapters.base.GatewayPort` adapters see); it works on the gateway's live
conversations and the store, so that an adapter never reaches into either.

Deleting removes every session of the conversation (its compression continuations too) and
their messages in one store transaction, after its running turn is stopped, its queue dropped,
its heartbeats cleared and its live conversation closed; then its words leave the gateway's
inbox and outbox too (``GatewayTables.forget_sessions``); pages showing it hear a
``conversation_deleted`` event. With several gateway workers, a turn another worker runs is not
stopped from here: that worker finds the conversation gone at its next step.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from vigil.gateway import waiting
from vigil.gateway.adapters.base import ConversationBusy
from vigil.gateway.wire import event
from vigil.store import SessionNotFound, archive
from vigil.store.titles import clean_title

if TYPE_CHECKING:
    from vigil.gateway.parts import ManageHost
    from vigil.gateway.live import LiveConversation

QUIET_WAIT = 15.0
"""Seconds a deletion waits for a stopped turn to finish writing before it gives up."""


class ConversationManagement:
    """The conversation operations of the gateway (mixed into ``Gateway``)."""

    def interrupt(self: "ManageHost", session_id: str) -> bool:  # type: ignore[misc]
        """End the turn the conversation now in ``session_id`` runs here (the Stop button, Esc):
        the conversation, its queue and its heartbeat go on. Whether a turn was running here."""
        live = self.live.get(session_id)
        return bool(live is not None and live.conversation.interrupt())

    def waiting(self: "ManageHost", session_id: str) -> list[dict[str, Any]]:  # type: ignore[misc]
        """The messages waiting behind the turn of ``session_id`` here (:mod:`vigil.gateway.waiting`)."""
        return waiting.waiting_view(self.live.get(session_id))

    def withdraw(self: "ManageHost", session_id: str, inbox_id: int) -> dict[str, Any] | None:  # type: ignore[misc]
        """Withdraw a message waiting there as ``/queue drop N`` does (:mod:`vigil.gateway.waiting`)."""
        return waiting.withdraw(self.bus, self.live.get(session_id), inbox_id)

    async def rename_conversation(self: "ManageHost", ref: str, title: str) -> dict[str, Any]:  # type: ignore[misc]
        """Give the conversation ``ref`` names a new title (``ValueError``: a title that breaks a
        rule, nothing written); returns its summary."""
        text = clean_title(title)
        session_id = await asyncio.to_thread(self.newest, ref)
        await asyncio.to_thread(self.store.update_session, session_id, title=text)
        self.bus.publish(session_id, event("renamed", session_id, title=text))
        return await self.conversation_summary(session_id)

    async def archive_conversation(self: "ManageHost", ref: str, archived: bool = True) -> dict[str, Any]:  # type: ignore[misc]
        """Archive the conversation ``ref`` names (left out of the list; nothing else changes),
        or bring it back; returns its summary."""
        session_id = await asyncio.to_thread(self.newest, ref)
        await asyncio.to_thread(archive.set_archived, self.store, session_id, archived, now=self.clock.now())
        return await self.conversation_summary(session_id)

    async def conversation_summary(self: "ManageHost", session_id: str) -> dict[str, Any]:  # type: ignore[misc]
        from vigil.gateway import views

        return await asyncio.to_thread(views.summary, self, session_id)

    async def delete_conversation(self: "ManageHost", ref: str) -> dict[str, Any]:  # type: ignore[misc]
        """Delete the conversation ``ref`` names, every session of it, for good (see the module
        docstring). ``ref`` must be a session's full id: a prefix, which may name another
        conversation than meant, deletes nothing. Returns ``{"id", "title", "sessions",
        "messages"}``. Raises ``SessionNotFound`` and :class:`ConversationBusy`."""
        if await asyncio.to_thread(self.store.resolve_session, ref) != ref:
            raise SessionNotFound(ref)
        session_id = await asyncio.to_thread(self.store.newest_continuation, ref)
        sessions = await asyncio.to_thread(self.store.conversation_sessions, session_id)
        ids = [s.id for s in sessions]
        for sid in ids:  # first: no heartbeat may start a turn while the conversation closes
            await asyncio.to_thread(self.heartbeat_repo.clear, sid)
        for live in {id(live): live for live in self.all_live() if live.session_id in ids}.values():
            await _close(self, live)
        gone = await asyncio.to_thread(self.store.delete_sessions, ids)
        await asyncio.to_thread(self.store.gateway.forget_sessions, ids, now=self.clock.now())
        await asyncio.to_thread(archive.forget, self.store, [ids[0]])
        for sid in ids:
            self.bus.publish(sid, event("conversation_deleted", sid))
        self.say(f"vigil gateway: conversation {session_id[:8]} deleted ({gone.sessions} session(s), "
                 f"{gone.messages} messages)")
        title = next((s.title for s in sessions if s.id == session_id), None)
        return {"id": session_id, "title": title, "sessions": gone.sessions, "messages": gone.messages}


async def _close(gateway: "ManageHost", live: "LiveConversation") -> None:
    """Stop what ``live`` runs, drop what waits in it, and close it once it is quiet."""
    conversation = live.conversation
    async with gateway.routes_held(live):  # no message is handed to it meanwhile
        conversation.withdraw_queued()
        conversation.interrupt()
        try:
            await asyncio.wait_for(conversation.wait_idle(), QUIET_WAIT)
        except asyncio.TimeoutError:
            raise ConversationBusy("the conversation's stopped turn is still finishing: try again in a moment") from None
        gateway.forget(live)
        await live.close()
