"""Outbox entries to Telegram: text split at 4096 characters and sent as plain text (the
turn's streamed preview becomes the first piece), ``file`` entries as documents.

A retried entry does not repeat what already went out: the pieces sent are remembered per
entry, and a preview claimed by an entry stays with it until the entry is delivered. An
entry with no preview in this process (the gateway restarted since the turn streamed)
finishes the durable preview recorded for it, if there is one: "message is not modified"
then means it was delivered before the restart.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.telegram.inbound import target_of
from vigil.gateway.adapters.telegram.outbound import MAX_CAPTION, delivery_error, preview, split_text
from vigil.gateway.adapters.streaming import Stream, Streamer
from vigil.gateway.adapters.telegram.editing import gone, unmodified
from vigil.store.gateway.gateway_tables import OutboxEntry

STREAMED_KINDS = frozenset({"reply", "heartbeat"})
UPLOAD_TIMEOUT = 120.0


class Sender:
    def __init__(self, bot: Callable[[], Any], streams: Streamer) -> None:
        self._bot = bot
        self.streams = streams
        self._done: dict[int, int] = {}
        """Pieces of an entry already delivered (by outbox id)."""
        self._claimed: dict[int, Stream] = {}

    async def send(self, entry: OutboxEntry) -> None:
        """Deliver ``entry`` or raise :class:`DeliveryError` (see :func:`delivery_error`)."""
        try:
            chat_id, thread_id = target_of(entry.route)
        except ValueError:
            raise DeliveryError(f"'{entry.route.chat}' is not a Telegram chat id", retryable=False) from None
        try:
            if entry.kind == "file":
                await self._send_file(entry, chat_id, thread_id)
            else:
                await self._send_text(entry, chat_id, thread_id)
        except DeliveryError as exc:
            if not exc.retryable:
                self._forget(entry.id)
            raise
        except Exception as exc:
            error = delivery_error(exc)
            if not error.retryable:
                self._forget(entry.id)
            raise error from None
        self._forget(entry.id)

    def _forget(self, entry_id: int) -> None:
        """``entry_id`` is done with (delivered or failed for good), and so is its preview."""
        self._done.pop(entry_id, None)
        stream = self._claimed.pop(entry_id, None)
        if stream is not None:
            self.streams.previews.done(stream.durable)

    async def _send_text(self, entry: OutboxEntry, chat_id: int, thread_id: int | None) -> None:
        pieces = split_text(entry.text)
        if not pieces:
            return
        bot = self._bot()
        stream = self._claimed.get(entry.id)
        if stream is None and entry.kind in STREAMED_KINDS:
            stream = (await self.streams.claim(entry.route, entry.text)
                      or await self._recorded(entry, chat_id, thread_id))
            if stream is not None:
                self._claimed[entry.id] = stream
        done = self._done.get(entry.id, 0)
        if stream is not None and stream.message is not None and done == 0:
            if stream.shown == pieces[0] or await self._edit(bot, chat_id, stream.message, pieces[0]):
                stream.shown = pieces[0]
                done = self._done[entry.id] = 1
        for index in range(done, len(pieces)):
            await bot.send_message(chat_id, pieces[index], message_thread_id=thread_id)
            self._done[entry.id] = index + 1

    async def _recorded(self, entry: OutboxEntry, chat_id: int, thread_id: int | None) -> Stream | None:
        """The preview a previous run recorded for ``entry``, as a finished stream."""
        found = await self.streams.previews.find(entry)
        if found is None or not isinstance(found.message, int):
            return None
        return self.streams.recorded(entry.route, found, entry.text)

    @staticmethod
    async def _edit(bot: Any, chat_id: int, message_id: int, text: str) -> bool:
        """Make the preview show ``text``; ``False`` when it cannot be edited (any more):
        the text then goes out as a new message."""
        from telegram.error import BadRequest

        try:
            await bot.edit_message_text(text, chat_id=chat_id, message_id=message_id)
        except BadRequest as exc:
            if unmodified(exc):
                return True
            if gone(exc):
                return False
            raise
        return True

    async def _send_file(self, entry: OutboxEntry, chat_id: int, thread_id: int | None) -> None:
        raw = entry.meta.get("path")
        if not isinstance(raw, str) or not raw:
            raise DeliveryError("the file entry names no file", retryable=False)
        path = Path(raw)
        if not path.is_absolute() or not await asyncio.to_thread(path.is_file):
            raise DeliveryError(f"the file {path.name} is not there any more", retryable=False)
        name = str(entry.meta.get("name") or path.name)
        caption = preview(entry.text, MAX_CAPTION) if entry.text else None
        data = await asyncio.to_thread(path.read_bytes)
        await self._bot().send_document(chat_id, data, filename=name, caption=caption, message_thread_id=thread_id,
                                        write_timeout=UPLOAD_TIMEOUT)
