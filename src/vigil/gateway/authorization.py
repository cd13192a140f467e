"""Who may talk to the agent through the gateway: the allow-lists, pairing, and heartbeats.

Every adapter but ``web`` (whose one user logs in with the gateway token) names the platform
user who wrote each message (``Inbound.sender``). A sender is allowed when they are on the
platform's allow-list in config.yaml (``<adapter>.allow``: the platform's own section,
read at each message so that SIGHUP's reload applies) or paired with ``vigil pairing
approve`` and not revoked. An adapter without such a section has only paired users; a message
without a sender is never allowed. A denied message is not stored in the inbox and nothing of
it reaches a conversation; the sender is sent a pairing code (:mod:`vigil.gateway.pairing`)
through the outbox, as kind ``pairing``, within the rate limits; its receipt has
``denied=True`` and ``inbox_id`` 0. An adapter may name the person in
``Inbound.meta["sender_name"]`` (``vigil pairing list`` shows it).

A platform conversation's heartbeat fires only while the people it answers are allowed: the
route's user, else everyone recorded as having spoken in that chat (else the chat id, which
is the user's id in a private chat on some platforms). Otherwise the slot is refunded, not fired.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import TYPE_CHECKING, Any

from vigil.gateway import pairing
from vigil.gateway.adapters.base import Inbound, Receipt
from vigil.store import StoreError
from vigil.store.gateway.gateway_tables import NewOutbound, RouteKey
from vigil.store.gateway.pairing_tables import EXISTING, FULL, ISSUED, LIMITED

if TYPE_CHECKING:
    from vigil.gateway.parts import AuthorizationHost
    from vigil.gateway.live import LiveConversation

log = logging.getLogger(__name__)

EXEMPT = frozenset({"web", "api"})
"""Adapters whose users are authenticated by the adapter itself (the gateway token: the web
chat's login, the OpenAI-compatible API's key)."""

DENIED_INBOX_ID = 0
"""The ``Receipt.inbox_id`` of a denied message: it was not stored in the inbox."""


class Authorization:
    """The gateway's sender checks (see the module docstring)."""

    def __init__(self, gateway: "AuthorizationHost", *, exempt: frozenset[str] = EXEMPT) -> None:
        self.gateway = gateway
        self.exempt = exempt
        self._key: bytes | None = None
        self._spoken: set[tuple[str, str, str, str]] = set()  # recorded by this process already
        self._settings: Any = None

    def reload(self, settings: Any) -> None:
        """Take the allow-lists of re-read settings (SIGHUP) without replacing the gateway's."""
        self._settings = settings

    # -- messages ---------------------------------------------------------------------------
    async def check(self, inbound: Inbound) -> Receipt | None:
        """``None`` when the sender may talk to the agent (the message goes on as usual),
        else the receipt of a denied message, whose pairing answer is queued."""
        route = inbound.route
        if route.adapter in self.exempt:
            return None
        sender = inbound.sender
        if sender and await asyncio.to_thread(self.allowed, route.adapter, sender):
            await self._spoke(route, sender)
            return None
        self.gateway.count("denied_messages", adapter=route.adapter)
        if sender:
            await self._answer_stranger(inbound)
        else:
            log.warning("a %s message without a sender was refused (the adapter must name the sender)", route.adapter)
        return Receipt(DENIED_INBOX_ID, False, None, denied=True)

    def allowed(self, adapter: str, user_id: str) -> bool:
        """Whether ``user_id`` may talk to the agent on ``adapter`` (a store read)."""
        if adapter in self.exempt:
            return True
        if not user_id:
            return False
        if user_id in self.allow_list(adapter):
            return True
        try:
            paired = self.gateway.store.pairing.user(adapter, user_id)
        except (TypeError, ValueError):
            return False  # not an id the store can hold: never paired
        return paired is not None and paired.active

    def allow_list(self, adapter: str) -> list[str]:
        """``settings.<adapter>.allow``; empty for an adapter without such a section."""
        section = getattr(self._settings or self.gateway.settings, adapter, None)
        allow = getattr(section, "allow", None)
        return list(allow) if isinstance(allow, list) else []

    async def _spoke(self, route: RouteKey, sender: str) -> None:
        key = (route.adapter, route.chat, route.thread, sender)
        if key in self._spoken:
            return
        try:
            await asyncio.to_thread(
                self.gateway.store.pairing.speak, route.adapter, route.chat, route.thread, sender,
                now=self.gateway.clock.now(),
            )
        except (StoreError, TypeError, ValueError) as exc:
            log.warning("cannot record who speaks in %s: %s", route.adapter, exc)
            return
        self._spoken.add(key)

    async def _answer_stranger(self, inbound: Inbound) -> None:
        text = await asyncio.to_thread(self._request_code, inbound)
        if text is None:
            return
        message = NewOutbound(inbound.route, text, kind="pairing")
        await asyncio.to_thread(self.gateway.store.gateway.outbox_add, message, now=self.gateway.clock.now())
        self.gateway.outbox.wake()

    def _request_code(self, inbound: Inbound) -> str | None:
        """Ask the store for this sender's code; the text to send them, or ``None``."""
        route, sender = inbound.route, inbound.sender
        key = self._pairing_key()
        nonce = pairing.new_nonce()
        fresh = pairing.derive(key, nonce, route.adapter, sender)
        now = self.gateway.clock.now()
        name = inbound.meta.get("sender_name") or ""
        try:
            asked = self.gateway.store.pairing.request_code(
                route.adapter, sender, display_name=name if isinstance(name, str) else "",
                chat=route.chat, thread=route.thread, user_key=route.user,
                code_hash=pairing.code_hash(fresh), nonce=nonce, now=now, limits=pairing.LIMITS,
            )
        except (TypeError, ValueError) as exc:  # an id the store cannot hold: no code
            log.warning("no pairing code for a %s sender: %s", route.adapter, exc)
            return None
        described = f"{route.adapter} user {sender!r}"
        if asked.outcome == LIMITED:
            if asked.requests == pairing.LIMITS.max_requests + 1:
                self.gateway.say(f"vigil gateway: {described} asks for pairing codes too often; silenced for a while")
                return pairing.LIMITED_MESSAGE
            return None
        if asked.outcome == FULL:
            self.gateway.say(f"vigil gateway: {described} asked to pair; {pairing.LIMITS.max_pending} codes are pending already")
            return pairing.FULL_MESSAGE
        code = asked.code
        assert code is not None
        minutes = max(1, math.ceil((code.expires_at - now) / 60))
        if asked.outcome == ISSUED:
            self.gateway.say(f"vigil gateway: {described} asked to pair; `vigil pairing list` shows the request")
            return pairing.code_message(fresh, minutes)
        assert asked.outcome == EXISTING
        again = pairing.derive(key, code.nonce, route.adapter, sender)
        if pairing.code_hash(again) != code.code_hash:  # made under another key
            return pairing.code_message("(sent earlier)", minutes, again=True)
        return pairing.code_message(again, minutes, again=True)

    def _pairing_key(self) -> bytes:
        if self._key is None:
            self._key = pairing.load_or_create_key(self.gateway.profile.home)
        return self._key

    # -- heartbeats -------------------------------------------------------------------------
    async def heartbeat_refusal(self, live: "LiveConversation", session_id: str) -> str | None:
        """Why the heartbeat of ``session_id`` may not fire in ``live`` for lack of
        authorization (``None``: it may)."""
        route = live.route or await asyncio.to_thread(self._stored_route, session_id)
        if route is None or route.adapter in self.exempt:
            return None
        try:
            denied = await asyncio.to_thread(self._not_allowed, route)
        except StoreError as exc:
            return f"authorization is denied: cannot check who the conversation answers ({exc})"
        if denied:
            return f"authorization is denied: {route.adapter} user {denied[0]} is not allowed (revoked or never paired)"
        return None

    def _not_allowed(self, route: RouteKey) -> list[str]:
        """Who of the people ``route`` answers is not allowed (see the module docstring)."""
        if route.user:
            people = [route.user]
        else:
            people = self.gateway.store.pairing.speakers(route.adapter, route.chat, route.thread) or [route.chat]
        return [person for person in people if not self.allowed(route.adapter, person)]

    def _stored_route(self, session_id: str) -> RouteKey | None:
        try:
            heartbeat: Any = self.gateway.heartbeat_repo.get(session_id)
        except Exception:  # a damaged record: it cannot fire anyway
            return None
        stored = getattr(heartbeat, "route", None)
        if stored is None:
            return None
        return RouteKey(stored.platform, stored.chat, stored.thread or "")
