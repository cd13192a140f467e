"""Approval of a dangerous command as a Discord message with Approve and Deny buttons.

An ``approval_request`` live event becomes a message in the conversation's place with two
buttons (custom ids ``vigil:approve:<id>`` and ``vigil:deny:<id>``). Only the conversation's
owner — the person whose conversation it is — may press them; anyone else is told so in a note
only they see, and nothing is decided. When the request is resolved (a press, or no answer in
time: denied) the message says how, without buttons. Presses are read from every interaction
(not from a stored view), so a press on a message from before a restart is answered too. Who
owns the conversation and what a press decides are the platforms' shared rules
(:mod:`vigil.gateway.adapters.approvals`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable

import discord

from vigil.gateway.adapters.approvals import NOT_WAITING, decide, outcome, owner_of
from vigil.gateway.adapters.base import DeliveryError, GatewayPort
from vigil.gateway.adapters.discord.send import Messages, call
from vigil.store.gateway.gateway_tables import RouteKey

log = logging.getLogger(__name__)

PREFIX = "vigil:"
DESCRIPTION_CHARS = 1_500


@dataclass
class Pending:
    route: RouteKey
    message: int | None
    owner: str | None
    text: str


class ApprovalButtons:
    """The approval messages of one adapter, by request id."""

    def __init__(self, messages: Messages, gateway: Callable[[], GatewayPort | None]) -> None:
        self.messages = messages
        self._gateway = gateway
        self.pending: dict[str, Pending] = {}

    async def request(self, route: RouteKey, event: dict[str, Any]) -> None:
        gateway, approval_id = self._gateway(), str(event.get("id") or "")
        if gateway is None or not approval_id:
            return
        owner = await asyncio.to_thread(owner_of, gateway, route, event.get("session_id"))
        description = str(event.get("description") or "").replace("```", "`\u200b``")[:DESCRIPTION_CHARS]
        text = f"**Approval needed**: the agent wants to use `{event.get('tool') or '?'}`:\n```\n{description}\n```"
        pending = Pending(route, None, owner, text)
        self.pending[approval_id] = pending
        view = discord.ui.View(timeout=None)
        view.add_item(discord.ui.Button(style=discord.ButtonStyle.success, label="Approve",
                                        custom_id=f"{PREFIX}approve:{approval_id}"))
        view.add_item(discord.ui.Button(style=discord.ButtonStyle.danger, label="Deny",
                                        custom_id=f"{PREFIX}deny:{approval_id}"))
        who = f"\nOnly <@{owner}> can answer." if owner else ""
        try:
            sent = await call(self.messages.channel(route).send(text + who, view=view), "approval request")
            pending.message = sent.id
        except DeliveryError as exc:
            log.warning("Discord: cannot post the approval request: %s", exc)
        finally:
            view.stop()  # presses are read from the interactions themselves

    async def resolved(self, event: dict[str, Any]) -> None:
        pending = self.pending.pop(str(event.get("id") or ""), None)
        if pending is None or pending.message is None:
            return
        partial = self.messages.channel(pending.route).get_partial_message(pending.message)
        try:
            await call(partial.edit(content=f"{pending.text}\n{outcome(event)}", view=None), "approval outcome")
        except DeliveryError as exc:
            log.warning("Discord: cannot mark the approval request answered: %s", exc)

    def decide(self, approval_id: str, approved: bool, user: str) -> str | None:
        """A press by ``user``: decided if they own the conversation; else the note they are
        shown (nothing decided)."""
        pending = self.pending.get(approval_id)
        if pending is None:
            return NOT_WAITING
        return decide(self._gateway(), approval_id, approved, user, pending.owner)

    async def press(self, interaction: discord.Interaction) -> None:
        """A button press (any component interaction): the bot's approval buttons are answered
        at once, with a note only the presser sees when nothing was decided."""
        custom_id = str((interaction.data or {}).get("custom_id") or "")
        if not custom_id.startswith(PREFIX):
            return
        action, _, approval_id = custom_id.removeprefix(PREFIX).partition(":")
        note = self.decide(approval_id, action == "approve", str(interaction.user.id))
        try:
            if note:
                await call(interaction.response.send_message(note, ephemeral=True), "note")
            else:  # the resolved event edits the message
                await call(interaction.response.defer(), "button press")
        except DeliveryError as exc:
            log.warning("Discord: a button press was not answered: %s", exc)
