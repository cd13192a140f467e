"""A conversation the gateway is running: its agent, its runtime queue and who hears it.

Each live conversation has its own :class:`~vigil.agent.turn.Agent` (so an approval request
reaches this conversation's people) on the gateway's shared model client, and a
:class:`~vigil.runtime.conversation.Conversation`, the same runtime the REPL uses: one FIFO
queue of messages and commands, at most one turn, heartbeats only when idle. Its events go to
the gateway (:meth:`Gateway.on_live_event`), which fans them out.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from vigil.agent.events import AssistantStep, TextDelta
from vigil.agent.turn import Agent, TurnResult
from vigil.gateway.commands import QUIT_REPLY, gateway_registry, is_quit
from vigil.runtime.controller import ConversationController
from vigil.runtime.conversation import Conversation
from vigil.runtime.conversation_events import ConversationEvent
from vigil.runtime.slash import CommandReply, SlashCommand
from vigil.schedule.heartbeat.record import Route
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.parts import LiveHost

log = logging.getLogger(__name__)


TryAgain = Callable[[BaseException, int, int], Awaitable[bool]]
"""Asked with (the error, the attempt from 0, the inbox id) whether a failed turn runs again."""


class GatewayController(ConversationController):
    """The conversation controller of a gateway conversation: a heartbeat set here is stored
    with the route its turns are delivered to, and the turn of an inbox message that fails is
    run again (resumed after what was stored) for as long as :attr:`try_again` says so."""

    route: RouteKey | None = None
    try_again: TryAgain | None = None

    async def turn(self, text: str, **options: Any) -> TurnResult:
        meta = options.get("user_meta") or {}
        inbox_id = meta.get("inbox")
        attempt = 0
        while True:
            try:
                return await super().turn(text, **options)
            except Exception as exc:
                # inside the turn's task: /stop, /suspend and busy: interrupt cancel the wait too
                if self.try_again is None or not isinstance(inbox_id, int):
                    raise
                if not await self.try_again(exc, attempt, inbox_id):
                    raise
            attempt += 1
            options["resume"] = True

    @property
    def heartbeat_route(self) -> Route | None:
        if self.route is None:
            return None
        return Route(self.route.adapter, self.route.chat, self.route.thread or None)

    async def command(self, text: str) -> CommandReply:
        if is_quit(text):
            return CommandReply(QUIT_REPLY)
        return await super().command(text)


class LiveConversation:
    """One running conversation of the gateway (see the module docstring)."""

    def __init__(self, gateway: "LiveHost", session_id: str | None, route: RouteKey | None, cwd: Path) -> None:
        self.gateway = gateway
        self.route = route
        agent = Agent(
            store=gateway.store,
            client=gateway.client,
            profile=gateway.profile,
            settings=gateway.settings,
            cwd=cwd,
            clock=gateway.clock,
            approve=self._approve,
            source=route.adapter if route is not None else "gateway",
        )
        registry = gateway_registry(self)
        registry.register(SlashCommand("retry", "send a message that was set aside again: /retry ID", self._retry))
        self.controller = GatewayController(agent, session_id=session_id, registry=registry)
        self.controller.route = route
        self.controller.try_again = lambda exc, attempt, inbox_id: gateway.patience.try_again(self, inbox_id, exc, attempt)
        self.conversation = Conversation(self.controller, scheduler=gateway.heartbeats)
        self.conversation.listeners.append(self._on_event)
        self.conversation.on_refund = self._on_refund
        self.conversation.authorize_heartbeat = lambda sid: gateway.claims.heartbeat_refusal(self, sid)
        self.lock = asyncio.Lock()
        """Held while inputs are handed to the queue, so they enter it in the order received."""
        self._started = False
        self._start_lock = asyncio.Lock()
        self._pending_start: asyncio.Future[None] | None = None
        self.closed = False
        self.last_active = gateway.clock.now()
        """When it last took input or produced an event (see :mod:`vigil.gateway.idle`)."""

    @property
    def session_id(self) -> str | None:
        return self.controller.session_id

    async def ensure_started(self) -> None:
        async with self._start_lock:
            if not self._started:
                await self.gateway.prepare(self)
                await self.conversation.start()
                self._started = True

    def heartbeat_due(self, session_id: str) -> None:
        """HeartbeatTarget: the conversation fires it at its next idle moment (starting the
        conversation first when the heartbeat is what brings it to life)."""
        if self.closed:
            return
        if self._started:
            self.conversation.heartbeat_due(session_id)
            return
        task = asyncio.ensure_future(self._start_then_fire(session_id))
        self._pending_start = task

    async def _start_then_fire(self, session_id: str) -> None:
        try:
            await self.ensure_started()
        except Exception:  # a missing session, a store error: the next due time tries again
            log.exception("cannot start the conversation %s for its heartbeat", session_id)
            return
        if not self.closed:
            self.conversation.heartbeat_due(session_id)

    @property
    def starting(self) -> bool:
        """A heartbeat is bringing it to life right now."""
        return self._pending_start is not None and not self._pending_start.done()

    def touch(self) -> None:
        self.last_active = self.gateway.clock.now()

    async def close(self) -> None:
        self.closed = True
        pending, self._pending_start = self._pending_start, None
        if pending is not None and not pending.done():
            pending.cancel()
        await self.conversation.close()
        if not self._started and self.session_id is not None:
            # adopted for its heartbeat but never started: the scheduler still points here
            self.gateway.heartbeats.disown(self.session_id, self)

    def set_route(self, route: RouteKey | None) -> None:
        self.route = route
        self.controller.route = route

    async def _approve(self, tool: str, description: str) -> bool:
        session_id = self.session_id or ""
        return await self.gateway.approvals.ask(
            session_id, tool, description, lambda item: self.gateway.announce(self, item)
        )

    async def _retry(self, _control: object, args: str) -> CommandReply:
        """``/retry ID``: a message of this conversation that was set aside goes back to be answered."""
        from vigil.store.gateway.gateway_tables import PENDING, SET_ASIDE

        word = args.strip()
        if not word.isdigit():
            return CommandReply("Usage: /retry ID (the number in the notice of a message that was set aside)", is_error=True)
        gateway, entry_id = self.gateway, int(word)
        entry = await asyncio.to_thread(gateway.store.gateway.inbox_get, entry_id)
        if entry is None or (entry.route != self.route and entry.session_id != self.session_id):
            return CommandReply(f"This conversation has no message {entry_id}.", is_error=True)
        if entry.status != SET_ASIDE:
            return CommandReply(f"Message {entry_id} was not set aside (it is {entry.status.replace('_', ' ')}).",
                                is_error=True)
        entry = await gateway.requeue(entry_id)
        if entry.status != PENDING:
            return CommandReply(f"Message {entry_id} is {entry.status.replace('_', ' ')} now.", is_error=True)
        gateway.say(f"vigil gateway: message {entry_id} set aside before is sent again (/retry)")
        return CommandReply(f"Message {entry_id} is sent again: “{_first_line(entry.text)}”")

    def _on_refund(self, session_id: str, why: str) -> None:
        self.gateway.count("heartbeat_refunds")
        self.gateway.say(f"vigil gateway: heartbeat of {session_id[:8]} not started, slot refunded: {why}")

    async def _on_event(self, item: ConversationEvent) -> None:
        if isinstance(item, (TextDelta, AssistantStep)) and self.gateway.patience.waiting:
            self.gateway.patience.progressed(self)
        await self.gateway.on_live_event(self, item)

    def status(self) -> dict[str, Any]:
        return {"busy": self.conversation.busy, "queued": self.conversation.queued}


def _first_line(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
