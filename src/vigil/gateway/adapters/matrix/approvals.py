"""Approval of a dangerous command in a Matrix room: reactions, or a reply.

An ``approval_request`` live event becomes a message in the conversation's place (its thread
in a group room) saying what the agent wants to run, with ✅ and ❌ already added as reactions
so that one click on either answers. Clients that show no reactions can answer with a message
``approve`` or ``deny`` (``yes``/``no``) in the same place. Only the conversation's owner —
the person whose conversation it is, the route's user — decides; a reaction or reply of
anyone else decides nothing (their reply is an ordinary message). Once resolved, the request
message is edited to say how it ended, and the agent's own ✅ and ❌ are taken away.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from vigil.gateway.adapters.approvals import outcome
from vigil.gateway.adapters.base import DeliveryError, GatewayPort
from vigil.gateway.adapters.matrix.content import edit, in_thread, message
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.adapters.matrix.client import Homeserver

log = logging.getLogger(__name__)

APPROVE, DENY = "✅", "❌"
DESCRIPTION_CHARS = 3_000


@dataclass
class Asked:
    approval_id: str
    route: RouteKey
    text: str
    event_id: str | None = None
    offered: list[str] = field(default_factory=list)
    """The agent's own ✅ and ❌ under the request (taken away once it is answered)."""


class Approvals:
    """The approval requests waiting for an answer, by request id and by message."""

    def __init__(self, client: Callable[[], "Homeserver | None"], gateway: Callable[[], GatewayPort | None]) -> None:
        self._client = client
        self._gateway = gateway
        self.asked: dict[str, Asked] = {}

    async def request(self, route: RouteKey, event: dict[str, Any]) -> None:
        client = self._client()
        approval_id = str(event.get("id") or "")
        if client is None or not approval_id:
            return
        description = str(event.get("description") or "")[:DESCRIPTION_CHARS]
        text = f"⚠ Approval needed: the agent wants to use `{event.get('tool') or '?'}`:\n\n```\n{description}\n```\n\n"
        text += (f"React {APPROVE} to approve or {DENY} to deny (or answer `approve` / `deny`)"
                 + (f"; only {route.user} can answer." if route.user else "."))
        asked = Asked(approval_id, route, text)
        self.asked[approval_id] = asked
        try:
            asked.event_id = await client.send(route.chat, in_thread(message(text), route.thread), txn=_txn())
            for key in (APPROVE, DENY):
                reaction = {"m.relates_to": {"rel_type": "m.annotation", "event_id": asked.event_id, "key": key}}
                asked.offered.append(await client.send(route.chat, reaction, kind="m.reaction", txn=_txn()))
        except DeliveryError as exc:
            log.warning("matrix: the approval request was not (fully) posted: %s", exc)

    async def resolved(self, event: dict[str, Any]) -> None:
        asked = self.asked.pop(str(event.get("id") or ""), None)
        client = self._client()
        if asked is None or asked.event_id is None or client is None:
            return
        text = asked.text.rsplit("\n\n", 1)[0] + "\n\n" + outcome(event)
        try:
            await client.send(asked.route.chat, edit(asked.event_id, message(text)), txn=_txn())
            for reaction in asked.offered:
                await client.call(client.nio.room_redact(asked.route.chat, reaction, tx_id=_txn()))
        except DeliveryError as exc:
            log.info("matrix: the approval request was not marked answered: %s", exc)

    def reacted(self, sender: str, target: str, key: str) -> bool:
        """A reaction: whether it decided a request (its owner's ✅ or ❌ on its message)."""
        for asked in list(self.asked.values()):
            if asked.event_id == target and key in (APPROVE, DENY):
                return self._decide(asked, sender, key == APPROVE)
        return False

    def replied(self, route: RouteKey, sender: str, approved: bool) -> bool:
        """An ``approve``/``deny`` message in ``route``: whether it decided the oldest request there."""
        for asked in self.asked.values():
            if asked.route == route:
                return self._decide(asked, sender, approved)
        return False

    def pending(self, route: RouteKey) -> bool:
        return any(asked.route == route for asked in self.asked.values())

    def _decide(self, asked: Asked, sender: str, approved: bool) -> bool:
        gateway = self._gateway()
        if gateway is None or not asked.route.user or sender != asked.route.user:
            return False
        return gateway.resolve_approval(asked.approval_id, approved)

    def clear(self) -> None:
        self.asked.clear()


def _txn() -> str:
    return "vigil-" + uuid.uuid4().hex
