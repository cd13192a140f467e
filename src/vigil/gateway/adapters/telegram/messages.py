"""One Telegram update into the gateway: a message becomes an :class:`Inbound` (its file
saved first), a button press decides an approval. Used by long polling and the webhook alike;
it returns only once the gateway has the message (stored), and raises when it does not."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from vigil.gateway.adapters.base import Inbound
from vigil.gateway.adapters.saved_files import conversation_directory
from vigil.gateway.adapters.telegram.files import attachment_of, save_attachment
from vigil.gateway.adapters.telegram.inbound import Place, external_id, normalize_command, route_for
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from telegram import Message, Update

    from vigil.gateway.adapters.telegram.adapter import TelegramAdapter

log = logging.getLogger(__name__)


class MessageHandler:
    def __init__(self, adapter: "TelegramAdapter") -> None:
        self.adapter = adapter

    async def handle(self, update: "Update") -> None:
        adapter = self.adapter
        gateway = adapter.gateway
        if gateway is None:
            raise OSError("the adapter has no gateway")
        if update.callback_query is not None:
            await adapter.buttons.press(update.callback_query, gateway, list(adapter.settings.allow))
            return
        message = update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return  # edits, channel posts, service messages: nothing to answer
        text = normalize_command(message.text or message.caption or "", adapter.username)
        if text is None:
            return  # a command for another bot in the group
        thread = message.message_thread_id if message.is_topic_message else None
        place = Place(message.chat.id, message.chat.type, thread, message.from_user.id)
        route = route_for(place, group_per_user=adapter.settings.group_per_user)
        key = external_id(message.chat.id, message.message_id)
        attachment = attachment_of(message)
        if attachment is not None:
            if await self._may_upload(str(message.from_user.id)):
                text = await self._with_file(route, key, message, text)
            else:  # a stranger's file is not downloaded: the gateway answers with a pairing code
                text = f"{text}\n\n[The user sent a file; it was not saved]".strip()
        elif not text.strip():
            return  # a sticker, a location...: nothing the agent can read
        meta: dict[str, Any] = {"chat_type": message.chat.type, "message_id": message.message_id,
                                "update_id": update.update_id}
        await gateway.receive(Inbound(route, key, text, sender=str(message.from_user.id), meta=meta))

    async def _may_upload(self, sender: str) -> bool:
        """Whether the sender may talk to the agent (allow-list, or paired where the gateway
        checks pairing): nobody else makes the gateway create a conversation or write a file."""
        gateway = self.adapter.gateway
        if sender in self.adapter.settings.allow:
            return True
        return gateway is not None and await gateway.may_talk("telegram", sender)

    async def _with_file(self, route: RouteKey, key: str, message: "Message", text: str) -> str:
        """The user's text with the note naming the saved file."""
        gateway = self.adapter.gateway
        assert gateway is not None
        attachment = attachment_of(message)
        assert attachment is not None
        directory = await conversation_directory(gateway, route)
        bot = self.adapter._require_bot()
        note = await save_attachment(bot, attachment, directory, gateway.settings.gateway.upload_max_bytes)
        return f"{text}\n\n{note}" if text.strip() else note
