"""Approval of a dangerous command as an inline keyboard (Approve / Deny) under a message.

Only the conversation's owner may press (:func:`~vigil.gateway.adapters.telegram.inbound.owner_of`;
in a shared group conversation, someone on ``telegram.allow``); anyone else gets a visible
note (``answerCallbackQuery`` with an alert) and nothing is decided. The message says how the
request ended once it is resolved, and its buttons go away.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from vigil.backoff import Backoff, Streak
from vigil.gateway.adapters.approvals import NOT_WAITING, outcome
from vigil.gateway.adapters.telegram.inbound import owner_of, target_of
from vigil.gateway.adapters.telegram.outbound import preview, seconds
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from telegram import CallbackQuery

    from vigil.gateway.adapters.base import GatewayPort

log = logging.getLogger(__name__)

PREFIX = "approval"
ASK_TRIES = 6
REFUSED = "Only the person this conversation belongs to can answer this request."


@dataclass
class _Asked:
    route: RouteKey
    chat_id: int
    message_id: int
    text: str


def callback_data(approval_id: str, approved: bool) -> str:
    return f"{PREFIX}:{approval_id}:{'yes' if approved else 'no'}"


def parse_callback(data: str) -> tuple[str, bool] | None:
    """``(approval id, approved)`` of a button's data, or ``None`` for any other data."""
    prefix, _, rest = data.partition(":")
    approval_id, _, answer = rest.rpartition(":")
    if prefix != PREFIX or not approval_id or answer not in ("yes", "no"):
        return None
    return approval_id, answer == "yes"


class ApprovalButtons:
    """Asked approvals by id, and the presses on their buttons."""

    def __init__(self, bot: Callable[[], Any]) -> None:
        self._bot = bot
        self._asked: dict[str, _Asked] = {}

    async def request(self, route: RouteKey, item: dict[str, Any]) -> None:
        """Post the request with its buttons (retried a few times: unanswered means denied)."""
        from telegram import InlineKeyboardButton, InlineKeyboardMarkup
        from telegram.error import BadRequest, Forbidden, RetryAfter, TelegramError

        approval_id = str(item.get("id") or "")
        chat_id, thread_id = target_of(route)
        text = preview(f"⚠ Approve running {item.get('tool', 'a tool')}?\n\n{item.get('description', '')}".strip())
        keyboard = InlineKeyboardMarkup([[
            InlineKeyboardButton("Approve", callback_data=callback_data(approval_id, True)),
            InlineKeyboardButton("Deny", callback_data=callback_data(approval_id, False)),
        ]])
        failures = Streak(Backoff(0.5, 30.0))
        for _ in range(ASK_TRIES):
            try:
                sent = await self._bot().send_message(chat_id, text, message_thread_id=thread_id, reply_markup=keyboard)
                self._asked[approval_id] = _Asked(route, chat_id, sent.message_id, text)
                return
            except (BadRequest, Forbidden) as exc:
                log.warning("telegram: approval request refused in chat %s: %s", chat_id, exc)
                return
            except RetryAfter as exc:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await asyncio.sleep(seconds(exc.retry_after))
            except TelegramError as exc:
                log.info("telegram: approval request not sent yet (%s); retrying", exc)
                await asyncio.sleep(failures.next())

    async def resolved(self, item: dict[str, Any]) -> None:
        """Say on the request's message how it ended, without its buttons."""
        from telegram.error import TelegramError

        asked = self._asked.pop(str(item.get("id") or ""), None)
        if asked is None:
            return
        try:
            await self._bot().edit_message_text(preview(f"{asked.text}\n\n{outcome(item)}"), chat_id=asked.chat_id,
                                                message_id=asked.message_id)
        except TelegramError as exc:
            log.info("telegram: approval message not updated: %s", exc)

    async def press(self, query: "CallbackQuery", gateway: "GatewayPort", allow: list[str]) -> None:
        """A button press: decide the request if the presser may, and always answer the query."""
        parsed = parse_callback(query.data or "")
        bot = self._bot()
        if parsed is None:
            await bot.answer_callback_query(query.id)
            return
        approval_id, approved = parsed
        asked = self._asked.get(approval_id)
        chat = query.message.chat.id if query.message is not None else None
        if asked is None or chat != asked.chat_id:
            await bot.answer_callback_query(query.id, text=NOT_WAITING)
            return
        presser = str(query.from_user.id)
        owner = owner_of(asked.route)
        if presser != owner and not (owner is None and presser in allow):
            await bot.answer_callback_query(query.id, text=REFUSED, show_alert=True)
            return
        if gateway.resolve_approval(approval_id, approved):
            await bot.answer_callback_query(query.id, text="Approved." if approved else "Denied.")
        else:
            await bot.answer_callback_query(query.id, text=NOT_WAITING)
