"""The due-time engine: one sleeper, earliest deadline first, early wake on change, no polling."""

from __future__ import annotations

import asyncio

from vigil.clock import FakeClock
import pytest

from vigil.schedule.engine import MAX_SLEEP, DueEngine


async def _yield(times: int = 20) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def test_fires_each_key_at_its_due_time_and_sleeps_in_between(clock: FakeClock) -> None:
    fired: list[tuple[str, float, float]] = []
    engine = DueEngine(clock, lambda key, due: fired.append((key, due, clock.now())))
    t0 = clock.now()
    for key, offset in (("b", 200), ("a", 100), ("c", 300)):
        engine.arm(key, t0 + offset)
    engine.start()
    await _yield()
    assert fired == [] and clock.pending_sleepers == 1  # one sleeper for all keys
    await clock.advance(99)
    assert fired == []
    await clock.advance(1)
    assert fired == [("a", t0 + 100, t0 + 100)]
    await clock.advance(250)  # a jump past two deadlines fires both, in order
    assert [k for k, _, _ in fired] == ["a", "b", "c"]
    assert len(engine) == 0 and engine.next_due() is None
    wakeups = engine.stats.wakeups
    await clock.advance(86_400 * 30)
    assert engine.stats.wakeups == wakeups and clock.pending_sleepers == 0  # nothing polls
    await engine.stop()


async def test_an_earlier_arming_wakes_the_engine(clock: FakeClock) -> None:
    fired: list[str] = []
    engine = DueEngine(clock, lambda key, due: fired.append(key))
    t0 = clock.now()
    engine.arm("late", t0 + 10_000)
    engine.start()
    await _yield()
    engine.arm("soon", t0 + 10)
    await _yield()
    await clock.advance(10)
    assert fired == ["soon"]
    engine.arm("overdue", t0 - 5)  # already due: fires without the clock moving
    await _yield()
    assert fired == ["soon", "overdue"]
    await engine.stop()


async def test_re_arming_and_disarming(clock: FakeClock) -> None:
    fired: list[str] = []
    engine = DueEngine(clock, lambda key, due: fired.append(key))
    t0 = clock.now()
    engine.arm("k", t0 + 10)
    engine.arm("gone", t0 + 10)
    engine.start()
    await _yield()
    engine.arm("k", t0 + 50)  # later: no wake-up needed, the stale entry is skipped
    engine.disarm("gone")
    await clock.advance(10)
    assert fired == []
    await clock.advance(40)
    assert fired == ["k"] and engine.stats.fired == 1
    await engine.stop()


async def test_a_failing_handler_does_not_stop_other_schedules(clock: FakeClock) -> None:
    fired: list[str] = []

    def handler(key: str, due: float) -> None:
        if key == "bad":
            raise RuntimeError("boom")
        fired.append(key)

    engine = DueEngine(clock, handler)
    engine.arm("bad", clock.now() + 1)
    engine.arm("good", clock.now() + 2)
    engine.start()
    await clock.advance(5)
    assert fired == ["good"]
    await engine.stop()


async def test_many_keys_re_armed_keep_the_heap_small(clock: FakeClock) -> None:
    engine = DueEngine(clock, lambda key, due: None)
    for round_ in range(50):
        for i in range(100):
            engine.arm(f"k{i}", clock.now() + 1000 + round_ + i)
    assert len(engine) == 100 and len(engine._heap) <= 4 * 100 + 100


class _SuspendableClock:
    """A wall clock that can jump (suspend/resume, an NTP step) while sleeps are timed on a
    monotonic timer, as :class:`vigil.clock.SystemClock`'s are; the timer is a fake clock."""

    def __init__(self, timer: FakeClock) -> None:
        self.timer = timer
        self.jumped = 0.0

    def now(self) -> float:
        return self.timer.now() + self.jumped

    def utcnow(self):  # type: ignore[no-untyped-def]
        return self.timer.utcnow()

    async def sleep(self, seconds: float) -> None:
        await self.timer.sleep(seconds)

    async def sleep_until(self, when: float) -> None:
        await self.timer.sleep(when - self.now())


async def test_a_wall_clock_jump_is_noticed_within_one_sleep_chunk(clock: FakeClock) -> None:
    wall = _SuspendableClock(clock)
    fired: list[float] = []
    engine = DueEngine(wall, lambda key, due: fired.append(wall.now() - due))
    engine.arm("job", wall.now() + 3600)
    engine.start()
    await _yield()
    await clock.advance(10)
    wall.jumped = 7200.0  # the machine resumes: the wall clock is now an hour past due
    await clock.advance(MAX_SLEEP - 10)
    await _yield()
    assert fired == [pytest.approx(3600 + 30)]  # noticed at the end of the first chunk
    await engine.stop()


async def test_idle_wake_ups_stay_rare_with_chunked_sleeps(clock: FakeClock) -> None:
    engine = DueEngine(clock, lambda key, due: None)
    engine.arm("daily", clock.now() + 86_400)
    engine.start()
    await _yield()
    for _ in range(24 * 60):  # a day, one minute at a time
        await clock.advance(60)
    assert engine.stats.fired == 1
    # one wake-up per chunk at most: a timer every 30 s is negligible idle work
    assert engine.stats.wakeups <= 86_400 / MAX_SLEEP + 2
    await engine.stop()
