"""The live event stream of one conversation to a page (Server-Sent Events), and the set of
open pages the adapter delivers outbox replies to."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import defaultdict
from typing import Any, AsyncIterator

from vigil.gateway.adapters.base import Subscription
from vigil.gateway.cluster.relay import Relayed

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0
QUEUE_LIMIT = 2_000
"""Events buffered for a page that reads too slowly; past this the stream is closed (the
page reconnects and reloads the history)."""

_END: dict[str, Any] = {"type": "__end__"}


class OpenPages(Relayed):
    """The event queues of the pages that have a conversation open, by session id. With
    several workers on one store, what is published here reaches their pages too."""

    def __init__(self) -> None:
        self._queues: dict[str, set[asyncio.Queue[dict[str, Any]]]] = defaultdict(set)
        self.relay = None

    def open(self, session_id: str) -> asyncio.Queue[dict[str, Any]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_LIMIT)
        self._queues[session_id].add(queue)
        return queue

    def close(self, session_id: str, queue: asyncio.Queue[dict[str, Any]]) -> None:
        queues = self._queues.get(session_id)
        if queues is not None:
            queues.discard(queue)
            if not queues:
                del self._queues[session_id]

    def publish(self, session_ids: set[str], event: dict[str, Any], *, everyone: bool = False) -> int:
        """Put ``event`` on every page open on one of ``session_ids`` (``everyone``: on every
        open page), here and, shared, on the other workers; return how many pages here took it."""
        if self.relay is not None:
            self.relay({"ids": sorted(session_ids), "all": everyone, "e": event})
        return self._offer_all(self.open_sessions() | session_ids if everyone else session_ids, event)

    def deliver(self, message: dict[str, Any]) -> None:
        """Apply what another worker's pages were given (not shared again)."""
        ids, event = message.get("ids"), message.get("e")
        if isinstance(ids, list) and isinstance(event, dict):
            targets = {sid for sid in ids if isinstance(sid, str)}
            self._offer_all(self.open_sessions() | targets if message.get("all") is True else targets, event)

    def missed(self) -> None:
        """Replies shared by other workers may have been lost: every page reloads."""
        for session_id in self.open_sessions():
            self._offer_all({session_id}, {"type": "stale", "session_id": session_id})

    def _offer_all(self, session_ids: set[str], event: dict[str, Any]) -> int:
        delivered = 0
        for session_id in session_ids:
            for queue in list(self._queues.get(session_id, ())):
                delivered += _offer(queue, event)
        return delivered

    def open_sessions(self) -> set[str]:
        """The conversations some page has open."""
        return set(self._queues)

    def count(self, session_id: str | None = None) -> int:
        if session_id is not None:
            return len(self._queues.get(session_id, ()))
        return sum(len(queues) for queues in self._queues.values())

    def end_all(self) -> None:
        """End every open stream (the gateway is stopping)."""
        for queues in self._queues.values():
            for queue in queues:
                _offer(queue, _END, force=True)


def _offer(queue: asyncio.Queue[dict[str, Any]], event: dict[str, Any], *, force: bool = False) -> int:
    try:
        queue.put_nowait(event)
        return 1
    except asyncio.QueueFull:
        if force:
            queue.get_nowait()
            queue.put_nowait(event)
        else:  # a stuck page: end its stream rather than grow without bound
            queue.get_nowait()
            queue.put_nowait(_END)
        return 0


def frame(event: dict[str, Any]) -> str:
    """One SSE frame: ``data: <json>`` and a blank line (JSON never contains a raw newline)."""
    return f"data: {json.dumps(event, ensure_ascii=False, separators=(',', ':'))}\n\n"


async def _pump(subscription: Subscription, queue: asyncio.Queue[dict[str, Any]]) -> None:
    try:
        async for event in subscription:
            _offer(queue, event)
    except Exception:  # pragma: no cover - a broken subscription ends the page's stream
        log.exception("web chat: the live event subscription failed")
    finally:
        _offer(queue, _END, force=True)


async def event_stream(
    subscription: Subscription, pages: OpenPages, session_id: str,
    *, keepalive: float = KEEPALIVE_SECONDS,
) -> AsyncIterator[str]:
    """The SSE body for one page: the conversation's live events and the outbox replies the
    adapter delivers to it, with a keepalive comment while quiet. Cancelled (the client went
    away) or ended (the gateway stops), it closes the subscription."""
    queue = pages.open(session_id)
    pump = asyncio.create_task(_pump(subscription, queue))
    try:
        yield ": connected\n\n"
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), keepalive)
            except asyncio.TimeoutError:
                yield ": keepalive\n\n"
                continue
            if event is _END:
                return
            yield frame(event)
    finally:
        pages.close(session_id, queue)
        subscription.close()
        pump.cancel()
