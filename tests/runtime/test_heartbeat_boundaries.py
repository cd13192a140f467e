"""Conversation boundaries: /new, /resume <other> and /suspend clear the old conversation's
heartbeat for good; compression carries it into the continuation."""

from __future__ import annotations

import pytest

from tests.runtime.conftest import Runtime, RuntimeFactory
from vigil.agent.compression import SUMMARY_REQUEST_MARKER, Compressor
from vigil.config.settings import AgentSettings, Settings, ToolSettings
from vigil.testing.fake_model import FakeModelServer

MIN = 60


async def _with_heartbeat(rt: Runtime) -> str:
    await rt.command("/hb every 10m check")
    return rt.session_id


async def test_new_clears_and_resuming_the_archived_conversation_does_not_restore(rt: Runtime) -> None:
    old = await _with_heartbeat(rt)
    reply = await rt.command("/new")
    assert "The previous conversation's heartbeat was cleared." in reply
    assert rt.heartbeat(old) is None and rt.session_id != old
    await rt.advance(30 * MIN)
    assert rt.heartbeat_turns() == []
    await rt.command(f"/resume {old}")
    assert rt.session_id == old and rt.heartbeat() is None
    await rt.advance(30 * MIN)
    assert rt.heartbeat_turns() == []


async def test_resume_other_clears_but_resume_same_keeps(rt: Runtime, make_runtime: RuntimeFactory) -> None:
    other = await make_runtime()
    await other.send("another conversation")
    current = await _with_heartbeat(rt)
    same = await rt.command(f"/resume {current[:6]}")
    assert "cleared" not in same and rt.heartbeat(current) is not None
    switched = await rt.command(f"/resume {other.session_id}")
    assert "The previous conversation's heartbeat was cleared." in switched
    assert rt.heartbeat(current) is None
    await rt.advance(30 * MIN)
    assert rt.heartbeat_turns() == []


async def test_suspend_suspends_and_clears(rt: Runtime) -> None:
    old = await _with_heartbeat(rt)
    reply = await rt.command("/suspend")
    assert reply.startswith(f"Conversation {old} suspended. The previous conversation's heartbeat was cleared.")
    assert rt.controller.session_id is None and rt.heartbeat(old) is None
    assert rt.store.get_session(old).end_reason == "suspend"
    await rt.advance(30 * MIN)
    assert rt.heartbeat_turns() == []
    await rt.send("a new start")
    assert rt.session_id != old and rt.heartbeat() is None


async def test_suspend_interrupts_a_running_heartbeat_turn(rt: Runtime, fake_model: FakeModelServer) -> None:
    from vigil.testing.scripting import Reply

    old = await _with_heartbeat(rt)
    sent = len(fake_model.requests)
    fake_model.queue(Reply.text("slow heartbeat", delay=5))
    await rt.clock.advance(10 * MIN)
    await fake_model.wait_for_requests_async(sent + 1)
    outcome = await rt.conversation.send("/suspend")
    await rt.settle()
    assert outcome.reply.text.startswith(f"Conversation {old} suspended.")
    assert [e.cancelled for e in rt.ended() if e.kind == "heartbeat"] == [True]
    assert rt.heartbeat(old) is None


async def test_stop_ends_the_running_turn_and_keeps_the_conversation_and_heartbeat(
    rt: Runtime, fake_model: FakeModelServer
) -> None:
    from vigil.testing.scripting import Reply

    old = await _with_heartbeat(rt)
    sent = len(fake_model.requests)
    fake_model.queue(Reply.text("slow heartbeat", delay=5))
    await rt.clock.advance(10 * MIN)
    await fake_model.wait_for_requests_async(sent + 1)
    outcome = await rt.conversation.send("/stop")
    await rt.settle()
    assert outcome.reply.text == "Stopped the answer. The conversation and its heartbeat go on."
    assert [e.cancelled for e in rt.ended() if e.kind == "heartbeat"] == [True]
    assert rt.session_id == old and not rt.store.get_session(old).is_ended
    heartbeat = rt.heartbeat(old)
    assert heartbeat is not None and heartbeat.active
    nothing = await rt.conversation.send("/stop")
    assert nothing.reply.text.startswith("Nothing is running: nothing to stop.")
    assert rt.session_id == old and rt.heartbeat(old) is not None


def _small_window() -> Settings:
    return Settings(agent=AgentSettings(compression_threshold=0.5), tools=ToolSettings(enabled=["read_file"]))


async def test_compression_moves_the_heartbeat_to_the_continuation(
    make_runtime: RuntimeFactory, fake_model: FakeModelServer
) -> None:
    rt = await make_runtime(settings=_small_window(), context_window=2000)
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply="## Goal\nKeep watching CI.\n## Progress\nSome.")
    await rt.send("hello")
    parent = await _with_heartbeat(rt)
    filler = "lorem ipsum dolor sit amet " * 7
    for i in range(12):
        await rt.send(f"turn {i}: {filler}")
        if rt.session_id != parent:
            break
    child = rt.session_id
    assert child != parent, "the conversation did not compress: this test checks nothing then"
    assert rt.store.get_session(child).parent_id == parent
    assert rt.heartbeat(parent) is None
    moved = rt.heartbeat(child)
    assert moved is not None and moved.prompt == "check"
    assert rt.scheduler.owns(child) and not rt.scheduler.owns(parent)
    await rt.advance(10 * MIN)
    [began] = rt.heartbeat_turns()
    assert began.session_id == child and rt.heartbeat(child).fire_count == 1
    assert rt.store.get_messages(child)[-2].content.startswith("[Heartbeat — recurring instruction")


async def test_a_compression_during_the_heartbeats_own_preparation_takes_the_fire_along(
    make_runtime: RuntimeFactory, fake_model: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = await make_runtime(settings=_small_window(), context_window=2000)
    for text in ("hello", "a short turn", "another short turn"):
        await rt.send(text)
    parent = await _with_heartbeat(rt)
    assert rt.store.get_session(parent).parent_id is None  # nothing compressed so far
    fake_model.rule(contains=SUMMARY_REQUEST_MARKER, reply="## Goal\nKeep watching CI.\n## Progress\nSome.")
    original_due = Compressor.due
    force: dict[str, bool] = {}

    def due(self: Compressor, session, estimate):  # type: ignore[no-untyped-def]
        return force.pop("once", False) or original_due(self, session, estimate)

    monkeypatch.setattr(Compressor, "due", due)
    force["once"] = True  # the next turn, the heartbeat's own, finds the budget exhausted
    await rt.advance(10 * MIN)
    child = rt.session_id
    assert child != parent and rt.store.get_session(child).parent_id == parent
    [began] = rt.heartbeat_turns()
    assert began.session_id == child  # confirmed in the continuation, where it runs
    moved = rt.heartbeat(child)
    assert rt.heartbeat(parent) is None
    assert moved.fire_count == 1 and moved.pending is None and moved.last_fire == rt.clock.now()
    assert rt.store.get_messages(child)[-2].content.startswith("[Heartbeat — recurring instruction")
    assert rt.scheduler.owns(child) and not rt.scheduler.owns(parent)
    await rt.advance(10 * MIN)  # and it keeps firing there
    assert len(rt.heartbeat_turns()) == 2 and rt.heartbeat(child).fire_count == 2
