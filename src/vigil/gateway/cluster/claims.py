"""Several gateways on one store: this worker claiming a conversation, asynchronously.

:class:`~vigil.gateway.cluster.ownership.Ownership` holds the leases (blocking store calls); this is the
gateway's side of it. Claiming a conversation another live worker runs gives its
:class:`~vigil.gateway.cluster.ownership.Elsewhere`; claiming one nobody runs takes it over, and until the
taker has caught up with what was left unfinished there (:func:`vigil.gateway.recovery.catch_up`)
every other path of this worker to that conversation waits. Two workers receiving the first
messages of a platform conversation at once start one session (a short route claim).
A heartbeat fires only in the worker that holds its conversation (:meth:`Claims.heartbeat_refusal`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from vigil.gateway.cluster.ownership import Elsewhere
from vigil.gateway.cluster.ownership import route_claim
from vigil.gateway.recovery import catch_up
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.parts import ClaimsHost
    from vigil.gateway.live import LiveConversation


class Claims:
    """The claims of one worker (see the module docstring)."""

    def __init__(self, gateway: "ClaimsHost") -> None:
        self.gateway = gateway
        self.ownership = gateway.ownership
        self._takeovers: dict[str, asyncio.Future[None]] = {}  # conversations being taken over

    async def new_conversation_once(self, route: RouteKey) -> "LiveConversation | Elsewhere | None":
        """Start the route's conversation unless another worker is starting it right now (its
        ``Elsewhere``) or has just started it (``None``)."""
        gateway = self.gateway
        claim = route_claim(route)
        holder = await asyncio.to_thread(self.ownership.claim, claim)
        if holder is not None:
            return Elsewhere("", holder.token)
        try:
            resolved = await asyncio.to_thread(gateway.router.resolve, route)
            if resolved.session_id is not None:
                return None
            return await gateway.new_conversation(route)
        finally:
            await asyncio.to_thread(self.ownership.release, [claim])

    async def claim(self, session_id: str | None) -> tuple[Elsewhere | None, bool]:
        """Where another worker runs ``session_id`` (``None``: it is this worker's), and
        whether this worker has just taken it: then the caller catches up and calls
        :meth:`taken_over`, and every other path to the conversation waits until it has."""
        if session_id is None or not self.ownership.shared:
            return None, False
        while (pending := self._takeovers.get(session_id)) is not None:
            await asyncio.shield(pending)
        if session_id in self.ownership.held:
            return None, False
        self._takeovers[session_id] = asyncio.get_running_loop().create_future()
        try:
            holder = await asyncio.to_thread(self.ownership.claim, session_id)
        except BaseException:
            self.taken_over(session_id)
            raise
        if holder is not None:
            self.taken_over(session_id)
            return Elsewhere(session_id, holder.token), False
        return None, True

    def taken_over(self, session_id: str) -> None:
        """The take-over of ``session_id`` is complete (or did not happen): let the others on."""
        done = self._takeovers.pop(session_id, None)
        if done is not None and not done.done():
            done.set_result(None)

    async def heartbeat_refusal(self, live: "LiveConversation", session_id: str) -> str | None:
        """Why the heartbeat of ``session_id`` may not fire in ``live`` now (``None``: it may):
        another worker runs the conversation (the heartbeat is handed to it, which adopts
        it), or the people it answers are not authorized."""
        gateway = self.gateway
        elsewhere, taken = await self.claim(session_id)
        if elsewhere is not None:
            gateway.heartbeats.disown(session_id)
            return f"another gateway worker ({elsewhere.worker[:8]}) runs this conversation; its heartbeat moves there"
        if taken:
            # Not under the route's lock: a message of that route may be waiting for this
            # take-over while holding it (the take-over itself keeps everything else out).
            # What the catch-up queues goes first: the heartbeat's re-check just before it
            # executes sees the queue and gives the slot back until the conversation is idle.
            try:
                await catch_up(gateway, live, live.route)
            finally:
                self.taken_over(session_id)
        return await gateway.authorization.heartbeat_refusal(live, session_id)
