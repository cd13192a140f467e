"""Run accounting inside a live conversation: reserve at admission, refund when the attempt
ends before the agent begins executing, count once it has begun, recover after a crash."""

from __future__ import annotations

import asyncio

from tests.runtime.conftest import Runtime, RuntimeFactory
from vigil.schedule import estop
from vigil.schedule.heartbeat_repo import HeartbeatRepo, Reservation
from vigil.schedule.scheduler import HeartbeatScheduler
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

MIN = 60


class _Hooked(HeartbeatScheduler):
    """A scheduler that lets a test act at the moment a slot has just been reserved, or just
    before the reservation is confirmed."""

    after_claim = None  # set per test: async callable(reservation)
    before_confirm = None

    async def confirm(self, reservation: Reservation) -> bool:
        if self.before_confirm is not None:
            hook, self.before_confirm = self.before_confirm, None
            await hook(reservation)
        return await super().confirm(reservation)

    async def claim(self, session_id: str) -> Reservation | None:
        reservation = await super().claim(session_id)
        if reservation is not None and self.after_claim is not None:
            hook, self.after_claim = self.after_claim, None
            await hook(reservation)
        return reservation


async def _hooked(make_runtime: RuntimeFactory) -> Runtime:
    runtime = await make_runtime(scheduler_cls=_Hooked)
    await runtime.send("hello")
    await runtime.command("/hb every 10m check")
    return runtime


async def test_user_input_arriving_at_admission_is_served_first_and_the_slot_refunded(make_runtime: RuntimeFactory) -> None:
    rt = await _hooked(make_runtime)
    seen: list[int] = []

    async def user_types(reservation: Reservation) -> None:
        seen.append(rt.heartbeat().fire_count)  # reserved durably before anything else
        rt.conversation.submit("typed just now")

    rt.scheduler.after_claim = user_types
    await rt.advance(10 * MIN)
    assert seen == [1]
    assert rt.order() == ["hello", "typed just now", "♥"]
    assert rt.heartbeat().fire_count == 1 and rt.scheduler.stats.refunded == 1


async def test_cancelled_before_execution_is_refunded(make_runtime: RuntimeFactory) -> None:
    rt = await _hooked(make_runtime)
    due = rt.heartbeat().next_due
    release = asyncio.Event()

    async def stall(reservation: Reservation) -> None:
        await release.wait()

    rt.scheduler.before_confirm = stall
    await rt.clock.advance(10 * MIN)
    for _ in range(50):
        await asyncio.sleep(0.002)
        if rt.heartbeat().fire_count == 1:
            break
    assert rt.heartbeat().pending is not None
    await rt.conversation.close()  # e.g. the REPL quits between reserving and executing
    hb = rt.heartbeat()
    assert hb.fire_count == 0 and hb.next_due == due and hb.pending is None and rt.heartbeat_turns() == []


async def test_cleared_meanwhile_is_not_dispatched(make_runtime: RuntimeFactory) -> None:
    rt = await _hooked(make_runtime)

    async def cleared_elsewhere(reservation: Reservation) -> None:
        await asyncio.to_thread(HeartbeatRepo(rt.store, rt.clock).clear, rt.session_id)

    rt.scheduler.after_claim = cleared_elsewhere
    await rt.advance(10 * MIN)
    assert rt.heartbeat_turns() == [] and rt.heartbeat() is None


async def test_paused_meanwhile_gives_the_count_back(make_runtime: RuntimeFactory) -> None:
    rt = await _hooked(make_runtime)

    async def paused_elsewhere(reservation: Reservation) -> None:
        await asyncio.to_thread(HeartbeatRepo(rt.store, rt.clock).pause, rt.session_id)

    rt.scheduler.after_claim = paused_elsewhere
    await rt.advance(10 * MIN)
    hb = rt.heartbeat()
    assert rt.heartbeat_turns() == [] and hb.status == "paused" and hb.fire_count == 0


async def test_emergency_stop_refunds_without_killing_running_work(rt: Runtime, fake_model: FakeModelServer) -> None:
    await rt.command("/hb every 10m check")
    sent = len(fake_model.requests)
    fake_model.queue(Reply.text("long work done", delay=0.3))
    running = rt.conversation.submit("long work")
    await fake_model.wait_for_requests_async(sent + 1)
    estop.engage(rt.store, rt.clock.now(), reason="test")  # `vigil pause` from a shell
    await rt.clock.advance(10 * MIN)
    outcome = await running
    assert outcome.result is not None and outcome.result.answer == "long work done"
    await rt.settle()
    assert rt.heartbeat_turns() == [] and rt.heartbeat().fire_count == 0
    assert rt.scheduler.stats.stopped == 1 and rt.scheduler.stats.refunded == 1
    assert "emergency stop is on" in await rt.command("/hb status")
    await rt.advance(60 * MIN)
    assert rt.heartbeat_turns() == []
    estop.release(rt.store)  # `vigil resume`
    await rt.advance(30)  # noticed within one poll
    assert len(rt.heartbeat_turns()) == 1 and rt.heartbeat().fire_count == 1


async def test_a_reservation_of_a_dead_process_is_refunded_on_start_up(make_runtime: RuntimeFactory) -> None:
    first = await make_runtime()
    await first.send("hello")
    await first.command("/hb every 10m check")
    session_id = first.session_id
    await first.conversation.close()
    await first.scheduler.stop()
    await first.clock.advance(10 * MIN)
    dead = HeartbeatRepo(first.store, first.clock, owner="vm:999999999:gone").reserve(session_id)
    assert dead is not None and first.heartbeat(session_id).fire_count == 1  # died before executing

    second = await make_runtime(session_id=session_id)
    await second.settle()
    assert second.scheduler.stats.orphans_refunded == 1
    # refunded, then fired for real by the new process: counted once
    assert len(second.heartbeat_turns()) == 1 and second.heartbeat().fire_count == 1
