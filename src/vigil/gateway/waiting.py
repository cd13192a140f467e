"""The messages waiting behind a live conversation's running turn, for its pages.

What ``/queue`` lists, each with its inbox id, goes to the pages as a ``queue`` event
``{waiting: [{position, text, inbox_id}]}`` whenever it changes (a message joins, one leaves
for its turn, one is withdrawn), and is part of a conversation's view (``waiting``). A page's
Remove button withdraws one by its inbox id exactly as ``/queue drop N`` does: its sender's
future resolves as withdrawn, so :mod:`vigil.gateway.settle` records the entry so and tells
the pages with a ``withdrawn`` event ``{inbox_id, text}``, as for the typed command.

Only the worker that runs a conversation has its queue: elsewhere the list is empty and a
withdrawal finds nothing (as the Stop button stops only a turn run here).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Any

from vigil.gateway.wire import event

if TYPE_CHECKING:
    from vigil.gateway.bus import EventBus
    from vigil.gateway.live import LiveConversation

QUEUE_EVENT = "queue"
WITHDRAWN_EVENT = "withdrawn"

_SOON: "weakref.WeakSet[LiveConversation]" = weakref.WeakSet()
"""Live conversations whose waiting list is about to be published."""


def waiting_view(live: "LiveConversation | None") -> list[dict[str, Any]]:
    """The inputs waiting in ``live`` (none when it does not run here), numbered from 1 in the
    order they will be handled, as ``/queue`` numbers them."""
    if live is None:
        return []
    return [
        {"position": n, "text": item.text, "inbox_id": (item.meta or {}).get("inbox")}
        for n, item in enumerate(live.conversation.immediate.waiting(), 1)
    ]


def publish_soon(bus: "EventBus", live: "LiveConversation") -> None:
    """Tell the pages the waiting list of ``live`` once what happens now has happened: a
    message handed to an idle conversation is taken from its queue within this turn of the
    event loop, so it never shows as waiting. Several changes in a row are told once. Nobody
    to tell (no page open here, no other worker to relay to): nothing is done, on every
    message of a platform's conversation; a page opened later reads the list in the view."""
    if live in _SOON or (bus.relay is None and not (live.session_id and bus.watched(live.session_id))):
        return
    _SOON.add(live)
    asyncio.get_running_loop().call_soon(_publish, bus, live)


def _publish(bus: "EventBus", live: "LiveConversation") -> None:
    _SOON.discard(live)
    session_id = live.session_id
    if session_id is not None:
        bus.publish(session_id, event(QUEUE_EVENT, session_id, waiting=waiting_view(live)))


def withdraw(bus: "EventBus", live: "LiveConversation | None", inbox_id: int) -> dict[str, Any] | None:
    """Withdraw the message ``inbox_id`` waiting in ``live`` as ``/queue drop N`` does:
    ``{position, text, inbox_id, reply}`` (``reply``: what the command would have said), or
    ``None`` when it does not wait there (its turn began, it was withdrawn, or it never did)."""
    if live is None:
        return None
    for position, item in enumerate(live.conversation.immediate.waiting(), 1):
        if (item.meta or {}).get("inbox") != inbox_id:
            continue
        reply = live.conversation.immediate.withdraw_one(item)
        if reply is None:
            return None
        publish_soon(bus, live)
        return {"position": position, "text": item.text, "inbox_id": inbox_id, "reply": reply.text}
    return None
