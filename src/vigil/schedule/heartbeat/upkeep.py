"""What vigil does to a heartbeat by itself: clear it when its end has come, pause it when
its turns went over ``heartbeat.daily_token_budget``. Each leaves a note in the conversation
(:mod:`vigil.schedule.heartbeat.notes`).

Both are blocking store calls for the scheduler to run off the event loop; both change the
record by compare-and-set, so of several processes exactly one clears or pauses it and
exactly one note is written.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Coroutine

from vigil.schedule.heartbeat.cost import DAY, conversation_cost
from vigil.schedule.heartbeat.notes import ENDED, OVER_BUDGET, ended_text, over_budget_text, write_note
from vigil.schedule.heartbeat.record import Heartbeat, HeartbeatError
from vigil.schedule.heartbeat.repo import HeartbeatRepo
from vigil.store import StoreError

if TYPE_CHECKING:
    from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Noted:
    """A heartbeat vigil ended or paused, and the note it left (``kind``: ``ended`` or
    ``over_budget``)."""

    session_id: str
    heartbeat: Heartbeat
    text: str
    kind: str


def expire(repo: HeartbeatRepo, session_id: str) -> Noted | None:
    """Clear the heartbeat of ``session_id`` if its end has come, with a note; ``None``: it
    has not ended, or another process cleared it first."""
    removed = repo.expire(session_id)
    if removed is None:
        return None
    text = ended_text(removed)
    write_note(repo.store, session_id, text, ENDED, repo.clock.now())
    return Noted(session_id, removed, text, ENDED)


def pause_if_over_budget(repo: HeartbeatRepo, session_id: str, budget: int) -> Noted | None:
    """Pause the heartbeat of ``session_id`` with a note when its turns of the last 24 hours
    used more than ``budget`` tokens; ``None``: within the budget (or nothing to pause)."""
    heartbeat = repo.get(session_id)
    if heartbeat is None or not heartbeat.active:
        return None
    now = repo.clock.now()
    cost = conversation_cost(repo.store, session_id, now - DAY)
    if cost.tokens <= budget:
        return None
    paused = repo.pause_over_budget(session_id, heartbeat.version)
    if paused is None:
        return None
    text = over_budget_text(paused, cost, budget)
    write_note(repo.store, session_id, text, OVER_BUDGET, now)
    return Noted(session_id, paused, text, OVER_BUDGET)


class Upkeep:
    """The scheduler's side of the above: runs them off the event loop, re-arms the engine
    and hands each note to :attr:`HeartbeatScheduler.on_note`."""

    def __init__(self, scheduler: "HeartbeatScheduler") -> None:
        self.scheduler = scheduler
        self._tasks: set[asyncio.Task[None]] = set()

    async def over_budget(self, session_id: str) -> bool:
        """Before a claim: pause the heartbeat, with a note, if it went over the daily token
        budget (``True``: paused, nothing to claim)."""
        scheduler = self.scheduler
        budget = scheduler.daily_token_budget
        if budget is None:
            return False
        try:
            noted = await scheduler.offloaded(pause_if_over_budget, scheduler.repo, session_id, budget)
        except (HeartbeatError, StoreError) as exc:
            log.warning("cannot check the heartbeat budget of %s: %s", session_id, exc)
            return False
        if noted is None:
            return False
        await scheduler.refresh(session_id)
        self._noted(noted)
        return True

    async def expire(self, session_id: str) -> None:
        """The heartbeat's end has come: clear it, with a note."""
        scheduler = self.scheduler
        try:
            noted = await scheduler.offloaded(expire, scheduler.repo, session_id)
        except (HeartbeatError, StoreError) as exc:
            log.warning("cannot end the heartbeat of %s: %s (tried again later)", session_id, exc)
            if scheduler.owns(session_id):
                scheduler.engine.arm(session_id, scheduler.clock.now() + scheduler.hold_off)
            return
        try:
            await scheduler.refresh(session_id)
        except (HeartbeatError, StoreError) as exc:
            log.warning("cannot re-read the heartbeat of %s: %s", session_id, exc)
        if noted is not None:
            self._noted(noted)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in a task of its own (the engine's callback must return at once)."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel(self) -> None:
        """Stop what still runs (the scheduler stops)."""
        for task in list(self._tasks):
            task.cancel()

    def _noted(self, noted: Noted) -> None:
        on_note = self.scheduler.on_note
        if on_note is None:
            return
        try:
            on_note(noted)
        except Exception:
            log.exception("on_note failed for %s", noted.session_id)
