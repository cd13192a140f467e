"""The answer appearing as it is written: one message per turn, edited (``m.replace``) as the
text streams in, at most once per ``interval`` seconds per room, and a typing notice while
the turn runs.

The streamed message is only a preview: the answer itself comes through the outbox, and
:meth:`Streams.claim` hands the preview showing it to the sender, which makes it the final
answer by one last edit instead of sending the answer twice. The preview's event id is
recorded in the store as it is first shown (:mod:`vigil.gateway.adapters.previews`), so a
gateway restarted before the answer went out finishes that message too, and a turn resumed
after the restart streams into it again. A quick answer (within one interval) is never
previewed: it arrives as one message. :meth:`Streams.event` changes state without awaiting,
so events apply in the order the gateway made them; the network calls run in each stream's
own tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.matrix.content import edit, in_thread, message, preview
from vigil.gateway.adapters.previews import DurablePreviews, Preview
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.adapters.matrix.client import Homeserver

log = logging.getLogger(__name__)

EDIT_INTERVAL = 1.0
CLOSE_WAIT = 2.0
TYPING_MS = 30_000


@dataclass(eq=False)
class Stream:
    """One turn's preview message."""

    route: RouteKey
    kind: str = "user"
    began_with: str = ""
    session: str | None = None
    text: str = ""
    final: str | None = None
    ended: bool = False
    event_id: str | None = None
    shown: str = ""
    durable: Preview | None = None
    dirty: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    began_at: float = field(default_factory=time.monotonic)

    def matches(self, answer: str) -> bool:
        """Whether this preview shows (the start of) ``answer``."""
        if self.ended:
            return self.final == answer
        return bool(self.text) and answer.startswith(self.text)


class Streams:
    """The running and finished-but-unclaimed previews of every route."""

    def __init__(self, client: Callable[[], "Homeserver | None"], previews: DurablePreviews, *,
                 interval: float = EDIT_INTERVAL) -> None:
        self._client = client
        self.previews = previews
        self.interval = interval
        self._by_route: dict[RouteKey, list[Stream]] = {}
        self._last_edit: dict[str, float] = {}

    def event(self, route: RouteKey, item: dict[str, Any]) -> None:
        """Apply one live event; never raises for a platform error."""
        kind = item.get("type")
        if kind == "turn_began":
            stream = Stream(route, str(item.get("kind") or "user"), str(item.get("text") or ""), item.get("session_id"))
            adopted = self.previews.adopt(route, stream.kind, stream.began_with)
            if adopted is not None and isinstance(adopted.message, str):  # resumed after a restart
                stream.event_id, stream.durable = adopted.message, adopted
            self._by_route.setdefault(route, []).append(stream)
            stream.tasks = [asyncio.create_task(self._flush(stream)), asyncio.create_task(self._typing(stream))]
            return
        stream = self._running(route)
        if stream is None:
            return
        if kind == "delta":
            stream.text += str(item.get("text") or "")
            stream.dirty.set()
        elif kind == "turn_ended":
            stream.ended = True
            stream.dirty.set()
            content = item.get("content")
            if item.get("cancelled") or item.get("error") or not content:
                self._drop(stream)
                self.previews.done(stream.durable)
                note = "(stopped)" if item.get("cancelled") else "(failed)" if item.get("error") else None
                if note is not None:
                    stream.tasks.append(asyncio.create_task(self._mark(stream, note)))
            else:
                stream.final = str(content)

    def _running(self, route: RouteKey) -> Stream | None:
        for stream in reversed(self._by_route.get(route, [])):
            if not stream.ended:
                return stream
        return None

    def _drop(self, stream: Stream) -> None:
        streams = self._by_route.get(stream.route, [])
        if stream in streams:
            streams.remove(stream)
        if not streams:
            self._by_route.pop(stream.route, None)

    async def claim(self, route: RouteKey, answer: str) -> Stream | None:
        """The oldest preview of ``route`` showing ``answer``, taken out of streaming, or ``None``."""
        for stream in list(self._by_route.get(route, [])):
            if stream.matches(answer):
                stream.ended = True
                stream.dirty.set()
                async with stream.lock:  # no call in flight: stopping its tasks loses no event id
                    self._drop(stream)
                    for task in stream.tasks:
                        task.cancel()
                await asyncio.gather(*stream.tasks, return_exceptions=True)
                if stream.event_id is not None:  # the final edit keeps the pace of the others
                    wait = self._last_edit.get(route.chat, 0.0) + self.interval - time.monotonic()
                    await asyncio.sleep(max(0.0, wait))
                return stream
        return None

    async def close(self) -> None:
        """Stop streaming; a call in flight may finish (within :data:`CLOSE_WAIT` s) so that a
        preview just sent is recorded for the next start."""
        streams = [stream for each in self._by_route.values() for stream in each]
        self._by_route.clear()
        for stream in streams:
            stream.ended = True
            stream.dirty.set()
        tasks = [task for stream in streams for task in stream.tasks]
        if tasks:
            await asyncio.wait(tasks, timeout=CLOSE_WAIT)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _flush(self, stream: Stream) -> None:
        while not stream.ended:
            await stream.dirty.wait()
            stream.dirty.clear()
            now = time.monotonic()
            wait = self._last_edit.get(stream.route.chat, 0.0) + self.interval - now
            if stream.event_id is None:
                wait = max(wait, stream.began_at + self.interval - now)
            if wait > 0:
                await asyncio.sleep(wait)
            text = preview(stream.text) if stream.text.strip() else ""
            if stream.ended or not text or text == stream.shown:
                continue
            async with stream.lock:
                if stream.ended and stream.event_id is not None:
                    return
                await self._show(stream, text)

    async def _show(self, stream: Stream, text: str) -> None:
        client = self._client()
        if client is None:
            return
        self._last_edit[stream.route.chat] = time.monotonic()
        try:
            shown = message(text, formatted=False)
            if stream.event_id is None:
                stream.event_id = await client.send(stream.route.chat, in_thread(shown, stream.route.thread),
                                                    txn=_txn())
                stream.durable = await self.previews.remember(stream.route, stream.event_id, kind=stream.kind,
                                                              text=stream.began_with, session=stream.session,
                                                              shown=stream.text.strip())
            else:
                await client.send(stream.route.chat, edit(stream.event_id, shown), txn=_txn())
            stream.shown = text
        except DeliveryError as exc:  # the preview waits; the answer still comes through the outbox
            log.info("matrix: preview in %s not updated: %s", stream.route.chat, exc)
            if exc.retry_after:
                self._last_edit[stream.route.chat] = time.monotonic() + exc.retry_after

    async def _mark(self, stream: Stream, note: str) -> None:
        async with stream.lock:
            client = self._client()
            if client is None or stream.event_id is None or not stream.shown:
                return
            with contextlib.suppress(DeliveryError):
                text = stream.shown.removesuffix(" …") + f" … {note}"
                await client.send(stream.route.chat, edit(stream.event_id, message(text, formatted=False)), txn=_txn())

    async def _typing(self, stream: Stream) -> None:
        client = self._client()
        if client is None or stream.kind != "user":
            return
        room = stream.route.chat
        try:
            await client.call(client.nio.room_typing(room, True, TYPING_MS))
            while not stream.ended:
                await asyncio.sleep(0.1)
        except DeliveryError as exc:
            log.debug("matrix: typing notice in %s failed: %s", room, exc)
        finally:
            with contextlib.suppress(DeliveryError, asyncio.CancelledError):
                await asyncio.shield(client.call(client.nio.room_typing(room, False)))


def _txn() -> str:
    return "vigil-" + uuid.uuid4().hex
