"""Closing live conversations nobody uses: a gateway runs for months and meets hundreds of
conversations, and each live one holds an agent, a worker task and its history in memory.

A live conversation idle for ``idle_after`` seconds — nothing running or queued (no
``/background`` task either), no active
heartbeat of its own, nobody watching it, no approval pending — is closed and dropped. It
is only a cache of what the store holds: the next message (or its heartbeat, once adopted
again) brings it back with its history and working directory.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vigil.gateway.parts import IdleHost
    from vigil.gateway.live import LiveConversation

log = logging.getLogger(__name__)

IDLE_CLOSE = 30 * 60.0
"""Seconds without activity after which a live conversation is closed (see the module docstring)."""

SWEEP_EVERY = 60.0
"""Seconds between looks for idle conversations (less when ``idle_after`` is shorter)."""


class IdleCloser:
    """Looks for idle live conversations every :data:`SWEEP_EVERY` seconds and closes them."""

    def __init__(self, gateway: "IdleHost", idle_after: float) -> None:
        self.gateway = gateway
        self.idle_after = idle_after
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self.idle_after > 0:
            self._task = asyncio.create_task(self._run(), name="gateway-idle")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(min(SWEEP_EVERY, self.idle_after))
            try:
                await self.sweep()
            except Exception:  # one bad conversation must not end the sweeping
                log.exception("closing idle conversations failed")

    async def sweep(self) -> int:
        """Close every idle live conversation now; returns how many were closed."""
        gateway = self.gateway
        closed = 0
        for live in gateway.all_live():
            if not self.idle(live):
                continue
            async with gateway.routes_held(live):
                if not self.idle(live):  # a message came meanwhile
                    continue
                gateway.forget(live)
                await live.close()
            closed += 1
        if closed:
            gateway.say(f"vigil gateway: closed {closed} idle conversation(s); "
                        f"{len(gateway.live)} live (they come back on the next message)")
        return closed

    def idle(self, live: "LiveConversation") -> bool:
        """Whether ``live`` may be closed now."""
        gateway = self.gateway
        conversation = live.conversation
        if live.closed or not conversation.idle or live.starting or conversation.background.pending:
            return False
        if gateway.clock.now() - live.last_active < self.idle_after:
            return False
        session_id = live.session_id
        if session_id is None:
            return True
        heartbeat = gateway.heartbeats.known(session_id)
        if heartbeat is not None and heartbeat.active:
            return False
        return not gateway.bus.watched(session_id) and not gateway.approvals.pending_for(session_id)
