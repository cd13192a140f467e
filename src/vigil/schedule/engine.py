"""The due-time engine shared by heartbeats and cron: one sleeper for any number of schedules.

The engine keeps each armed key's due time in a heap and sleeps on the injected clock until
the earliest one; arming or disarming a key wakes it early (an ``asyncio.Event``), so a change
takes effect at once. When a key comes due the engine forgets it and calls
``on_due(key, due)``; whoever handles the fire arms the key again with its next due time.

A long wait is slept in chunks of at most :data:`MAX_SLEEP` seconds with the wall clock read
again after each, so a wall-clock jump (suspend and resume, an NTP step) delays a fire by at
most one chunk. With nothing armed the engine waits for a change and does not wake at all.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from dataclasses import dataclass
from typing import Callable

from vigil.clock import Clock

log = logging.getLogger(__name__)

MAX_SLEEP = 30.0
"""The longest single sleep: how late a fire can be after the wall clock jumps forward."""

DueCallback = Callable[[str, float], None]
"""``on_due(key, due)``: must return quickly; long work belongs in a task of its own."""


@dataclass
class EngineStats:
    """What the engine did: how often it woke and how many keys came due."""

    wakeups: int = 0
    fired: int = 0


class DueEngine:
    """Calls ``on_due`` for each armed key once the clock reaches its due time."""

    def __init__(self, clock: Clock, on_due: DueCallback, *, max_sleep: float = MAX_SLEEP) -> None:
        self.clock = clock
        self.on_due = on_due
        self.max_sleep = max_sleep
        self.stats = EngineStats()
        self._due: dict[str, float] = {}
        # Entries are (due, seq, key); an entry whose due no longer matches _due is stale
        # and skipped, which makes re-arming O(log n) without searching the heap.
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._target: float | None = None  # what the running loop sleeps until

    # -- arming -----------------------------------------------------------------------------
    def arm(self, key: str, due: float) -> None:
        """Fire ``key`` at ``due`` (replacing any earlier arming of it)."""
        if self._due.get(key) == due:
            return
        self._due[key] = due
        heapq.heappush(self._heap, (due, next(self._seq), key))
        # Only an earlier deadline needs a wake-up; a later one is found when the engine
        # next wakes and skips the stale entry.
        if self._target is None or due < self._target:
            self._changed.set()
        self._compact()

    def disarm(self, key: str) -> None:
        """Forget ``key``; nothing fires for it until it is armed again."""
        self._due.pop(key, None)
        self._compact()

    def due_of(self, key: str) -> float | None:
        """When ``key`` is armed to fire, or ``None``."""
        return self._due.get(key)

    def next_due(self) -> float | None:
        """The earliest armed due time, or ``None`` when nothing is armed."""
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._due)

    # -- running ------------------------------------------------------------------------------
    def start(self) -> asyncio.Task[None]:
        """Run the engine in a background task (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name="due-engine")
        return self._task

    async def stop(self) -> None:
        """Stop the background task started by :meth:`start`."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def run(self) -> None:
        """Fire due keys forever; sleep until the earliest due time or a change."""
        while True:
            self._changed.clear()
            self._fire_due()
            when = self._target = self.next_due()
            try:
                if when is None:
                    await self._changed.wait()
                else:
                    await self._sleep_or_change(when)
            finally:
                self._target = None
            self.stats.wakeups += 1

    def _fire_due(self) -> None:
        now = self.clock.now()
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now:
                return
            due, _, key = heapq.heappop(self._heap)
            del self._due[key]
            self.stats.fired += 1
            try:
                self.on_due(key, due)
            except Exception:
                # One broken handler must not stop every other schedule.
                log.exception("schedule handler failed for %s", key)

    async def _sleep_or_change(self, when: float) -> None:
        # Sleep until ``when`` by the clock as read now, but never longer than one chunk: a
        # sleep is timed on a monotonic timer, which does not see the wall clock jump.
        until = min(when, self.clock.now() + self.max_sleep)
        sleeper = asyncio.ensure_future(self.clock.sleep_until(until))
        waiter = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait((sleeper, waiter), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waiter.cancel()

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and self._due.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)

    def _compact(self) -> None:
        # Stale entries are dropped lazily at the top; rebuild when they dominate so that
        # memory stays proportional to the armed keys under heavy re-arming.
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._due):
            self._heap = [(d, s, k) for d, s, k in self._heap if self._due.get(k) == d]
            heapq.heapify(self._heap)
