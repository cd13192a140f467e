"""The answer appearing as it is written: one Slack message per turn, edited as it streams.

When a person's turn begins a placeholder (:data:`WORKING`) is posted in the conversation's
thread — the "working" indicator — and every stream delta edits it (``chat.update``, at most
once per :data:`EDIT_INTERVAL` seconds per message, as Slack's rate limits ask). The final
answer comes through the outbox (:meth:`Drafts.take` hands the placeholder to the sender,
which replaces it with the answer); a turn that ends with nothing to say removes it.
The placeholder's ``ts`` is kept in the store as it is posted
(:mod:`vigil.gateway.adapters.previews`): after a restart the answer still replaces it, and a
turn resumed after the restart streams into it again, so no "working" message stays behind.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.previews import DurablePreviews, Preview
from vigil.gateway.adapters.slack.mrkdwn import to_mrkdwn
from vigil.gateway.adapters.slack.split import LIMIT
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.adapters.slack.web import SlackApi

log = logging.getLogger(__name__)

WORKING = "_… working_"
EDIT_INTERVAL = 1.0
POST_WAIT = 10.0
"""Seconds the sender waits for the placeholder to be posted before it posts the answer anew."""


@dataclass(eq=False)
class Draft:
    route: RouteKey
    text: str = ""
    ts: str | None = None
    posted: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    posted_at: float = 0.0
    """When the placeholder was posted: a quick answer replaces it with no edit in between."""
    last_edit: float = 0.0
    """When the last ``chat.update`` of it ended (monotonic; 0: never)."""
    flush: asyncio.TimerHandle | None = None
    closed: bool = False
    ended: bool = False
    durable: Preview | None = None


@dataclass(frozen=True)
class Placeholder:
    """What :meth:`Drafts.take` hands the sender: the message to replace and its record."""

    ts: str | None
    durable: Preview | None = None


class Drafts:
    """The placeholders of the turns running or waiting for their answer to be sent."""

    def __init__(self, api: Callable[[], "SlackApi | None"], spawn: Callable[[Any], None],
                 previews: DurablePreviews, interval: float = EDIT_INTERVAL) -> None:
        self._api = api
        self.previews = previews
        self._spawn = spawn
        self.interval = interval
        self._waiting: dict[RouteKey, deque[Draft]] = {}
        self._current: dict[RouteKey, Draft | None] = {}

    async def began(self, route: RouteKey, kind: str, text: str = "", session: str | None = None) -> None:
        """A turn began: a person's gets a placeholder (the one it had before a restart, if it
        is resumed); deltas of any other go nowhere."""
        if kind != "user":
            self._current[route] = None
            return
        draft = Draft(route)
        self._waiting.setdefault(route, deque()).append(draft)
        self._current[route] = draft
        api = self._api()
        adopted = self.previews.adopt(route, kind, text) if api is not None else None
        try:
            if adopted is not None:
                draft.ts, draft.durable, draft.posted_at = str(adopted.message), adopted, time.monotonic()
            elif api is not None:
                answer = await api.call("chat.postMessage", channel=route.chat, thread_ts=route.thread or None,
                                        text=WORKING)
                draft.ts = answer.get("ts")
                draft.posted_at = time.monotonic()
                if draft.ts:
                    draft.durable = await self.previews.remember(route, draft.ts, kind=kind, text=text, session=session)
        except DeliveryError as exc:
            log.warning("Slack: cannot post the working indicator: %s", exc)
        finally:
            draft.posted.set()
        if draft.text:
            self._schedule(draft)

    def delta(self, route: RouteKey, text: str) -> None:
        draft = self._current.get(route)
        if draft is None or draft.ended or draft.closed:
            return
        draft.text += text
        self._schedule(draft)

    async def ended(self, route: RouteKey, event: dict[str, Any]) -> None:
        """A turn ended: one with no answer coming (stopped, empty) loses its placeholder."""
        draft = self._current.pop(route, None)
        if draft is None:
            return
        draft.ended = True
        if event.get("cancelled") or (not event.get("content") and not event.get("error")):
            self._drop(draft)
            await draft.posted.wait()
            async with draft.lock:
                draft.closed = True
                await self._remove(draft)
            self.previews.done(draft.durable)

    async def take(self, route: RouteKey) -> Placeholder:
        """The oldest placeholder of ``route`` for the sender to replace with its answer (no
        ``ts``: none); no edit touches it afterwards. Returns no sooner than the placeholder
        may be edited again."""
        queue = self._waiting.get(route)
        if not queue:
            return Placeholder(None)
        draft = queue.popleft()
        if not queue:
            self._waiting.pop(route, None)
        if self._current.get(route) is draft:
            self._current.pop(route, None)
        try:
            await asyncio.wait_for(draft.posted.wait(), POST_WAIT)
        except asyncio.TimeoutError:
            pass
        async with draft.lock:
            draft.closed = True
            if draft.flush is not None:
                draft.flush.cancel()
            if draft.ts is not None and draft.last_edit:  # the final edit keeps the pace of the others
                await asyncio.sleep(max(0.0, draft.last_edit + self.interval - time.monotonic()))
            return Placeholder(draft.ts, draft.durable)

    def clear(self) -> None:
        for queue in self._waiting.values():
            for draft in queue:
                draft.closed = True
                if draft.flush is not None:
                    draft.flush.cancel()
        self._waiting.clear()
        self._current.clear()

    # -- internals ----------------------------------------------------------------------------
    def _drop(self, draft: Draft) -> None:
        queue = self._waiting.get(draft.route)
        if queue is not None and draft in queue:
            queue.remove(draft)
            if not queue:
                self._waiting.pop(draft.route, None)

    def _schedule(self, draft: Draft) -> None:
        if draft.ts is None or draft.flush is not None or draft.closed:
            return
        wait = max(0.0, max(draft.last_edit, draft.posted_at) + self.interval - time.monotonic())
        loop = asyncio.get_running_loop()
        draft.flush = loop.call_later(wait, lambda: self._spawn(self._edit(draft)))

    async def _edit(self, draft: Draft) -> None:
        async with draft.lock:
            draft.flush = None
            if draft.closed or draft.ts is None:
                return
            text = to_mrkdwn(draft.text)
            if len(text) > LIMIT:
                text = text[: LIMIT - 2] + " …"
            api = self._api()
            if api is None:
                return
            draft.last_edit = time.monotonic()
            try:
                await api.call("chat.update", channel=draft.route.chat, ts=draft.ts, text=text + " …")
            except DeliveryError as exc:
                log.warning("Slack: cannot show the answer so far: %s", exc)
            draft.last_edit = time.monotonic()

    async def _remove(self, draft: Draft) -> None:
        api = self._api()
        if api is None or draft.ts is None:
            return
        try:
            await api.call("chat.delete", channel=draft.route.chat, ts=draft.ts)
        except DeliveryError as exc:
            log.warning("Slack: cannot remove the working indicator: %s", exc)
