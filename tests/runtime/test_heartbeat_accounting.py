"""Run accounting inside a live conversation: reserve at admission, refund when the attempt
ends before the agent begins executing, count once it has begun, recover after a crash."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from tests.runtime.conftest import Runtime, RuntimeFactory
from vigil.schedule import estop
from vigil.schedule.heartbeat.repo import HeartbeatRepo, Reservation
from vigil.schedule.heartbeat.text import is_heartbeat_message
from vigil.schedule.heartbeat.scheduler import HOLD_OFF, HeartbeatScheduler
from vigil.store import StoreError
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

MIN = 60
DEAD_OWNER = f"{socket.gethostname()}:999999999:gone"
"""A reservation owner on this host whose process cannot exist (pids never get this high)."""


class _Hooked(HeartbeatScheduler):
    """A scheduler that lets a test act at the moment a slot has just been reserved, or just
    before the reservation is confirmed."""

    after_claim = None  # set per test: async callable(reservation)
    before_confirm = None
    after_confirm = None

    async def confirm(self, reservation: Reservation) -> bool:
        if self.before_confirm is not None:
            hook, self.before_confirm = self.before_confirm, None
            await hook(reservation)
        confirmed = await super().confirm(reservation)
        if self.after_confirm is not None:
            hook, self.after_confirm = self.after_confirm, None
            await hook(reservation)
        return confirmed

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
    dead = HeartbeatRepo(first.store, first.clock, owner=DEAD_OWNER).reserve(session_id)
    assert dead is not None and first.heartbeat(session_id).fire_count == 1  # died before executing

    second = await make_runtime(session_id=session_id)
    await second.settle()
    assert second.scheduler.stats.orphans_refunded == 1
    # refunded, then fired for real by the new process: counted once
    assert len(second.heartbeat_turns()) == 1 and second.heartbeat().fire_count == 1


def _stored_heartbeats(rt: Runtime) -> int:
    return sum(
        1 for m in rt.store.get_messages(rt.session_id) if m.role == "user" and is_heartbeat_message(m.content)
    )


async def test_user_input_arriving_during_confirmation_goes_first(make_runtime: RuntimeFactory) -> None:
    rt = await _hooked(make_runtime)

    async def user_types(reservation: Reservation) -> None:
        rt.conversation.submit("typed during confirm")  # before the agent begins executing

    rt.scheduler.before_confirm = user_types
    await rt.advance(10 * MIN)
    assert rt.order() == ["hello", "typed during confirm", "♥"]
    assert rt.heartbeat().fire_count == 1 and _stored_heartbeats(rt) == 1


async def test_user_input_arriving_once_confirmed_still_goes_first(make_runtime: RuntimeFactory) -> None:
    rt = await _hooked(make_runtime)

    async def user_types(reservation: Reservation) -> None:
        rt.conversation.submit("typed as it was confirmed")  # the confirmation is written

    rt.scheduler.after_confirm = user_types
    await rt.advance(10 * MIN)
    # the confirmation is withdrawn (count and timer back), the user's turn runs, then the fire
    assert rt.order() == ["hello", "typed as it was confirmed", "♥"]
    assert rt.scheduler.stats.withdrawn == 1
    assert rt.heartbeat().fire_count == 1 and _stored_heartbeats(rt) == 1


async def test_suspend_arriving_during_confirmation_wins_at_once(make_runtime: RuntimeFactory) -> None:
    rt = await _hooked(make_runtime)
    old = rt.session_id
    stopping: list[asyncio.Future] = []

    async def stop_now(reservation: Reservation) -> None:
        stopping.append(rt.conversation.submit("/suspend"))

    rt.scheduler.before_confirm = stop_now
    await rt.clock.advance(10 * MIN)
    while not stopping:
        await asyncio.sleep(0.002)
    started = time.monotonic()
    outcome = await stopping[0]
    assert time.monotonic() - started < 2
    await rt.settle()
    assert outcome.reply.text.startswith(f"Conversation {old} suspended.")
    assert rt.heartbeat_turns() == [] and rt.heartbeat(old) is None
    assert not any(is_heartbeat_message(m.content) for m in rt.store.get_messages(old))


async def test_preparation_rejected_is_refunded_and_retried_later(make_runtime: RuntimeFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = await _hooked(make_runtime)
    due = rt.heartbeat().next_due
    prompts = rt.agent.prompts
    original = prompts.prompt_for_turn
    failing = {"armed": False}

    async def flaky_prompt(*args, **kwargs):  # type: ignore[no-untyped-def]
        if failing.pop("armed", False):
            raise StoreError("database is locked")  # while the turn is being prepared
        return await original(*args, **kwargs)

    monkeypatch.setattr(prompts, "prompt_for_turn", flaky_prompt)

    async def arm(reservation: Reservation) -> None:
        failing["armed"] = True

    rt.scheduler.after_claim = arm
    await rt.advance(10 * MIN)
    hb = rt.heartbeat()
    assert rt.heartbeat_turns() == [] and rt.ended()[-1].kind == "user"
    assert hb.fire_count == 0 and hb.next_due == due and hb.pending is None
    assert rt.scheduler.stats.refunded == 1 and rt.scheduler.stats.confirmed == 0
    # a failed attempt is not retried in a tight loop, but after the hold-off
    assert rt.scheduler.next_fire(rt.session_id) == rt.clock.now() + HOLD_OFF
    await rt.advance(HOLD_OFF)
    assert len(rt.heartbeat_turns()) == 1 and rt.heartbeat().fire_count == 1


async def test_closing_while_the_confirmation_is_being_written_does_not_count(make_runtime: RuntimeFactory) -> None:
    rt = await _hooked(make_runtime)
    due = rt.heartbeat().next_due
    repo = rt.scheduler.repo
    original = repo.confirm
    loop = asyncio.get_running_loop()
    entered = asyncio.Event()

    def slow_confirm(reservation: Reservation) -> bool:
        loop.call_soon_threadsafe(entered.set)
        done = original(reservation)  # the write commits ...
        time.sleep(0.3)  # ... but the worker thread has not returned yet
        return done

    repo.confirm = slow_confirm  # type: ignore[method-assign]
    await rt.clock.advance(10 * MIN)
    await entered.wait()
    await rt.conversation.close()  # the REPL quits while the confirmation is in flight
    hb = rt.heartbeat()
    # it never reached execution: the written confirmation was undone before close returned
    assert rt.heartbeat_turns() == [] and _stored_heartbeats(rt) == 0
    assert hb.fire_count == 0 and hb.next_due == due and hb.pending is None
    assert rt.scheduler.stats.withdrawn == 1
