"""Approval of a dangerous command as a Slack interactive message.

An ``approval_request`` live event becomes a message in the conversation's thread with
Approve and Deny buttons (``block_actions`` with :data:`APPROVE`/:data:`DENY`, the request id
as the value). Only the conversation's owner — the person whose conversation it is — may
press them; anyone else gets an ephemeral note and nothing is decided. When the request is
resolved (a press, or no answer in time: denied) the message is edited to say so, without
buttons. Who owns the conversation and what a press decides are the platforms' shared rules
(:mod:`vigil.gateway.adapters.approvals`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from vigil.gateway.adapters.approvals import NOT_WAITING, decide, outcome, owner_of
from vigil.gateway.adapters.base import DeliveryError, GatewayPort
from vigil.gateway.adapters.slack.mrkdwn import escape
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.adapters.slack.web import SlackApi

log = logging.getLogger(__name__)

APPROVE = "vigil_approve"
DENY = "vigil_deny"
DESCRIPTION_CHARS = 2_500


@dataclass
class Pending:
    channel: str
    ts: str | None
    owner: str | None
    text: str


def _blocks(approval_id: str, text: str) -> list[dict[str, Any]]:
    def button(action: str, label: str, style: str) -> dict[str, Any]:
        return {"type": "button", "action_id": action, "value": approval_id, "style": style,
                "text": {"type": "plain_text", "text": label}}

    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "actions", "block_id": "vigil_approval",
         "elements": [button(APPROVE, "Approve", "primary"), button(DENY, "Deny", "danger")]},
    ]


class ApprovalButtons:
    """The approval messages of one adapter, by request id."""

    def __init__(self, api: Callable[[], "SlackApi | None"], gateway: Callable[[], GatewayPort | None]) -> None:
        self._api = api
        self._gateway = gateway
        self.pending: dict[str, Pending] = {}

    async def request(self, route: RouteKey, event: dict[str, Any]) -> None:
        gateway, api = self._gateway(), self._api()
        approval_id = str(event.get("id") or "")
        if gateway is None or api is None or not approval_id:
            return
        owner = await asyncio.to_thread(owner_of, gateway, route, event.get("session_id"))
        description = str(event.get("description") or "")[:DESCRIPTION_CHARS]
        text = (f"*Approval needed* — the agent wants to use `{escape(str(event.get('tool') or '?'))}`:\n"
                f"```{escape(description)}```")
        if owner:
            text += f"\nOnly <@{owner}> can answer."
        pending = Pending(route.chat, None, owner, text)
        self.pending[approval_id] = pending
        try:
            answer = await api.call("chat.postMessage", channel=route.chat, thread_ts=route.thread or None,
                                    text=f"Approval needed: {event.get('tool')}", blocks=_blocks(approval_id, text))
            pending.ts = answer.get("ts")
        except DeliveryError as exc:
            log.warning("Slack: cannot post the approval request: %s", exc)

    async def resolved(self, event: dict[str, Any]) -> None:
        pending = self.pending.pop(str(event.get("id") or ""), None)
        api = self._api()
        if pending is None or pending.ts is None or api is None:
            return
        said = outcome(event)
        text = pending.text.split("\nOnly <@", 1)[0] + "\n" + said
        try:
            await api.call("chat.update", channel=pending.channel, ts=pending.ts, text=said,
                           blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": text}}])
        except DeliveryError as exc:
            log.warning("Slack: cannot mark the approval request answered: %s", exc)

    def press(self, approval_id: str, approved: bool, user: str) -> str | None:
        """A button press by ``user``: decided if they own the conversation; else the note
        they are shown (nothing decided)."""
        pending = self.pending.get(approval_id)
        if pending is None:
            return NOT_WAITING
        return decide(self._gateway(), approval_id, approved, user, pending.owner)


def pressed(payload: dict[str, Any]) -> list[tuple[str, bool]]:
    """The approval buttons a ``block_actions`` payload presses: (request id, approved)."""
    if payload.get("type") != "block_actions":
        return []
    found = []
    for action in payload.get("actions") or []:
        if isinstance(action, dict) and action.get("action_id") in (APPROVE, DENY):
            found.append((str(action.get("value") or ""), action.get("action_id") == APPROVE))
    return found
