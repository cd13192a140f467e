"""Telegram's side of the shared streamer (:mod:`vigil.gateway.adapters.streaming`): the answer
appearing as it is written in one message per turn, edited at most once a second per chat
(Telegram's pace, from its declaration), with ``typing`` shown while the turn runs.

A turn is previewed only after one edit interval (a quick answer arrives as one message from
the outbox); the preview becomes the answer by one last edit in :mod:`.sending`. A preview whose
turn was stopped or failed is marked ``… (stopped)`` / ``… (failed)``.
"""

from __future__ import annotations

from typing import Any, Callable

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.previews import DurablePreviews
from vigil.gateway.adapters.splitting import utf16_units
from vigil.gateway.adapters.streaming import MessageGone, Outcome, Streamer, StreamStyle
from vigil.gateway.adapters.telegram.inbound import target_of
from vigil.gateway.adapters.telegram.outbound import delivery_error, preview
from vigil.platforms.telegram import TELEGRAM
from vigil.store.gateway.gateway_tables import RouteKey

TYPING_EVERY = 4.0
"""Telegram shows ``typing`` for 5 s or until the bot's next message."""


def streamer(bot: Callable[[], Any], previews: DurablePreviews, *, interval: float | None = None) -> Streamer:
    """The streamer of a Telegram adapter (``interval``: another pace, for tests)."""
    pace: dict[str, Any] = {} if interval is None else {"interval": interval}
    style = StreamStyle.of(TELEGRAM, measure=utf16_units, typing_every=TYPING_EVERY, **pace)
    return Streamer(TelegramMessages(bot), previews, style)


class TelegramMessages:
    """:class:`~vigil.gateway.adapters.streaming.EditableMessages` over python-telegram-bot."""

    def __init__(self, bot: Callable[[], Any]) -> None:
        self._bot = bot

    async def post(self, route: RouteKey, text: str) -> int:
        chat_id, thread_id = _target(route)
        try:
            sent = await self._bot().send_message(chat_id, text, message_thread_id=thread_id)
        except DeliveryError:
            raise
        except Exception as exc:
            raise delivery_error(exc, "preview") from None
        return int(sent.message_id)

    async def edit(self, route: RouteKey, message: Any, text: str) -> None:
        from telegram.error import BadRequest

        chat_id, _thread = _target(route)
        try:
            await self._bot().edit_message_text(text, chat_id=chat_id, message_id=message)
        except BadRequest as exc:
            if unmodified(exc):  # an adopted preview showing this already
                return
            if gone(exc):  # deleted meanwhile: the next show sends a new one
                raise MessageGone(f"Telegram: {exc}") from None
            raise delivery_error(exc, "edit") from None
        except DeliveryError:
            raise
        except Exception as exc:
            raise delivery_error(exc, "edit") from None

    async def finish(self, route: RouteKey, message: Any, shown: str, outcome: Outcome) -> None:
        if outcome == "empty" or not shown:
            return
        note = "(stopped)" if outcome == "stopped" else "(failed)"
        await self.edit(route, message, preview(f"{shown} … {note}"))

    async def typing(self, route: RouteKey) -> None:
        chat_id, thread_id = _target(route)
        await self._bot().send_chat_action(chat_id, "typing", message_thread_id=thread_id)


def _target(route: RouteKey) -> tuple[int, int | None]:
    try:
        return target_of(route)
    except ValueError:
        raise DeliveryError(f"'{route.chat}' is not a Telegram chat id", retryable=False) from None


def unmodified(exc: Exception) -> bool:
    """Telegram's answer to an edit that changes nothing: the message shows that text."""
    return "message is not modified" in str(exc).lower()


def gone(exc: Exception) -> bool:
    """Telegram's answer to an edit of a message that cannot be edited (any more)."""
    text = str(exc).lower()
    return "message to edit not found" in text or "message can't be edited" in text
