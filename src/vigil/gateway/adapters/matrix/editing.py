"""Matrix's side of the shared streamer (:mod:`vigil.gateway.adapters.streaming`): the answer
appearing as it is written in one message per turn, in the route's thread, edited
(``m.replace``) at most once per edit interval per room, followed by `` …`` while it is being
written; a typing notice shows while a person's turn runs.

A turn is previewed only after one edit interval (a quick answer arrives as one message from
the outbox); the preview becomes the answer by one last edit in :mod:`.outbound`. A preview
whose turn was stopped or failed is marked ``… (stopped)`` / ``… (failed)``. A Matrix typing
notice lasts until its timeout or until it is turned off, so the adapter turns it off as the
turn ends (:meth:`MatrixMessages.stop_typing`).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any, Callable

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.matrix.content import edit, in_thread, message
from vigil.gateway.adapters.previews import DurablePreviews
from vigil.gateway.adapters.streaming import Outcome, Streamer, StreamStyle
from vigil.platforms.matrix import MATRIX
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.adapters.matrix.client import Homeserver

SUFFIX = " …"
"""After a preview still being written."""
TYPING_EVERY = 20.0
"""Seconds between two typing notices while a turn runs (each lasts :data:`TYPING_MS`)."""
TYPING_MS = 30_000


def streamer(client: Callable[[], "Homeserver | None"], previews: DurablePreviews, *,
             interval: float | None = None) -> tuple[Streamer, "MatrixMessages"]:
    """The streamer of a Matrix adapter and its messages (``interval``: another pace, for tests)."""
    pace: dict[str, Any] = {} if interval is None else {"interval": interval}
    style = StreamStyle.of(MATRIX, render=str.strip, suffix=SUFFIX, typing_every=TYPING_EVERY,
                           typing_kinds=frozenset({"user"}), **pace)
    messages = MatrixMessages(client)
    return Streamer(messages, previews, style), messages


class MatrixMessages:
    """:class:`~vigil.gateway.adapters.streaming.EditableMessages` over matrix-nio. Previews are
    plain text (``body`` only): the final edit brings the answer's HTML."""

    def __init__(self, client: Callable[[], "Homeserver | None"]) -> None:
        self._client = client
        self._typing: set[str] = set()
        """Rooms shown a typing notice that is not turned off yet."""
        self._typing_lock = asyncio.Lock()
        """A notice and its turning off reach the homeserver in the order they were made."""

    def _require(self) -> "Homeserver":
        client = self._client()
        if client is None:
            raise DeliveryError("Matrix is not available")
        return client

    async def post(self, route: RouteKey, text: str) -> str:
        return await self._require().send(route.chat, in_thread(message(text, formatted=False), route.thread),
                                          txn=_txn())

    async def edit(self, route: RouteKey, message_id: Any, text: str) -> None:
        await self._require().send(route.chat, edit(str(message_id), message(text, formatted=False)), txn=_txn())

    async def finish(self, route: RouteKey, message_id: Any, shown: str, outcome: Outcome) -> None:
        if outcome == "empty" or not shown:
            return
        note = "(stopped)" if outcome == "stopped" else "(failed)"
        await self.edit(route, message_id, f"{shown.removesuffix(SUFFIX)}{SUFFIX} {note}")

    async def typing(self, route: RouteKey) -> None:
        client = self._require()
        async with self._typing_lock:
            self._typing.add(route.chat)
            await client.call(client.nio.room_typing(route.chat, True, TYPING_MS))

    async def stop_typing(self, route: RouteKey) -> None:
        """Turn off the typing notice in the route's room, if one is shown."""
        client = self._client()
        async with self._typing_lock:
            if client is None or route.chat not in self._typing:
                return
            self._typing.discard(route.chat)
            await client.call(client.nio.room_typing(route.chat, False))


def _txn() -> str:
    return "vigil-" + uuid.uuid4().hex
