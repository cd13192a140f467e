"""The answer appearing as it is written, for every platform that can edit a sent message.

A platform's adapter implements :class:`EditableMessages` — post a message, edit it, finish
it — and hands the turn's live events to a :class:`Streamer`. The streamer keeps one message
per turn: the first one posted once the turn has run for :attr:`StreamStyle.first_after`
seconds (a quick answer then arrives as one message from the outbox, with no preview a crash
could leave to be answered twice), or at once as a placeholder where the platform shows one
(``"_… working_"``); then edited as the text streams in, at most once per
:attr:`StreamStyle.interval` seconds per chat — the platform's pace, from its declaration
(:attr:`vigil.platforms.spec.Capabilities.edit_interval`) — and cut to the platform's message
limit (:func:`vigil.gateway.adapters.splitting.clip`).

The streamed message is only a preview: the answer itself comes through the outbox, and the
adapter's ``send`` takes the preview that shows it with :meth:`Streamer.claim` and makes it
the final answer by one last edit (which keeps the pace too) instead of sending the answer a
second time. The preview's message id is recorded in the store as it is first shown
(:mod:`vigil.gateway.adapters.previews`): a gateway restarted before the answer went out
finishes that message, and a turn resumed after the restart streams into it again. A turn
that ends with no answer coming (stopped, failed, said nothing) has its message finished by
:meth:`EditableMessages.finish` (marked, or removed).

:meth:`Streamer.live` changes state before it awaits anything, so events are applied in the
order the gateway produced them; the network calls run in each stream's own tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.splitting import Measure, clip

if TYPE_CHECKING:
    from vigil.gateway.adapters.previews import DurablePreviews, Preview
    from vigil.platforms.spec import Platform
    from vigil.store.gateway.gateway_tables import RouteKey

log = logging.getLogger(__name__)

Outcome = Literal["stopped", "failed", "empty"]
"""Why a turn's message gets no answer: stopped by the person, failed, or nothing to say."""

CLOSE_WAIT = 2.0
"""Seconds :meth:`Streamer.close` lets a call in flight finish (so a message just posted is
recorded for the next start)."""
POST_WAIT = 10.0
"""Seconds :meth:`Streamer.live` waits for a placeholder to be posted."""


class MessageGone(DeliveryError):
    """The message cannot be edited (any more): deleted, or too old. The streamer posts a new
    one next time; the sender sends the answer as a new message."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class EditableMessages(Protocol):
    """What a platform does for the :class:`Streamer`. Each call raises
    :class:`~vigil.gateway.adapters.base.DeliveryError` when the platform refuses (with
    ``retry_after`` for a rate limit: the stream waits that long), :class:`MessageGone`
    when the message to edit is no more."""

    async def post(self, route: "RouteKey", text: str) -> Any:
        """Send a new message showing ``text`` to ``route``; return its id (an int or a
        string that survives a JSON round trip: it is recorded in the store)."""
        ...

    async def edit(self, route: "RouteKey", message: Any, text: str) -> None:
        """Make ``message`` show ``text``. An edit that changes nothing is no error."""
        ...

    async def finish(self, route: "RouteKey", message: Any, shown: str, outcome: Outcome) -> None:
        """The turn of ``message`` (showing ``shown``, which is ``""`` for a placeholder) ended
        with no answer coming: mark it (``… (stopped)``) or remove it."""
        ...

    async def typing(self, route: "RouteKey") -> None:
        """Show that the agent is at work (called every :attr:`StreamStyle.typing_every`
        seconds while the turn runs, where that is set)."""
        ...


def _same(text: str) -> str:
    return text


@dataclass(frozen=True, slots=True)
class StreamStyle:
    """How a platform streams. Build it from the platform's declaration with :meth:`of`."""

    interval: float = 1.0
    """Seconds between two edits (or posts) in one chat, at least."""
    limit: int | None = None
    """Longest message, in ``measure`` units; a longer text is cut with an ellipsis."""
    measure: Measure = len
    render: Callable[[str], str] = _same
    """The answer's Markdown as the platform shows it (before it is cut to ``limit``)."""
    suffix: str = ""
    """Shown after a text still being written (``" …"``, say)."""
    placeholder: str | None = None
    """Posted as a person's turn begins (the "working" indicator); ``None``: the first message
    is posted with the text, after ``first_after`` seconds."""
    first_after: float | None = None
    """Seconds a turn runs before its first message (``None``: one ``interval``)."""
    kinds: frozenset[str] | None = None
    """The kinds of turn that stream (``user``, ``heartbeat``, …); ``None``: all."""
    typing_every: float | None = None
    """Seconds between two :meth:`EditableMessages.typing` calls; ``None``: never."""
    typing_kinds: frozenset[str] | None = None
    """The kinds of turn that show typing; ``None``: every kind that streams."""
    failed_answer_replaces: bool = False
    """A failed turn's message waits for the failure notice to replace it (``True``) instead of
    being finished as ``failed``."""

    @classmethod
    def of(cls, platform: "Platform", **changes: Any) -> "StreamStyle":
        """The style of ``platform``: its declared edit pace and message limit, and ``changes``."""
        capabilities = platform.capabilities
        base = cls(interval=capabilities.edit_interval, limit=capabilities.max_message_chars)
        return replace(base, **changes)

    def show(self, text: str) -> str:
        """What a message being written shows for ``text``."""
        rendered = self.render(text)
        if self.limit is not None:
            rendered = clip(rendered, self.limit - self.measure(self.suffix), measure=self.measure)
        return rendered + self.suffix


@dataclass(eq=False)
class Stream:
    """One turn's message. After :meth:`Streamer.claim`: ``message`` is the id to edit into the
    answer (``None``: none was posted), ``shown`` what it shows, ``durable`` its record (hand
    it to ``previews.done`` once the answer is out)."""

    route: "RouteKey"
    kind: str = "user"
    began_with: str = ""
    """The turn's input (what links its durable record to its reply after a restart)."""
    session: str | None = None
    text: str = ""
    """The answer so far."""
    final: str | None = None
    ended: bool = False
    closed: bool = False
    """Claimed or stopped: no call touches the message any more."""
    message: Any = None
    shown: str = ""
    durable: "Preview | None" = None
    posted: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the first post was tried (or is not to be)."""
    dirty: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    began_at: float = field(default_factory=time.monotonic)

    def matches(self, answer: str) -> bool:
        """Whether this message shows (the start of) ``answer``."""
        if self.ended:
            return self.final == answer
        return bool(self.text) and answer.startswith(self.text)  # a turn that has shown nothing is not it

    def stop(self) -> None:
        self.ended = True
        self.dirty.set()
        self.done.set()


class Streamer:
    """The running and finished-but-unclaimed messages of every route of one adapter."""

    def __init__(self, messages: EditableMessages, previews: "DurablePreviews", style: StreamStyle) -> None:
        self.messages = messages
        self.previews = previews
        self.style = style
        self._by_route: dict["RouteKey", list[Stream]] = {}
        self._current: dict["RouteKey", Stream | None] = {}
        self._last: dict[str, float] = {}
        """When the last call in each chat ended (monotonic), for the pace."""

    @property
    def interval(self) -> float:
        """Seconds between two calls in one chat, at least (the style's pace)."""
        return self.style.interval

    # -- the gateway's side -----------------------------------------------------------------------
    async def live(self, route: "RouteKey", item: dict[str, Any]) -> None:
        """Apply one live event (``turn_began``, ``delta``, ``turn_ended``; others are
        ignored); never raises for a platform error. A turn that begins with a placeholder
        returns once it is posted."""
        stream = self.event(route, item)
        if stream is not None and self.style.placeholder is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stream.posted.wait(), POST_WAIT)

    def event(self, route: "RouteKey", item: dict[str, Any]) -> Stream | None:
        """:meth:`live` without the wait: the stream a ``turn_began`` started, if any."""
        kind = item.get("type")
        if kind == "turn_began":
            return self._began(route, str(item.get("kind") or "user"), str(item.get("text") or ""),
                               item.get("session_id"))
        stream = self._current.get(route)
        if stream is None or stream.ended:
            return None
        if kind == "delta":
            stream.text += str(item.get("text") or "")
            stream.dirty.set()
        elif kind == "turn_ended":
            self._current.pop(route, None)
            stream.ended = True
            stream.dirty.set()
            stream.done.set()
            content = item.get("content")
            outcome: Outcome | None = ("stopped" if item.get("cancelled") else "failed" if item.get("error")
                                       else None if content else "empty")
            if outcome is None or (outcome == "failed" and self.style.failed_answer_replaces):
                stream.final = str(content) if content else None
            else:  # no answer will come for it
                self._drop(stream)
                self.previews.done(stream.durable)
                stream.tasks.append(asyncio.create_task(self._finish(stream, outcome)))
        return None

    async def claim(self, route: "RouteKey", answer: str | None = None) -> Stream | None:
        """The oldest message of ``route`` showing ``answer`` (``None``: the oldest at all),
        taken out of streaming, or ``None``. Returns once no call is in flight for it and,
        when it was posted, no sooner than the platform's pace allows the final edit."""
        for stream in list(self._by_route.get(route, [])):
            if answer is not None and not stream.matches(answer):
                continue
            stream.closed = True
            stream.stop()
            async with stream.lock:  # no call in flight: stopping its tasks loses no message id
                self._drop(stream)
                if self._current.get(route) is stream:
                    self._current.pop(route, None)
                for task in stream.tasks:
                    task.cancel()
            for task in stream.tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if stream.message is not None:
                await asyncio.sleep(max(0.0, self._wait(stream)))
            return stream
        return None

    def recorded(self, route: "RouteKey", preview: "Preview", answer: str) -> Stream:
        """A message a previous run recorded (:meth:`DurablePreviews.find`), as a claimed stream."""
        return Stream(route, kind=preview.kind, final=answer, ended=True, closed=True, message=preview.message,
                      durable=preview)

    async def close(self) -> None:
        """Stop streaming; a call in flight may finish first (within :data:`CLOSE_WAIT` s)."""
        streams = [stream for each in self._by_route.values() for stream in each]
        self._by_route.clear()
        self._current.clear()
        for stream in streams:
            stream.closed = True
            stream.stop()
        tasks = [task for stream in streams for task in stream.tasks]
        if tasks:
            await asyncio.wait(tasks, timeout=CLOSE_WAIT)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- internals --------------------------------------------------------------------------------
    def _began(self, route: "RouteKey", kind: str, text: str, session: str | None) -> Stream | None:
        if self.style.kinds is not None and kind not in self.style.kinds:
            self._current[route] = None  # its deltas go nowhere
            return None
        stream = Stream(route, kind=kind, began_with=text, session=session)
        adopted = self.previews.adopt(route, kind, text)
        if adopted is not None:  # a turn resumed after a restart streams into its old message
            stream.message, stream.durable = adopted.message, adopted
        self._by_route.setdefault(route, []).append(stream)
        self._current[route] = stream
        stream.tasks.append(asyncio.create_task(self._run(stream)))
        typing_kinds = self.style.typing_kinds
        if self.style.typing_every is not None and (typing_kinds is None or kind in typing_kinds):
            stream.tasks.append(asyncio.create_task(self._typing(stream)))
        return stream

    def _drop(self, stream: Stream) -> None:
        streams = self._by_route.get(stream.route, [])
        if stream in streams:
            streams.remove(stream)
        if not streams:
            self._by_route.pop(stream.route, None)

    def _wait(self, stream: Stream) -> float:
        """Seconds before the next call in the stream's chat keeps the pace."""
        return self._last.get(stream.route.chat, 0.0) + self.style.interval - time.monotonic()

    async def _run(self, stream: Stream) -> None:
        """Post the placeholder, then show the text so far at the pace, until the turn ends."""
        try:
            if self.style.placeholder is not None and stream.message is None:
                async with stream.lock:
                    if not stream.closed:
                        await self._call(stream, self.style.placeholder, placeholder=True)
        finally:
            stream.posted.set()
        while not stream.ended:
            await stream.dirty.wait()
            stream.dirty.clear()
            wait = self._wait(stream)
            if stream.message is None:
                first = self.style.interval if self.style.first_after is None else self.style.first_after
                wait = max(wait, stream.began_at + first - time.monotonic())
            if wait > 0:
                await asyncio.sleep(wait)
            text = self.style.show(stream.text)
            if stream.ended or not stream.text.strip() or text == stream.shown:
                continue
            async with stream.lock:
                if stream.closed:
                    return
                await self._call(stream, text)

    async def _call(self, stream: Stream, text: str, *, placeholder: bool = False) -> None:
        """Post or edit the stream's message to show ``text``; a platform error is logged."""
        chat = stream.route.chat
        self._last[chat] = time.monotonic()
        try:
            if stream.message is None:
                stream.message = await self.messages.post(stream.route, text)
                stream.shown = "" if placeholder else text
                stream.durable = await self.previews.remember(
                    stream.route, stream.message, kind=stream.kind, text=stream.began_with, session=stream.session,
                    shown=None if placeholder else stream.text)
            else:
                await self.messages.edit(stream.route, stream.message, text)
                stream.shown = text
            self._last[chat] = time.monotonic()
        except MessageGone as exc:  # the next show posts a new one
            log.info("%s: the message streamed to %s is gone: %s", stream.route.adapter, chat, exc)
            self.previews.done(stream.durable)
            stream.message, stream.durable, stream.shown = None, None, ""
            stream.dirty.set()
        except DeliveryError as exc:
            if exc.retry_after is not None:  # the preview waits; the answer still comes through the outbox
                self._last[chat] = time.monotonic() + exc.retry_after
                stream.dirty.set()
            log.info("%s: the message streamed to %s is not updated: %s", stream.route.adapter, chat, exc)
        except Exception as exc:  # a platform's own error the adapter did not translate
            log.warning("%s: the message streamed to %s is not updated: %s: %s", stream.route.adapter, chat,
                        type(exc).__name__, exc)

    async def _finish(self, stream: Stream, outcome: Outcome) -> None:
        async with stream.lock:  # after a post in flight, which may bring the message id
            if stream.message is None:
                return
            try:
                await self.messages.finish(stream.route, stream.message, stream.shown, outcome)
            except Exception as exc:
                log.info("%s: the message of a turn %s is not finished: %s", stream.route.adapter, outcome, exc)

    async def _typing(self, stream: Stream) -> None:
        every = self.style.typing_every or 1.0
        while not stream.ended:
            try:
                await self.messages.typing(stream.route)
            except Exception as exc:
                log.debug("%s: typing indicator for %s failed: %s", stream.route.adapter, stream.route.chat, exc)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stream.done.wait(), every)
