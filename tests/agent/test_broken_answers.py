"""Answers that break: cut off mid-stream, cancelled, malformed, or with repeated tool-call ids.
Each must leave a stored history the next turn can send (the fake enforces the pairing rules)."""

from __future__ import annotations

import asyncio

import pytest

from tests.agent.conftest import AgentFactory
from vigil.agent.events import TextDelta, TurnEvent
from vigil.agent.history import unique_call_ids
from vigil.models.base import ModelMalformedResponse, ModelStreamInterrupted
from vigil.store.records import ToolCall
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec


def _ignore(_event: TurnEvent) -> None:
    return None


def test_unique_call_ids_suffixes_repeats_deterministically() -> None:
    calls = [ToolCall("a", "f", "{}"), ToolCall("a", "g", "{}"), ToolCall("a_2", "h", "{}"), ToolCall("", "k", "{}")]
    unique = unique_call_ids(calls)
    assert [c.id for c in unique] == ["a", "a_3", "a_2", "call_3"]
    assert [c.name for c in unique] == ["f", "g", "h", "k"]
    assert unique_call_ids(calls) == unique
    distinct = (ToolCall("x", "f", "{}"), ToolCall("y", "f", "{}"))
    assert unique_call_ids(distinct) == distinct


async def test_repeated_tool_call_ids_get_one_result_each_over_two_turns(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    fake_model.queue(
        Reply.tool_calls(
            ToolCallSpec("write_file", {"path": "one.txt", "content": "1"}, id="dup"),
            ToolCallSpec("write_file", {"path": "two.txt", "content": "2"}, id="dup"),
        ),
        Reply.text("Wrote both."),
        Reply.text("Still fine."),
    )
    session = await agent.new_session()
    assert (await agent.run_turn(session.id, "write two files", on_event=_ignore)).answer == "Wrote both."
    assert (await agent.run_turn(session.id, "and now?", on_event=_ignore)).answer == "Still fine."
    assert [r.status for r in fake_model.requests] == [200, 200, 200]
    assert (agent.cwd / "one.txt").read_text() == "1" and (agent.cwd / "two.txt").read_text() == "2"
    messages = agent.store.get_messages(session.id)
    calls = [c.id for m in messages for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if m.role == "tool"]
    assert calls == ["dup", "dup_2"] and results == ["dup", "dup_2"]
    # a fresh process (history rebuilt from the store) sends both pairs too
    restarted = await make_agent()
    fake_model.queue("After a restart.")
    assert (await restarted.run_turn(session.id, "third")).answer == "After a restart."
    assert fake_model.last_request.status == 200 and str(fake_model.last_request.body).count("dup_2") == 2


async def test_a_dropped_stream_keeps_the_partial_answer_marked_cut_off(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    fake_model.queue(Reply.disconnect_after(3, text=["The answer ", "is long ", "and ", "never ends"]))
    session = await agent.new_session()
    with pytest.raises(ModelStreamInterrupted):
        await agent.run_turn(session.id, "tell me", on_event=_ignore)
    messages = agent.store.get_messages(session.id)
    assert [m.role for m in messages] == ["user", "assistant"]
    kept = messages[1]
    assert kept.content.startswith("The answer is long and\n\n[cut off: the connection")
    assert kept.meta["stop_reason"] == "interrupted"
    fake_model.queue("Sorry, here it is again.")
    assert (await agent.run_turn(session.id, "go on", on_event=_ignore)).answer == "Sorry, here it is again."
    assert fake_model.last_request.status == 200 and "The answer is long and" in str(fake_model.last_request.body)


async def test_a_turn_cancelled_while_streaming_keeps_what_arrived(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    # two deltas, then a long silence (the drop after it never comes: the turn is cancelled first)
    fake_model.queue(Reply.disconnect_after(2, text=["First ", "part ", "never sent"], hang=60))
    session = await agent.new_session()
    arrived = asyncio.Event()

    def on_event(event: TurnEvent) -> None:
        if isinstance(event, TextDelta) and event.text == "part ":
            arrived.set()

    task = asyncio.ensure_future(agent.run_turn(session.id, "speak slowly", on_event=on_event))
    await asyncio.wait_for(arrived.wait(), 20)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    messages = agent.store.get_messages(session.id)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[1].content.startswith("First part\n\n[cut off: the turn was interrupted")
    fake_model.queue("Next.")
    assert (await agent.run_turn(session.id, "next", on_event=_ignore)).answer == "Next."
    assert fake_model.last_request.status == 200


async def test_a_turn_cancelled_before_any_text_stores_no_empty_answer(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    fake_model.queue(Reply.text("too late", delay=30))
    session = await agent.new_session()
    task = asyncio.ensure_future(agent.run_turn(session.id, "wait", on_event=_ignore))
    await fake_model.wait_for_requests_async(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [m.role for m in agent.store.get_messages(session.id)] == ["user"]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_malformed_answers_fail_the_turn_cleanly_and_the_session_goes_on(
    make_agent: AgentFactory, fake_model: FakeModelServer, stream: bool
) -> None:
    agent = await make_agent()
    fake_model.set_default_reply(Reply.raw(200, "<html><body>Welcome to nginx!</body></html>"))
    session = await agent.new_session()
    with pytest.raises(ModelMalformedResponse, match="not an (OpenAI-compatible|Anthropic Messages API) response"):
        await agent.run_turn(session.id, "first", on_event=_ignore if stream else None)
    assert len(fake_model.requests) == 4  # retried like a 5xx
    assert [m.role for m in agent.store.get_messages(session.id)] == ["user"]

    fake_model.set_default_reply("ok")
    fake_model.queue(Reply.garbled(1, text=["Half ", "an answer"]))
    with pytest.raises(ModelStreamInterrupted):
        await agent.run_turn(session.id, "second", on_event=_ignore)
    fake_model.queue("Back to normal.")
    assert (await agent.run_turn(session.id, "third", on_event=_ignore if stream else None)).answer == "Back to normal."
    assert fake_model.last_request.status == 200
    contents = [m.content for m in agent.store.get_messages(session.id)]
    assert contents[:3] == ["first", "second", "Half\n\n[cut off: the connection to the model broke before this answer was complete]"]
