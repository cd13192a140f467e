"""Where the note of a ``/background`` task goes (:mod:`vigil.runtime.background`): to the
conversation's open pages, as a ``note`` event {text, reason: background, status, child_id,
prompt}, and to its chat through the outbox, as a notice (durable, like a heartbeat's answer;
the web chat's pages get it as a ``reply`` of kind ``notice``). As a gateway starts, the tasks a
process of this machine left unfinished when it died post their notes here too (:func:`sweep`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from vigil.gateway.wire import event
from vigil.runtime.background import settle_orphans
from vigil.runtime.conversation_events import BackgroundNote
from vigil.store import StoreError
from vigil.store.gateway.gateway_tables import NewOutbound, RouteKey

if TYPE_CHECKING:
    from vigil.gateway.live import LiveConversation
    from vigil.gateway.parts import BackgroundNotesHost

log = logging.getLogger(__name__)


async def deliver(gateway: "BackgroundNotesHost", live: "LiveConversation | None", note: BackgroundNote) -> None:
    """Show ``note`` on the conversation's pages and send it to its chat (``live``'s route, or,
    without a live conversation, the routes that lead to the conversation)."""
    gateway.say(f"vigil gateway: background task {note.child_id[:8] or '-'} of {note.session_id[:8]} {note.status}")
    shown_in = live.session_id if live is not None and live.session_id else note.session_id
    gateway.bus.publish(shown_in, event("note", shown_in, text=note.text, reason="background", status=note.status,
                                        child_id=note.child_id, prompt=note.prompt))
    try:
        routes = await asyncio.to_thread(_routes, gateway, live, note)
        for route in routes:
            message = NewOutbound(route, note.text, kind="notice", session_id=shown_in,
                                  meta={"background": note.child_id, "status": note.status})
            await asyncio.to_thread(gateway.store.gateway.outbox_add, message, now=gateway.clock.now())
    except StoreError as exc:
        log.error("cannot queue the note of background task %s: %s", note.child_id, exc)
        return
    gateway.outbox.wake()


def _routes(gateway: "BackgroundNotesHost", live: "LiveConversation | None", note: BackgroundNote) -> list[RouteKey]:
    if live is not None and live.route is not None:
        return [live.route]
    return gateway.store.gateway.routes_of(gateway.store.newest_continuation(note.session_id))


async def sweep(gateway: "BackgroundNotesHost") -> int:
    """At start: post the notes of tasks whose process on this machine died (see
    :func:`vigil.runtime.background.settle_orphans`); how many."""
    try:
        notes = await asyncio.to_thread(settle_orphans, gateway.store, gateway.clock.now())
    except StoreError as exc:  # they are found again at the next start, or when their conversation runs
        log.warning("cannot look for interrupted background tasks: %s", exc)
        return 0
    for note in notes:
        await deliver(gateway, gateway.live.get(note.session_id), note)
    return len(notes)
