"""A conversation wired as `vigil chat` wires it, with a REPL lease book: opening a conversation
takes its heartbeat lease (from a gateway too), leaving it by /new, /resume <other>, /suspend or
closing releases it, and the heartbeat fires here while the lease is held. A conversation
without a heartbeat holds no lease (and writes nothing to keep one)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.conftest import Runtime, RuntimeFactory
from vigil.schedule.heartbeat.lease import GATEWAY, REPL, LeaseBook
from vigil.schedule.heartbeat.scheduler import HeartbeatScheduler
from vigil.store import SessionStore

MIN = 60


class ReplScheduler(HeartbeatScheduler):
    """The REPL's scheduler: leases of kind ``repl`` (as ``vigil chat`` builds it)."""

    def __init__(self, store: SessionStore, **kwargs: Any) -> None:
        super().__init__(store, leases=LeaseBook(store, kwargs["clock"], kind=REPL), **kwargs)


def _holder(rt: Runtime, session_id: str) -> str | None:
    lease = LeaseBook(rt.store, rt.clock, kind=GATEWAY).holder(session_id)
    return None if lease is None else lease.kind


@pytest.fixture
async def rt(make_runtime: RuntimeFactory) -> Runtime:
    runtime = await make_runtime(scheduler_cls=ReplScheduler)
    await runtime.send("hello")
    return runtime


async def test_the_open_conversation_holds_the_lease_and_its_heartbeat_fires(rt: Runtime) -> None:
    assert _holder(rt, rt.session_id) is None  # no heartbeat yet: nothing to own
    await rt.command("/hb every 10m check the CI")
    assert _holder(rt, rt.session_id) == REPL
    for _ in range(25):
        await rt.advance(MIN)
    assert len(rt.heartbeat_turns()) == 2 and rt.heartbeat().fire_count == 2
    assert _holder(rt, rt.session_id) == REPL  # renewed all along
    await rt.command("/hb clear")
    assert _holder(rt, rt.session_id) is None


async def test_new_releases_the_old_conversations_lease(rt: Runtime) -> None:
    old = rt.session_id
    await rt.command("/hb every 10m check the CI")
    assert _holder(rt, old) == REPL
    await rt.command("/new")
    assert _holder(rt, old) is None
    await rt.send("a fresh start")
    await rt.command("/hb every 10m check the CI")
    assert _holder(rt, rt.session_id) == REPL


async def test_resume_other_moves_the_lease_and_suspend_releases_it(rt: Runtime, make_runtime: RuntimeFactory) -> None:
    other = await make_runtime()
    await other.send("another conversation")
    first = rt.session_id
    await rt.command("/hb every 10m check the CI")
    await rt.command(f"/resume {other.session_id}")
    assert _holder(rt, first) is None
    await rt.command("/hb every 10m check the other CI")
    assert _holder(rt, other.session_id) == REPL
    await rt.command("/suspend")
    assert _holder(rt, other.session_id) is None


async def test_closing_the_conversation_releases_the_lease(rt: Runtime) -> None:
    await rt.command("/hb every 10m check the CI")
    assert _holder(rt, rt.session_id) == REPL
    await rt.conversation.close()
    await rt.scheduler.stop()
    assert _holder(rt, rt.session_id) is None


async def test_opening_a_conversation_takes_its_heartbeat_over_from_the_gateway(
    rt: Runtime, make_runtime: RuntimeFactory
) -> None:
    session_id = rt.session_id
    await rt.command("/hb every 10m check the CI")
    await rt.conversation.close()
    await rt.scheduler.stop()
    gateway = LeaseBook(rt.store, rt.clock, kind=GATEWAY, seconds=24 * 3600)
    assert gateway.take(session_id)  # the gateway runs it while no REPL is open

    reopened = await make_runtime(session_id=session_id, scheduler_cls=ReplScheduler)
    assert _holder(reopened, session_id) == REPL and gateway.renew([session_id]) == set()
    await reopened.advance(11 * MIN)
    assert len(reopened.heartbeat_turns()) == 1
