"""The answer appearing as it is written: one message per turn, edited as the text streams in
(at most one edit per chat every ``interval`` seconds, Telegram's pace), and a typing
indicator while the turn runs.

The streamed message is only a preview: the answer itself comes through the outbox, and
:meth:`Streams.claim` hands the preview that shows it to :meth:`TelegramAdapter.send`, which
makes it the final answer by one last edit instead of sending the answer a second time.
The preview's message id is recorded in the store as it is first shown
(:mod:`vigil.gateway.adapters.previews`): a gateway restarted before the answer went out
finishes that message too, and a turn resumed after the restart streams into it again.
:meth:`Streams.event` changes state without awaiting, so events are applied in the order
the gateway produced them; the network calls run in each stream's own tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from vigil.gateway.adapters.previews import DurablePreviews, Preview
from vigil.gateway.adapters.telegram.inbound import target_of
from vigil.gateway.adapters.telegram.outbound import preview
from vigil.store.gateway.gateway_tables import RouteKey

log = logging.getLogger(__name__)

EDIT_INTERVAL = 1.0
CLOSE_WAIT = 2.0
TYPING_EVERY = 4.0
"""Telegram shows ``typing`` for 5 s or until the bot's next message."""

Call = Callable[..., Awaitable[Any]]


@dataclass(eq=False)
class Stream:
    """One turn's preview message."""

    route: RouteKey
    chat_id: int
    thread_id: int | None
    text: str = ""
    final: str | None = None
    ended: bool = False
    message_id: int | None = None
    shown: str = ""
    """The text the preview message shows now."""
    kind: str = "user"
    began_with: str = ""
    """The turn's input (what links its durable record to its reply after a restart)."""
    session: str | None = None
    durable: Preview | None = None
    dirty: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    began_at: float = field(default_factory=time.monotonic)
    """A turn is previewed only after one edit interval: a quick answer arrives as one message
    from the outbox, with no preview that a crash could leave to be answered twice."""

    def matches(self, answer: str) -> bool:
        """Whether this preview shows (the start of) ``answer``."""
        if self.ended:
            return self.final == answer
        return bool(self.text) and answer.startswith(self.text)  # a turn that has shown nothing is not it


class Streams:
    """The running and finished-but-unclaimed previews of every route."""

    def __init__(self, bot: Callable[[], Any], previews: DurablePreviews, *, interval: float = EDIT_INTERVAL,
                 typing_every: float = TYPING_EVERY, preview_after: float | None = None) -> None:
        self._bot = bot
        self.previews = previews
        self.interval = interval
        self.preview_after = interval if preview_after is None else preview_after
        self.typing_every = typing_every
        self._by_route: dict[RouteKey, list[Stream]] = {}
        self._last_edit: dict[int, float] = {}

    def event(self, route: RouteKey, item: dict[str, Any]) -> None:
        """Apply one live event (see the module docstring); never raises for a platform error."""
        kind = item.get("type")
        if kind == "turn_began":
            try:
                chat_id, thread_id = target_of(route)
            except ValueError:
                return
            kind, text = str(item.get("kind") or "user"), str(item.get("text") or "")
            stream = Stream(route, chat_id, thread_id, kind=kind, began_with=text, session=item.get("session_id"))
            adopted = self.previews.adopt(route, kind, text)
            if adopted is not None and isinstance(adopted.message, int):  # resumed after a restart
                stream.message_id, stream.durable = adopted.message, adopted
            self._by_route.setdefault(route, []).append(stream)
            stream.tasks = [asyncio.create_task(self._flush(stream)), asyncio.create_task(self._typing(stream))]
            return
        stream = self._running(route)
        if stream is None:
            return
        if kind == "delta":
            stream.text += str(item.get("text") or "")
            stream.dirty.set()
        elif kind == "tool_started":
            stream.dirty.set()
        elif kind == "turn_ended":
            stream.ended = True
            stream.dirty.set()
            content = item.get("content")
            if item.get("cancelled") or item.get("error") or not content:
                self._drop(stream)  # no answer will come for it: the preview says it stopped
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
        # its tasks end by themselves: ``ended`` is set

    async def claim(self, route: RouteKey, answer: str) -> Stream | None:
        """The oldest preview of ``route`` showing ``answer``, taken out of streaming (its
        tasks stopped once no call is in flight), or ``None``."""
        for stream in list(self._by_route.get(route, [])):
            if stream.matches(answer):
                stream.ended = True
                stream.dirty.set()
                async with stream.lock:  # no call in flight: stopping its tasks loses no message id
                    self._drop(stream)
                    for task in stream.tasks:
                        task.cancel()
                for task in stream.tasks:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
                return stream
        return None

    async def close(self) -> None:
        """Stop streaming; a call in flight may finish first (within :data:`CLOSE_WAIT` s) so
        that a preview just sent is recorded for the next start."""
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
        """Show the text so far, at most once per ``interval`` per chat, until the turn ends."""
        while not stream.ended:
            await stream.dirty.wait()
            stream.dirty.clear()
            now = time.monotonic()
            wait = self._last_edit.get(stream.chat_id, 0.0) + self.interval - now
            if stream.message_id is None:
                wait = max(wait, stream.began_at + self.preview_after - now)
            if wait > 0:
                await asyncio.sleep(wait)
            text = preview(stream.text)
            if stream.ended or not text.strip() or text == stream.shown:
                continue
            async with stream.lock:
                if stream.ended and stream.message_id is not None:
                    return
                await self._show(stream, text)

    async def _show(self, stream: Stream, text: str) -> None:
        from telegram.error import BadRequest, RetryAfter, TelegramError

        from vigil.gateway.adapters.telegram.outbound import seconds

        bot = self._bot()
        self._last_edit[stream.chat_id] = time.monotonic()
        try:
            if stream.message_id is None:
                sent = await bot.send_message(stream.chat_id, text, message_thread_id=stream.thread_id)
                stream.message_id = sent.message_id
                stream.shown = text
                stream.durable = await self.previews.remember(stream.route, sent.message_id, kind=stream.kind,
                                                              text=stream.began_with, session=stream.session,
                                                              shown=text)
            else:
                await bot.edit_message_text(text, chat_id=stream.chat_id, message_id=stream.message_id)
            stream.shown = text
        except BadRequest as exc:
            if unmodified(exc):  # an adopted preview showing this already
                stream.shown = text
            elif gone(exc):  # an adopted preview deleted meanwhile: the next show sends a new one
                log.info("telegram: preview of chat %s is gone: %s", stream.chat_id, exc)
                self.previews.done(stream.durable)
                stream.message_id, stream.durable = None, None
                stream.dirty.set()
            else:
                log.info("telegram: preview of chat %s not updated: %s", stream.chat_id, exc)
        except RetryAfter as exc:  # the preview waits; the answer still comes through the outbox
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._last_edit[stream.chat_id] = time.monotonic() + seconds(exc.retry_after)
            stream.dirty.set()
        except TelegramError as exc:
            log.info("telegram: preview of chat %s not updated: %s", stream.chat_id, exc)

    async def _mark(self, stream: Stream, note: str) -> None:
        from telegram.error import TelegramError

        async with stream.lock:  # after a send in flight, which may bring the message id
            if stream.message_id is None or not stream.shown:
                return
            try:
                await self._bot().edit_message_text(preview(f"{stream.shown} … {note}"), chat_id=stream.chat_id,
                                                    message_id=stream.message_id)
            except TelegramError as exc:
                log.info("telegram: preview of chat %s not marked: %s", stream.chat_id, exc)

    async def _typing(self, stream: Stream) -> None:
        from telegram.error import TelegramError

        while not stream.ended:
            try:
                await self._bot().send_chat_action(stream.chat_id, "typing", message_thread_id=stream.thread_id)
            except TelegramError as exc:
                log.debug("telegram: typing indicator for %s failed: %s", stream.chat_id, exc)
            try:
                await asyncio.wait_for(_ended(stream), self.typing_every)
            except asyncio.TimeoutError:
                pass


def unmodified(exc: Exception) -> bool:
    """Telegram's answer to an edit that changes nothing: the message shows that text."""
    return "message is not modified" in str(exc).lower()


def gone(exc: Exception) -> bool:
    """Telegram's answer to an edit of a message that cannot be edited (any more)."""
    text = str(exc).lower()
    return "message to edit not found" in text or "message can't be edited" in text


async def _ended(stream: Stream) -> None:
    while not stream.ended:
        await asyncio.sleep(0.05)
