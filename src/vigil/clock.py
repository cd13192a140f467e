"""Time as an injectable dependency.

Everything that reads the time or sleeps takes a :class:`Clock`, so that schedulers and
tests can run on a :class:`FakeClock` that only moves when the test says so.
"""

from __future__ import annotations

import heapq
import itertools
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Protocol, runtime_checkable

# asyncio is imported by the coroutines that sleep (they run in a loop, so it is loaded by
# then): reading the time, as every store does, must not cost a CLI command asyncio's import.
if TYPE_CHECKING:
    import asyncio


@runtime_checkable
class Clock(Protocol):
    """A source of wall-clock time and a way to wait for it."""

    def now(self) -> float:
        """Seconds since the Unix epoch (UTC), as a float."""
        ...

    def utcnow(self) -> datetime:
        """The current time as an aware UTC datetime."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait until ``seconds`` of this clock's time have passed."""
        ...

    async def sleep_until(self, when: float) -> None:
        """Wait until this clock reads at least ``when`` (epoch seconds)."""
        ...


class SystemClock:
    """The machine's real clock."""

    def now(self) -> float:
        return time.time()

    def utcnow(self) -> datetime:
        return datetime.now(timezone.utc)

    async def sleep(self, seconds: float) -> None:
        import asyncio

        await asyncio.sleep(max(0.0, seconds))

    async def sleep_until(self, when: float) -> None:
        import asyncio

        await asyncio.sleep(max(0.0, when - time.time()))


class FakeClock:
    """A clock that stands still until :meth:`advance` or :meth:`set` moves it.

    Sleepers wake, in due-time order, when the clock passes their deadline. ``advance`` is
    async so that woken tasks get to run before it returns.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = float(start)
        self._waiters: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def utcnow(self) -> datetime:
        return datetime.fromtimestamp(self._now, timezone.utc)

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self._now + max(0.0, seconds))

    async def sleep_until(self, when: float) -> None:
        import asyncio

        if when <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (when, next(self._seq), future))
        await future

    @property
    def pending_sleepers(self) -> int:
        """How many tasks are currently sleeping on this clock."""
        return sum(1 for _, _, f in self._waiters if not f.done())

    def set_sync(self, when: float) -> None:
        """Move the clock without yielding (for synchronous tests); wakes nobody until awaited."""
        self._now = float(when)
        self._release_due()

    async def set(self, when: float) -> None:
        """Jump to ``when`` (never backwards) and let every woken sleeper run."""
        import asyncio

        if when < self._now:
            raise ValueError("a FakeClock never goes backwards")
        self._now = float(when)
        self._release_due()
        for _ in range(5):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move forward by ``seconds`` and let every woken sleeper run."""
        await self.set(self._now + seconds)

    def _release_due(self) -> None:
        while self._waiters and self._waiters[0][0] <= self._now:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)
