"""A due heartbeat waits while the person has a half-typed line at the prompt."""

from __future__ import annotations

from tests.runtime.conftest import Runtime
from vigil.runtime.conversation import DRAFT_QUIET

MIN = 60.0


async def test_a_draft_holds_a_due_heartbeat_until_it_is_cleared(rt: Runtime) -> None:
    await rt.command("/hb every 10m check")
    await rt.advance(10 * MIN - 1)
    rt.conversation.drafting()
    await rt.advance(1)
    assert rt.heartbeat_turns() == [] and rt.conversation.heartbeat_waiting_for_draft
    # nothing is claimed while it waits: the fire is not counted, the due time stays
    hb = rt.heartbeat()
    assert hb.fire_count == 0 and hb.next_due <= rt.clock.now()
    rt.conversation.draft_cleared()
    await rt.settle()
    assert len(rt.heartbeat_turns()) == 1 and not rt.conversation.heartbeat_waiting_for_draft
    assert rt.heartbeat().fire_count == 1


async def test_a_sent_draft_goes_first_and_the_heartbeat_follows(rt: Runtime) -> None:
    await rt.command("/hb every 10m check")
    await rt.advance(10 * MIN - 1)
    rt.conversation.drafting()
    await rt.advance(1)
    assert rt.heartbeat_turns() == []
    sent = rt.conversation.submit("what I was typing")
    rt.conversation.draft_cleared()
    await sent
    await rt.settle()
    assert rt.order()[-2:] == ["what I was typing", "♥"]
    assert rt.heartbeat().fire_count == 1


async def test_a_quiet_keyboard_lets_the_heartbeat_fire_into_the_draft(rt: Runtime) -> None:
    await rt.command("/hb every 10m check")
    await rt.advance(10 * MIN - 1)
    rt.conversation.drafting()
    await rt.advance(1)
    await rt.advance(100)
    assert rt.heartbeat_turns() == [] and rt.conversation.heartbeat_waiting_for_draft
    rt.conversation.drafting()  # a keystroke: another full quiet period from here
    await rt.advance(DRAFT_QUIET - 1)
    assert rt.heartbeat_turns() == []
    await rt.advance(1)
    assert len(rt.heartbeat_turns()) == 1 and rt.heartbeat().fire_count == 1


async def test_without_a_draft_it_fires_on_time(rt: Runtime) -> None:
    await rt.command("/hb every 10m check")
    rt.conversation.drafting()
    rt.conversation.draft_cleared()
    await rt.advance(10 * MIN)
    assert len(rt.heartbeat_turns()) == 1
