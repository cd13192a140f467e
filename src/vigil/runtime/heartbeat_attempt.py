"""One heartbeat fire, from its reservation to the moment its turn begins executing.

The conversation reserves the slot and then starts an ordinary turn with the heartbeat's
message. The agent prepares that turn (prompt rebuild, history, any due compression) and,
just before it stores the message, calls :meth:`HeartbeatAttempt.before_execution`: that is
where the fire is re-checked and confirmed, so that nothing between the reservation and the
start of execution can count a fire that did not run. Whatever ends the attempt before that
point — a failed preparation, a decline, a cancellation — gives the slot back.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Awaitable, Callable

from vigil.schedule.heartbeat.repo import Reservation
from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler

log = logging.getLogger(__name__)

Refusal = Callable[[], str | None]
"""Why the conversation may not run the heartbeat now (``None``: it may)."""


class HeartbeatAttempt:
    """The fate of one reserved slot: it begins executing, or it is given back."""

    def __init__(
        self,
        scheduler: HeartbeatScheduler,
        reservation: Reservation,
        *,
        refusal: Refusal,
        on_begin: Callable[[str], Awaitable[None]],
    ) -> None:
        self.scheduler = scheduler
        self.origin = reservation
        self.reservation = reservation
        """The reservation where the record is now: compression moves it to the continuation."""
        self.began = False
        """The agent begins executing: the fire counts, whatever the turn does next."""
        self._refusal = refusal
        self._on_begin = on_begin
        self._settled = False  # began, or given back
        self._confirming = False  # a confirmation may have been written

    def follow(self, parent_id: str, child_id: str) -> None:
        """The conversation was compressed into ``child_id``; its heartbeat moves along."""
        if self.reservation.session_id == parent_id != child_id:
            self.reservation = replace(self.reservation, session_id=child_id)

    @property
    def moved(self) -> bool:
        """Whether the heartbeat followed the conversation into a continuation."""
        return self.reservation.session_id != self.origin.session_id

    async def before_execution(self, session_id: str) -> bool:
        """The agent's hook, called once the turn is prepared: re-check that the heartbeat
        still belongs to this conversation, that the emergency stop is off and that no user
        input waits, then confirm. ``False`` declines the turn (the caller gives the slot
        back). User input arriving while the confirmation is written still goes first: the
        confirmation is then withdrawn."""
        self.follow(self.reservation.session_id, session_id)
        reason = self._refusal()
        if reason is not None:
            log.info("heartbeat of %s declined before execution: %s", session_id, reason)
            return False
        self._confirming = True
        if not await self.scheduler.confirm(self.reservation):
            # Given back already; only a failed move to the continuation may have left the
            # reservation on the origin, for give_back to find.
            self._settled = not self.moved
            return False
        reason = self._refusal()
        if reason is not None:
            log.info("heartbeat of %s withdrawn before execution: %s", session_id, reason)
            return False
        self.began = self._settled = True
        await self._on_begin(session_id)
        return True

    async def give_back(self, *, failed: bool = False) -> None:
        """End an attempt that did not begin executing (a no-op once it began or was given
        back): refund the slot, or undo its confirmation if one was written. Giving back
        what ``confirm`` gave back already finds nothing to do, so this is always safe.
        ``failed``: it ended in an error, so the next try waits (see ``HOLD_OFF``)."""
        if self._settled:
            return
        self._settled = True
        give = self.scheduler.withdraw if self._confirming else self.scheduler.refund
        # The origin first: compression copies the record to the continuation before it
        # deletes the original, so if the origin no longer holds it the continuation does.
        after = await give(self.origin, failed=failed)
        if after is None and self.moved:
            await give(self.reservation, failed=failed)
