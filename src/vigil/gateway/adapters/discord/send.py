"""What goes out to Discord: outbox entries, and the messages an answer streams into.

Every entry goes to its route's thread, else its channel. An answer longer than Discord's 2,000
characters is split (:mod:`vigil.gateway.adapters.splitting`, code blocks closed and reopened);
the parts already sent of an entry that failed half-way are not sent again when it is retried.
A turn's answer (``reply``, ``notice``, ``heartbeat``) becomes the message it streamed into,
by one last edit (:mod:`vigil.gateway.adapters.streaming`) — after a restart the one the store
recorded (:mod:`vigil.gateway.adapters.previews`) — so it is never shown twice. What answers a
``/vigil …`` goes back through that interaction, seen only by the person who ran it, while
Discord still takes it (15 minutes); a ``file`` entry is an attachment with its text.
Discord's Markdown is the answer's own: nothing is converted, and no answer pings anyone
(mentions are off for every message the bot sends).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

import aiohttp
import discord

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.discord.files import upload
from vigil.gateway.adapters.splitting import split_text
from vigil.gateway.adapters.streaming import MessageGone, Outcome
from vigil.store.gateway.gateway_tables import OutboxEntry, RouteKey

if TYPE_CHECKING:
    from vigil.gateway.adapters.discord.adapter import DiscordAdapter

T = TypeVar("T")
LIMIT = 2000
SUFFIX = " …"
TURN_KINDS = ("reply", "notice", "heartbeat")
UNKNOWN_MESSAGE = 10008


def delivery_error(exc: BaseException, what: str) -> DeliveryError:
    """The :class:`DeliveryError` a failed call means: retryable for the network, 5xx and rate
    limits; :class:`MessageGone` for a message that is no more; permanent otherwise."""
    if isinstance(exc, discord.RateLimited):
        return DeliveryError(f"Discord {what}: rate limited", retry_after=exc.retry_after)
    if isinstance(exc, discord.HTTPException):
        said = f"Discord {what}: HTTP {exc.status} {exc.text or ''}".rstrip()
        if isinstance(exc, discord.NotFound) and exc.code == UNKNOWN_MESSAGE:
            return MessageGone(said)
        return DeliveryError(said, retryable=exc.status >= 500 or exc.status in (408, 429))
    return DeliveryError(f"Discord {what}: cannot reach Discord ({type(exc).__name__})")


async def call(work: Awaitable[T], what: str) -> T:
    """``work`` with Discord's errors as :class:`DeliveryError`."""
    try:
        return await work
    except (discord.HTTPException, discord.RateLimited, aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
        raise delivery_error(exc, what) from None


class Messages:
    """Posting and editing in a route's place, for the streamer and the sender."""

    def __init__(self, bot: Callable[[], discord.Client | None]) -> None:
        self._bot = bot

    def channel(self, route: RouteKey) -> discord.PartialMessageable:
        bot = self._bot()
        target = route.thread or route.chat
        if bot is None:
            raise DeliveryError("Discord is not connected")
        if not target.isdigit():
            raise DeliveryError(f"no Discord channel to send to ({target!r})", retryable=False)
        return bot.get_partial_messageable(int(target))

    async def post(self, route: RouteKey, text: str) -> int:
        sent = await call(self.channel(route).send(text), "send")
        return sent.id

    async def edit(self, route: RouteKey, message: Any, text: str) -> None:
        await call(self.channel(route).get_partial_message(int(message)).edit(content=text), "edit")

    async def finish(self, route: RouteKey, message: Any, shown: str, outcome: Outcome) -> None:
        partial = self.channel(route).get_partial_message(int(message))
        if not shown or outcome == "empty":
            await call(partial.delete(), "delete")
            return
        note = "*(stopped)*" if outcome == "stopped" else "*(failed)*"
        await call(partial.edit(content=shown.removesuffix(SUFFIX)[: LIMIT - 20] + "\n" + note), "edit")

    async def typing(self, route: RouteKey) -> None:
        await call(self.channel(route).typing(), "typing")


async def deliver(adapter: "DiscordAdapter", entry: OutboxEntry) -> None:
    """Send ``entry``; raises ``DeliveryError`` (retryable or not) when Discord refuses."""
    messages = adapter.messages
    channel = messages.channel(entry.route)
    if entry.kind == "file":
        await call(channel.send(content=entry.text[:LIMIT] or None, file=upload(entry.meta)), "upload")
        return
    parts = split_text(entry.text or "", LIMIT, code_blocks=True) or ["*(no text)*"]
    done, stream = adapter.sending.get(entry.id, (0, None))
    interaction = await adapter.interaction_of(entry)
    if interaction is not None:
        if await _through(interaction, parts, done, adapter, entry):
            return
        done = 0  # Discord forgot it: the whole answer goes to the channel
    if entry.kind in TURN_KINDS and entry.id not in adapter.sending:
        stream = await adapter.streamer.claim(entry.route, entry.text)
        if stream is None:
            found = await adapter.previews.find(entry)  # streamed before a restart
            if found is not None:
                stream = adapter.streamer.recorded(entry.route, found, entry.text)
        adapter.sending[entry.id] = (0, stream)
    durable = stream.durable if stream is not None else None
    try:
        for index, part in enumerate(parts[done:], done):
            if index == 0 and stream is not None and stream.message is not None:
                try:
                    await messages.edit(entry.route, stream.message, part)
                except MessageGone:
                    await messages.post(entry.route, part)
            else:
                await messages.post(entry.route, part)
            adapter.sending[entry.id] = (index + 1, stream)
    except DeliveryError as exc:
        if not exc.retryable:  # failed for good: nothing more of it will come
            adapter.sending.pop(entry.id, None)
            adapter.previews.done(durable)
        raise
    adapter.sending.pop(entry.id, None)
    adapter.previews.done(durable)


async def _through(interaction: discord.Interaction, parts: list[str], done: int, adapter: "DiscordAdapter",
                   entry: OutboxEntry) -> bool:
    """Answer a ``/vigil …`` through its interaction (only its user sees it); ``False`` once
    Discord no longer takes it (the answer then goes to the channel)."""
    try:
        for index, part in enumerate(parts[done:], done):
            if index == 0:
                await call(interaction.edit_original_response(content=part), "interaction response")
            else:
                await call(interaction.followup.send(part, ephemeral=True), "follow-up")
            adapter.sending[entry.id] = (index + 1, None)
    except DeliveryError as exc:
        if exc.retryable:
            raise
        adapter.sending[entry.id] = (0, None)
        return False
    adapter.sending.pop(entry.id, None)
    return True
