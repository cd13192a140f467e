"""Where a request's message goes (:mod:`.matching` says by which keys), and remembering an
answered exchange so that the chat's next request comes back to its conversation.

Remembering writes the keys to the durable routing table; this process also keeps them in
memory at once, so that a client that sends its next request the moment it has the answer
finds its conversation without waiting for that write (which stays off the answer's path).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Sequence

from vigil.gateway.adapters.base import GatewayPort
from vigil.gateway.adapters.openai_api import matching
from vigil.gateway.adapters.openai_api.errors import ApiError
from vigil.gateway.adapters.openai_api.parsing import ClientTurn
from vigil.store import AmbiguousSession, SessionNotFound, StoreError
from vigil.store.gateway.gateway_tables import RouteKey

log = logging.getLogger(__name__)

KEPT = 10_000
"""Keys (and opened routes) this process keeps in memory at most, the oldest forgotten first."""


class Bounded(OrderedDict[str, str]):
    """A map that forgets its oldest keys past :data:`KEPT`."""

    def put(self, key: str, value: str) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > KEPT:
            self.popitem(last=False)


class Lookup:
    """The ``api`` adapter's routes: finding a request's conversation, remembering answers."""

    def __init__(self) -> None:
        self.recent = Bounded()
        """Keys remembered by this process (route chat → session), written or being written."""
        self.opened = Bounded()
        """Conversation routes this process pointed (their chat → the session they lead to)."""
        self._writes: set[asyncio.Task[None]] = set()

    async def route(self, gateway: GatewayPort, turn: ClientTurn) -> tuple[RouteKey, str | None, bool]:
        """The route the message goes through, the session it leads to now (``None``: a new
        conversation) and whether that conversation saw the chat's earlier messages."""
        if turn.previous_response_id is not None:
            session_id = await self._get(gateway, matching.response_route(turn.previous_response_id))
            if session_id is None:
                raise ApiError(404, f"Previous response with id '{turn.previous_response_id}' not found.",
                               code="previous_response_not_found", param="previous_response_id")
            return await self._session_route(gateway, session_id)
        if turn.conversation is not None:
            route = matching.key_route(turn.conversation)
            session_id = await asyncio.to_thread(gateway.store.gateway.route_get, route)
            if session_id is None and await asyncio.to_thread(_is_session, gateway, turn.conversation):
                session_id = await gateway.open_conversation(route, turn.conversation)
            return route, session_id, session_id is not None
        if turn.prior:
            session_id = await self._get(gateway, matching.history_route(turn.prior))
            if session_id is not None:
                return await self._session_route(gateway, session_id)
        return matching.new_route(), None, False

    async def _get(self, gateway: GatewayPort, key: RouteKey) -> str | None:
        known = self.recent.get(key.chat)
        if known is not None:
            return known
        return await asyncio.to_thread(gateway.store.gateway.route_get, key)

    async def _session_route(self, gateway: GatewayPort, session_id: str) -> tuple[RouteKey, str | None, bool]:
        """The conversation's own route, pointed at it now: a lookup key may be re-pointed to
        another conversation later, and the gateway keeps a route bound to the conversation it
        last led to while that runs. Pointed once per process while it keeps leading there
        (as the web chat opens its routes)."""
        route = matching.session_route(session_id)
        if self.opened.get(route.chat) == session_id:
            return route, session_id, True
        try:
            opened = await gateway.open_conversation(route, session_id)
        except SessionNotFound:  # deleted meanwhile: the chat starts again
            return matching.new_route(), None, False
        self.opened.put(route.chat, opened)
        return route, opened, True

    def remember(
        self, gateway: GatewayPort, inbox_id: int, asked: str | None, response_id: str | None,
        answers: Sequence[str], session_id: str | None,
    ) -> None:
        """Point the exchange (``asked``: the hash of the chat up to the question) with each form
        of its answer, and the response's id, at ``session_id``: here at once, in the store
        in the background."""
        if session_id is None or (asked is None and response_id is None):
            return
        if asked is not None:
            routes = matching.answered_routes(asked, answers, response_id)
        else:
            routes = [matching.response_route(response_id or "")]
        for route in routes:
            self.recent.put(route.chat, session_id)
        task = asyncio.ensure_future(self._write(gateway, inbox_id, routes, session_id))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, gateway: GatewayPort, inbox_id: int, routes: list[RouteKey], session_id: str) -> None:
        tables = gateway.store.gateway
        try:
            for route in routes:
                await asyncio.to_thread(tables.route_set, route, session_id, now=time.time())
        except (StoreError, SessionNotFound) as exc:  # after a restart the chat starts a new conversation
            log.warning("cannot remember the API exchange of inbox entry %d: %s", inbox_id, exc)
            for route in routes:
                self.recent.pop(route.chat, None)

    async def settle(self) -> None:
        """Wait for the keys being written (the gateway stops)."""
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)


def _is_session(gateway: GatewayPort, key: str) -> bool:
    """Whether ``key`` is the whole id of a stored session (a prefix is a key of its own)."""
    try:
        return gateway.store.resolve_session(key) == key
    except (SessionNotFound, AmbiguousSession):
        return False
