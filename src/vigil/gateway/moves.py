"""A live conversation moving to another session: ``/new``, ``/resume``, ``/suspend`` and
compression. Its watchers and its route follow it; after ``/suspend`` it stays only while
input waits in it; after ``/resume`` of a session another live conversation runs, the two
become one, so the session keeps a single queue.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from vigil.gateway.wire import event
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.parts import MovesHost
    from vigil.gateway.live import LiveConversation

WEB = "web"


async def moved(gateway: "MovesHost", live: "LiveConversation", old: str | None, new: str | None, reason: str) -> None:
    """The conversation of ``live`` went on from ``old`` to ``new`` (``None``: ``/suspend``
    ended it): re-key it, carry its watchers and re-point its route."""
    if old is not None and gateway.live.get(old) is live:
        del gateway.live[old]
    if new is None:
        if old is not None:
            gateway.bus.publish(old, event("session_moved", old, new_session_id=None, reason="suspend"))
        await _close_if_unused(gateway, live)
        return
    other = gateway.live.get(new)
    if other is not None and other is not live:
        await _merge(gateway, other, live, new)
    gateway.live[new] = live
    if gateway.ownership.shared:
        await asyncio.to_thread(gateway.ownership.claim, new)  # its next turns run here too
    if old is not None:
        gateway.bus.move(old, new, reason)
    route = live.route
    if route is not None:
        target = RouteKey(WEB, new) if route.adapter == WEB else route
        if target != route:
            gateway.bind(live, target)
        await asyncio.to_thread(gateway.router.point, target, new)


async def _merge(gateway: "MovesHost", other: "LiveConversation", into: "LiveConversation", session_id: str) -> None:
    """``into`` switched (``/resume``) to ``session_id``, which ``other`` runs: ``other``
    finishes what it has, its routes then lead to ``into`` (each re-pointed under its lock,
    so no message is handed to ``other`` after that) and it is closed, so that the session
    has one queue and one turn at a time."""
    await other.conversation.wait_idle()
    gateway.live[session_id] = into
    for route in [route for route, known in gateway.by_route.items() if known is other]:
        async with gateway.route_lock(route):
            if gateway.by_route.get(route) is other:
                gateway.by_route[route] = into
    await other.conversation.wait_idle()  # input handed to it before its routes moved
    gateway.forget(other)
    await other.close()


async def _close_if_unused(gateway: "MovesHost", live: "LiveConversation") -> None:
    """After ``/suspend``: close the live conversation unless input waits in it (that input
    starts the next conversation there, and so does a message that arrives meanwhile, as
    the route still leads to it). Under the locks of its routes, so that no message is handed to
    a conversation being closed."""
    async with gateway.routes_held(live):
        conversation = live.conversation
        if live.session_id is None and not conversation.queued and not conversation.busy:
            gateway.forget(live)
            await live.close()
