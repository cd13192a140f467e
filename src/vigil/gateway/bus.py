"""Live events of conversations, fanned out to whoever watches them (web pages, tests).

Subscribers watch a session id. When the conversation moves on (compression into a
continuation, ``/new``), :meth:`EventBus.move` carries its watchers along after telling them
(``session_moved``), so a page keeps following the conversation it shows.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncIterator

from vigil.gateway.cluster.relay import Relayed

log = logging.getLogger(__name__)

QUEUE_LIMIT = 2_000
"""Events a watcher may fall behind by; past that it is dropped (a page then reconnects and
reloads the history, which holds everything)."""

_END = object()


class Watch:
    """One watcher's stream of events (an async iterator of wire dicts)."""

    def __init__(self, bus: "EventBus", session_id: str) -> None:
        self.bus = bus
        self.session_id = session_id
        self.queue: asyncio.Queue[Any] = asyncio.Queue(QUEUE_LIMIT + 1)
        self.closed = False

    def push(self, item: dict[str, Any]) -> None:
        if self.closed:
            return
        if self.queue.qsize() >= QUEUE_LIMIT:
            log.warning("a watcher of %s fell %d events behind; dropping it", self.session_id, QUEUE_LIMIT)
            self.close()
            return
        self.queue.put_nowait(item)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.bus.forget(self)
        self.queue.put_nowait(_END)

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            item = await self.queue.get()
            if item is _END:
                return
            yield item

    async def next(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next event, or ``None`` once closed (``TimeoutError`` after ``timeout``)."""
        item = await asyncio.wait_for(self.queue.get(), timeout)
        return None if item is _END else item


class EventBus(Relayed):
    """Watchers by session id. With several workers on one store, what is published here is
    shared with the others' buses too (:mod:`vigil.gateway.cluster.relay`)."""

    def __init__(self) -> None:
        self._watchers: dict[str, set[Watch]] = {}
        self.relay = None

    def subscribe(self, session_id: str) -> Watch:
        watch = Watch(self, session_id)
        self._watchers.setdefault(session_id, set()).add(watch)
        return watch

    def forget(self, watch: Watch) -> None:
        watchers = self._watchers.get(watch.session_id)
        if watchers is not None:
            watchers.discard(watch)
            if not watchers:
                del self._watchers[watch.session_id]

    def publish(self, session_id: str | None, item: dict[str, Any]) -> None:
        if session_id is None:
            return
        self._push(session_id, item)
        if self.relay is not None:
            self.relay({"s": session_id, "e": item})

    def move(self, old: str, new: str, reason: str) -> None:
        """The conversation in ``old`` continues in ``new``: tell and carry its watchers."""
        if old == new:
            return
        self._move(old, new, reason)
        if self.relay is not None:
            self.relay({"move": [old, new, reason]})

    def deliver(self, message: dict[str, Any]) -> None:
        """Apply what another worker's bus published (not shared again)."""
        moved = message.get("move")
        if isinstance(moved, list) and len(moved) == 3 and all(isinstance(part, str) for part in moved):
            self._move(*moved)
        elif isinstance(message.get("s"), str) and isinstance(message.get("e"), dict):
            self._push(message["s"], message["e"])

    def missed(self) -> None:
        """Events shared by other workers may have been lost: every watcher reloads."""
        for session_id in list(self._watchers):
            self._push(session_id, {"type": "stale", "session_id": session_id})

    def _push(self, session_id: str, item: dict[str, Any]) -> None:
        for watch in list(self._watchers.get(session_id, ())):
            watch.push(item)

    def _move(self, old: str, new: str, reason: str) -> None:
        self._push(old, {"type": "session_moved", "session_id": old, "new_session_id": new, "reason": reason})
        for watch in self._watchers.pop(old, set()):
            watch.session_id = new
            self._watchers.setdefault(new, set()).add(watch)

    def watched(self, session_id: str) -> bool:
        return bool(self._watchers.get(session_id))

    def close_all(self) -> None:
        for watchers in list(self._watchers.values()):
            for watch in list(watchers):
                watch.close()
