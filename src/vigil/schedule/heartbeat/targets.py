"""What a heartbeat scheduler talks to and reports: the :class:`HeartbeatTarget` protocol,
:class:`DirectTarget` (fires at once, for headless runs, benchmarks and tests) and
:class:`SchedulerStats`. All three are importable from :mod:`vigil.schedule.heartbeat.scheduler`."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

from vigil.schedule.heartbeat.repo import Reservation

if TYPE_CHECKING:
    from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler


class HeartbeatTarget(Protocol):
    """A conversation (or anything) that fires the heartbeats of the sessions it owns."""

    def heartbeat_due(self, session_id: str) -> None:
        """The heartbeat of ``session_id`` is due: start the claim protocol when idle.
        Must return at once."""
        ...


# A target may also have ``heartbeat_lost(session_id)``: called when another process took the
# session's lease over and this scheduler stopped firing it (optional, hence not above).


@dataclass
class SchedulerStats:
    claims: int = 0
    """Slots reserved by this process."""
    confirmed: int = 0
    """Reservations that reached execution."""
    refunded: int = 0
    not_due: int = 0
    """Claims that found nothing to reserve (another process fired, paused, cleared ...)."""
    withdrawn: int = 0
    """Confirmations undone because their attempt did not begin after all; the fires that
    reached execution are ``confirmed - withdrawn``."""
    stopped: int = 0
    """Attempts refused by the emergency stop."""
    orphans_refunded: int = 0
    held_off: int = 0
    """Times a past due time was pushed back by ``HOLD_OFF`` instead of firing at once."""


class DirectTarget:
    """A target that fires as soon as a heartbeat is due, running ``run(reservation)`` after
    the claim is confirmed. For headless runs, benchmarks and tests; conversations use
    :class:`vigil.runtime.conversation.Conversation` instead."""

    def __init__(
        self,
        scheduler: HeartbeatScheduler,
        run: Callable[[Reservation], Awaitable[None] | None] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.run = run
        self.tasks: set[asyncio.Task[None]] = set()

    def heartbeat_due(self, session_id: str) -> None:
        task = asyncio.create_task(self._fire(session_id))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _fire(self, session_id: str) -> None:
        reservation = await self.scheduler.claim(session_id)
        if reservation is None or not await self.scheduler.confirm(reservation):
            return
        if self.run is not None:
            result = self.run(reservation)
            if inspect.isawaitable(result):
                await result
