"""Slack's side of the shared streamer (:mod:`vigil.gateway.adapters.streaming`): one message per
person's turn, edited as it streams.

When a person's turn begins a placeholder (:data:`WORKING`) is posted in the conversation's
thread — the "working" indicator — and the text so far replaces it as it streams, as mrkdwn
followed by `` …`` (``chat.update``, at most once a second per channel, as Slack's rate limits
ask). The final answer comes through the outbox, which claims the placeholder and replaces it
with the answer (:mod:`.outgoing`); a turn stopped or ending with nothing to say removes it;
a failed turn's notice replaces it. Heartbeat turns post their answer anew.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.previews import DurablePreviews
from vigil.gateway.adapters.slack.mrkdwn import to_mrkdwn
from vigil.gateway.adapters.streaming import MessageGone, Outcome, Streamer, StreamStyle
from vigil.platforms.slack import SLACK
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.adapters.slack.web import SlackApi

WORKING = "_… working_"
GONE = re.compile(r"\b(message_not_found|cant_update_message|edit_window_closed)\b")
"""Slack's errors for a message that cannot be edited (any more)."""


def streamer(api: Callable[[], "SlackApi | None"], previews: DurablePreviews) -> Streamer:
    """The streamer of a Slack adapter."""
    style = StreamStyle.of(SLACK, render=to_mrkdwn, suffix=" …", placeholder=WORKING, kinds=frozenset({"user"}),
                           failed_answer_replaces=True)
    return Streamer(SlackMessages(api), previews, style)


class SlackMessages:
    """:class:`~vigil.gateway.adapters.streaming.EditableMessages` over the Web API."""

    def __init__(self, api: Callable[[], "SlackApi | None"]) -> None:
        self._api = api

    def _require(self) -> "SlackApi":
        api = self._api()
        if api is None:
            raise DeliveryError("Slack is not available")
        return api

    async def post(self, route: RouteKey, text: str) -> str:
        answer = await self._require().call("chat.postMessage", channel=route.chat, thread_ts=route.thread or None,
                                            text=text)
        ts = answer.get("ts")
        if not ts:
            raise DeliveryError("Slack chat.postMessage: no ts in the answer", retryable=False)
        return str(ts)

    async def edit(self, route: RouteKey, message: Any, text: str) -> None:
        try:
            await self._require().call("chat.update", channel=route.chat, ts=str(message), text=text)
        except DeliveryError as exc:
            if not exc.retryable and GONE.search(str(exc)):
                raise MessageGone(str(exc)) from None
            raise

    async def finish(self, route: RouteKey, message: Any, shown: str, outcome: Outcome) -> None:
        """A stopped or empty turn's placeholder is removed (a failed one's notice replaces it)."""
        await self._require().call("chat.delete", channel=route.chat, ts=str(message))

    async def typing(self, route: RouteKey) -> None:
        """Slack's placeholder is its "working" indicator."""
