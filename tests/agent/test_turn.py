"""Full agent turns over real HTTP against the fake model, for both API styles."""

from __future__ import annotations

import asyncio

import pytest

from tests.agent.conftest import AgentFactory
from vigil.agent.events import TextDelta, ToolFinished, TurnEvent
from vigil.config.settings import AgentSettings, Settings
from vigil.models.base import ModelAuthError, ModelStreamInterrupted
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec


async def test_plain_turn_streams_and_stores_everything(make_agent: AgentFactory, fake_model: FakeModelServer) -> None:
    agent = await make_agent()
    fake_model.queue(Reply.text("Hello there, friend."))
    session = await agent.new_session()
    deltas: list[str] = []

    def on_event(event: TurnEvent) -> None:
        if isinstance(event, TextDelta):
            deltas.append(event.text)

    result = await agent.run_turn(session.id, "hi", on_event=on_event)
    assert result.answer == "Hello there, friend." and result.stop == "answered"
    assert "".join(deltas) == "Hello there, friend." and len(deltas) > 1
    messages = agent.store.get_messages(session.id)
    assert [(m.role, m.content) for m in messages] == [("user", "hi"), ("assistant", "Hello there, friend.")]
    assert messages[1].usage.prompt_tokens > 0 and messages[1].usage.output_tokens > 0
    stored = agent.store.get_session(session.id)
    assert stored.title == "hi" and stored.system_prompt_hash is not None
    assert fake_model.last_request.body.get("stream") is True


async def test_two_tool_calls_and_a_tool_error_in_one_turn(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    fake_model.queue(
        Reply.tool_calls(
            ToolCallSpec("write_file", {"path": "notes.txt", "content": "alpha\n"}, id="call_w"),
            ToolCallSpec("read_file", {"path": "missing.txt"}, id="call_r"),
        ),
        Reply.text("Wrote notes.txt; missing.txt does not exist."),
    )
    session = await agent.new_session()
    finished: list[ToolFinished] = []
    result = await agent.run_turn(session.id, "do it", on_event=lambda e: finished.append(e) if isinstance(e, ToolFinished) else None)
    assert result.answer.startswith("Wrote notes.txt") and result.tool_calls == 2
    assert (agent.cwd / "notes.txt").read_text() == "alpha\n"
    assert [f.is_error for f in finished] == [False, True]
    roles = [m.role for m in agent.store.get_messages(session.id)]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    # the second model call carried both tool results back
    second = fake_model.requests[-1]
    assert "missing.txt" in str(second.body) and "call_w" in str(second.body)


async def test_iteration_budget_stops_a_runaway_loop(make_agent: AgentFactory, fake_model: FakeModelServer) -> None:
    settings = Settings(agent=AgentSettings(max_iterations=3))
    agent = await make_agent(settings=settings)
    fake_model.set_default_reply(Reply.tool_calls(ToolCallSpec("skills_list", {})))
    session = await agent.new_session()
    result = await agent.run_turn(session.id, "loop forever")
    assert result.stop == "iteration_budget" and "iteration budget of 3" in result.answer
    assert len(fake_model.requests) == 3
    # the history stays valid: a following turn is accepted and answered
    fake_model.set_default_reply("ok, stopping")
    assert (await agent.run_turn(session.id, "stop now")).answer == "ok, stopping"


async def test_429_then_success(make_agent: AgentFactory, fake_model: FakeModelServer) -> None:
    agent = await make_agent()
    fake_model.queue(Reply.error(429, "slow down"), Reply.text("made it"))
    session = await agent.new_session()
    result = await agent.run_turn(session.id, "hello")
    assert result.answer == "made it"
    assert [r.status for r in fake_model.requests] == [429, 200]
    assert [m.role for m in agent.store.get_messages(session.id)] == ["user", "assistant"]


async def test_401_is_a_clear_error_and_the_session_survives(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    bad = await make_agent(api_key="wrong-key")
    session = await bad.new_session()
    with pytest.raises(ModelAuthError) as caught:
        await bad.run_turn(session.id, "first question")
    assert "wrong-key" not in str(caught.value)
    assert "rejected" in str(caught.value).lower() or "401" in str(caught.value)
    assert [m.content for m in bad.store.get_messages(session.id)] == ["first question"]

    good = await make_agent()
    fake_model.queue("answer after fixing the key")
    result = await good.run_turn(session.id, "second question")
    assert result.answer == "answer after fixing the key"
    contents = [m.content for m in good.store.get_messages(session.id)]
    assert contents == ["first question", "second question", "answer after fixing the key"]


async def test_server_vanishing_mid_stream_keeps_every_complete_message(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    fake_model.queue(
        Reply.tool_calls(ToolCallSpec("write_file", {"path": "a.txt", "content": "x"}, id="call_1")),
        Reply.disconnect_after(2, text="partial answer that never finishes"),
    )
    session = await agent.new_session()
    with pytest.raises(ModelStreamInterrupted):
        await agent.run_turn(session.id, "write a.txt", on_event=lambda e: None)
    messages = agent.store.get_messages(session.id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[-1].content.startswith("partial answer\n\n[cut off:")
    fake_model.queue("recovered")
    assert (await agent.run_turn(session.id, "again")).answer == "recovered"


async def test_next_turn_request_starts_with_the_previous_request(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    session = await agent.new_session()
    for text in ("one", "two", "three"):
        fake_model.queue(f"answer {text}")
        await agent.run_turn(session.id, text)
    first, second, third = fake_model.requests
    assert not first.full_prefix_hit
    assert second.full_prefix_hit and third.full_prefix_hit
    assert second.segments[: len(first.segments)] == first.segments
    assert third.cached_tokens >= second.prompt_tokens - second.cache_write_tokens - second.input_tokens


async def test_history_and_prompt_replayed_after_restart(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    agent = await make_agent()
    session = await agent.new_session()
    fake_model.queue("first answer")
    await agent.run_turn(session.id, "first")
    (agent.profile.soul_path).write_text("A completely different persona.")
    restarted = await make_agent()
    fake_model.queue("second answer")
    await restarted.run_turn(session.id, "second")
    first, second = fake_model.requests
    assert second.full_prefix_hit
    assert "completely different persona" not in str(second.body)


async def test_a_turn_stopped_between_call_and_result_leaves_a_valid_history(
    make_agent: AgentFactory, fake_model: FakeModelServer
) -> None:
    """A front end whose event callback fails (a dropped websocket, say) or a Ctrl-C right
    after the model asked for tools must not poison the next turn in the same process."""
    from vigil.agent.events import AssistantStep, ToolStarted

    agent = await make_agent()
    session = await agent.new_session()

    class Gone(Exception):
        pass

    def failing(event: TurnEvent) -> None:
        if isinstance(event, ToolStarted):
            raise Gone()

    fake_model.queue(Reply.tool_calls(ToolCallSpec("skills_list", {}, id="call_a"), ToolCallSpec("skills_list", {}, id="call_b")))
    with pytest.raises(Gone):
        await agent.run_turn(session.id, "first", on_event=failing)
    fake_model.queue("fine again")
    assert (await agent.run_turn(session.id, "second")).answer == "fine again"

    blocker = asyncio.Event()

    async def stalls(event: TurnEvent) -> None:
        if isinstance(event, AssistantStep) and event.tool_call_count:
            await blocker.wait()

    fake_model.queue(Reply.tool_calls(ToolCallSpec("skills_list", {}, id="call_c")))
    task = asyncio.ensure_future(agent.run_turn(session.id, "third", on_event=stalls))
    await fake_model.wait_for_requests_async(3)
    for _ in range(50):
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    fake_model.queue("still fine")
    assert (await agent.run_turn(session.id, "fourth")).answer == "still fine"
    assert fake_model.last_request.status == 200
    tool_results = [m for m in agent.store.get_messages(session.id) if m.role == "tool"]
    assert {m.tool_call_id for m in tool_results} == {"call_a", "call_b", "call_c"}


async def test_empty_messages_are_refused_before_anything_is_stored(make_agent: AgentFactory) -> None:
    from vigil.agent.turn import EmptyMessage

    agent = await make_agent()
    session = await agent.new_session()
    with pytest.raises(EmptyMessage):
        await agent.run_turn(session.id, "  \n ")
    assert agent.store.get_messages(session.id) == []


async def test_a_declined_turn_stores_nothing(make_agent: AgentFactory, fake_model: FakeModelServer) -> None:
    from vigil.agent.turn import TurnDeclined

    agent = await make_agent()
    session = await agent.new_session()
    seen: list[str] = []

    async def decline(session_id: str) -> bool:
        seen.append(session_id)
        return False

    with pytest.raises(TurnDeclined):
        await agent.run_turn(session.id, "scheduled message", before_execution=decline)
    assert seen == [session.id]
    assert agent.store.get_messages(session.id) == [] and fake_model.requests == []

    async def accept(session_id: str) -> bool:
        return True

    fake_model.queue("ran")
    assert (await agent.run_turn(session.id, "scheduled message", before_execution=accept)).answer == "ran"
