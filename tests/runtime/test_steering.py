"""``/steer TEXT``: guidance sent while a turn runs reaches the model's next call — after the
tool call in flight, before the turn's answer — as a stored user message appended to the
history (the request's earlier bytes unchanged); guidance the turn does not reach is answered
next as an ordinary message; with nothing running it is an ordinary message."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.runtime.conftest import Runtime
from vigil.agent.events import ToolStarted
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec
from vigil.testing.waiting import eventually

WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.02; done; echo built"
"""A tool call that stays in flight until the test lets it finish (it creates ``go``)."""


def _messages(request: object) -> list[dict[str, object]]:
    return list(request.body["messages"])  # type: ignore[attr-defined]


async def _tool_in_flight(rt: Runtime) -> None:
    await eventually(lambda: any(isinstance(e, ToolStarted) for e in rt.events), what="the tool call running")


async def test_guidance_reaches_the_next_model_call_after_the_tool_call_in_flight(
    rt: Runtime, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": WAIT_FOR_GO})), "built it, in French")
    asked = len(fake_model.requests)
    turn = rt.conversation.submit("build the project")
    await _tool_in_flight(rt)
    steered = rt.conversation.submit("/steer answer in French")
    assert not steered.done()  # answered once it is stored, not queued behind the turn
    (tmp_path / "work" / "go").touch()
    assert (await turn).result.answer == "built it, in French"  # type: ignore[union-attr]
    reply = (await steered).reply
    assert reply is not None and "answer in French" in reply.text and not reply.is_error

    first, second = fake_model.requests[asked:]
    before, after = _messages(first), _messages(second)
    assert after[: len(before)] == before  # appended, never inserted: the cached prefix holds
    added = after[len(before):]
    assert [m["role"] for m in added] == ["assistant", "tool", "user"]
    assert "built" in json.dumps(added[1]) and added[2]["content"] == "answer in French"
    stored = [m for m in rt.store.get_messages(rt.session_id) if m.role == "user"]
    assert [m.content for m in stored][-2:] == ["build the project", "answer in French"]
    assert stored[-1].meta.get("steer") is True


async def test_guidance_the_turn_does_not_reach_is_answered_next_as_a_message(
    rt: Runtime, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": WAIT_FOR_GO})), "done", "noted")
    turn = rt.conversation.submit("build the project")
    await _tool_in_flight(rt)
    rt.conversation.interrupt()  # the turn ends before its next model call
    steered = rt.conversation.submit("/steer and then deploy")
    (tmp_path / "work" / "go").touch()
    await turn
    outcome = await asyncio.wait_for(steered, 20)
    assert outcome.result is not None and outcome.result.answer in ("done", "noted")
    users = [m.content for m in rt.store.get_messages(rt.session_id) if m.role == "user"]
    assert users[-1] == "and then deploy"


async def test_with_nothing_running_guidance_is_an_ordinary_message_and_bare_steer_says_how(
    rt: Runtime, fake_model: FakeModelServer
) -> None:
    fake_model.queue("sure")
    outcome = await rt.send("/steer keep it short")
    assert outcome.result is not None and outcome.result.answer == "sure"
    assert fake_model.requests[-1].last_user_text == "keep it short"
    usage = await rt.command("/steer")
    assert usage.startswith("Usage: /steer TEXT")


async def test_queue_lists_what_waits_and_drop_and_clear_withdraw_it_without_losing_it(
    rt: Runtime, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.queue(Reply.tool_calls(ToolCallSpec("terminal", {"command": WAIT_FOR_GO})), "built", "tested")
    turn = rt.conversation.submit("build the project")
    await _tool_in_flight(rt)
    second = rt.conversation.submit("run the tests")
    third = rt.conversation.submit("deploy to production")
    fourth = rt.conversation.submit("tell me a joke")
    listed = (await rt.conversation.submit("/queue")).reply
    assert listed is not None and listed.text.splitlines()[1:4] == [
        "1. run the tests", "2. deploy to production", "3. tell me a joke"]
    dropped = (await rt.conversation.submit("/queue drop 2")).reply
    assert dropped is not None and "deploy to production" in dropped.text
    assert (await third).withdrawn
    refused = (await rt.conversation.submit("/queue drop 7")).reply
    assert refused is not None and refused.is_error and "no message 7" in refused.text
    cleared = (await rt.conversation.submit("/queue clear")).reply
    assert cleared is not None and "tell me a joke" in cleared.text and "run the tests" in cleared.text
    assert (await second).withdrawn and (await fourth).withdrawn
    (tmp_path / "work" / "go").touch()
    assert (await turn).result.answer == "built"  # type: ignore[union-attr]
    users = [m.content for m in rt.store.get_messages(rt.session_id) if m.role == "user"]
    assert "deploy to production" not in users and users[-1] == "build the project"
    assert (await rt.command("/queue")) == "Nothing waits."
