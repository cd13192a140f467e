"""Approval of dangerous commands in gateway conversations: asked as buttons, denied on timeout.

A turn that wants to run a command needing approval waits here; the request goes out as an
``approval_request`` event to the conversation's pages and platform, and the first answer
(:meth:`Approvals.resolve`) or the timeout (denied) decides it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass
from typing import Awaitable, Callable

from vigil.clock import Clock

log = logging.getLogger(__name__)

Announce = Callable[[dict[str, object]], Awaitable[None] | None]


@dataclass
class _Request:
    session_id: str
    future: asyncio.Future[bool]


class Approvals:
    """Pending approval requests of one gateway, by id."""

    def __init__(self, clock: Clock, timeout: float) -> None:
        self.clock = clock
        self.timeout = timeout
        self._pending: dict[str, _Request] = {}

    async def ask(self, session_id: str, tool: str, description: str, announce: Callable[[dict[str, object]], None]) -> bool:
        """Ask and wait; ``False`` when denied, timed out or cancelled. The resolution is
        announced with ``reason``: ``answered``, ``timeout`` or ``cancelled``."""
        approval_id = secrets.token_urlsafe(12)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending[approval_id] = _Request(session_id, future)
        expires_at = self.clock.now() + self.timeout
        announce({
            "type": "approval_request", "session_id": session_id, "id": approval_id,
            "tool": tool, "description": description, "expires_at": expires_at,
        })
        approved = False
        reason = "cancelled"  # the turn was stopped while it waited (/stop, interrupt, shutdown)
        try:
            approved = await asyncio.wait_for(asyncio.shield(future), self.timeout)
            reason = "answered"
        except asyncio.TimeoutError:
            reason = "timeout"
            log.info("approval %s for %s timed out after %.0f s: denied", approval_id, session_id, self.timeout)
        finally:
            self._pending.pop(approval_id, None)
            if not future.done():
                future.cancel()
            announce({
                "type": "approval_resolved", "session_id": session_id, "id": approval_id,
                "approved": approved, "reason": reason,
            })
        return approved

    def resolve(self, approval_id: str, approved: bool) -> bool:
        request = self._pending.get(approval_id)
        if request is None or request.future.done():
            return False
        request.future.set_result(bool(approved))
        return True

    def pending_for(self, session_id: str) -> list[str]:
        return [key for key, request in self._pending.items() if request.session_id == session_id]
