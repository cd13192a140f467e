"""Tool calls a model writes as text become real tool calls, and never reach the screen raw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.agent.conftest import model_settings
from vigil.agent.events import TextDelta, ToolFinished, TurnEvent
from vigil.agent.turn import Agent
from vigil.config.settings import Settings
from vigil.models.factory import build_client
from vigil.models.text_tool_client import TextToolCallClient
from vigil.models.text_tools import TextCallFilter, parse_text_tool_calls
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer

NAMES = ("terminal", "read_file", "skills_list")

json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
arguments = st.dictionaries(st.text(max_size=10), json_values, max_size=4)
prose = st.text(alphabet=st.characters(blacklist_characters="<{[`"), max_size=40)


def _chunks(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in zip(points, points[1:])]


@st.composite
def written_calls(draw: st.DrawFn) -> tuple[str, list[tuple[str, dict]], str]:
    """An answer holding tool calls as text, the calls it holds, and the prose around them."""
    calls = draw(st.lists(st.tuples(st.sampled_from(NAMES), arguments), min_size=1, max_size=3))
    key = draw(st.sampled_from(["arguments", "parameters"]))
    objects = [{"name": name, key: args} for name, args in calls]
    style = draw(st.sampled_from(["bare", "list", "fenced", "tagged", "tagged list"]))
    before = ""
    if style == "bare" and len(objects) == 1:
        text = json.dumps(objects[0])
    elif style in ("bare", "list"):
        text = json.dumps(objects, indent=draw(st.sampled_from([None, 2])))
    elif style == "fenced":
        text = "```json\n" + json.dumps(objects if len(objects) > 1 else objects[0]) + "\n```"
    elif style == "tagged":
        before = draw(prose)
        text = before + "".join(f"<tool_call>\n{json.dumps(o)}\n</tool_call>" for o in objects)
    else:
        before = draw(prose)
        text = f"{before}<tool_call>{json.dumps(objects)}</tool_call>"
    return text, calls, before.strip()


@given(written_calls(), st.lists(st.integers(0, 10_000), max_size=12))
def test_every_written_form_parses_and_streams_without_showing_the_call(
    case: tuple[str, list[tuple[str, dict]], str], cuts: list[int]
) -> None:
    text, calls, before = case
    parsed = parse_text_tool_calls(text, NAMES)
    assert parsed is not None
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == calls
    assert parsed.content == (before or None)

    shown = TextCallFilter(NAMES)
    out = "".join(shown.feed(piece) for piece in _chunks(text, cuts))
    rest, streamed = shown.finish()
    assert streamed == parsed
    assert rest == "" and out.strip() == before
    assert "<tool_call>" not in out and '"name"' not in out


@given(st.text(max_size=200), st.lists(st.integers(0, 10_000), max_size=12))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_ordinary_answers_stream_through_unchanged(text: str, cuts: list[int]) -> None:
    if parse_text_tool_calls(text, NAMES) is not None:
        return  # hypothesis wrote a tool call; covered above
    shown = TextCallFilter(NAMES)
    out = "".join(shown.feed(piece) for piece in _chunks(text, cuts))
    rest, parsed = shown.finish()
    assert parsed is None and out + rest == text


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "unknown_tool", "arguments": {}}',  # bare JSON naming no offered tool is an answer
        '{"name": "terminal", "arguments": {}, "confidence": 3}',
        '{"result": 42}',
        "[1, 2, 3]",
        '<tool_call>{"name": "terminal", "arguments": [1]}</tool_call>',
        "<tool_call>not json</tool_call>",
    ],
)
def test_json_that_is_not_a_call_is_an_answer(text: str) -> None:
    assert parse_text_tool_calls(text, NAMES) is None


@pytest.fixture
async def agent(fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path) -> AsyncIterator[Agent]:
    profile = Profile("default", vigil_home).ensure()
    settings = Settings().copy_with(update={"model": model_settings(fake_model, "openai", text_tool_calls="on")})
    client = await build_client(settings.model, {})
    assert isinstance(client, TextToolCallClient)
    store = SQLiteStore(profile.state_db)
    (tmp_path / "work").mkdir()
    made = Agent(store=store, client=client, profile=profile, settings=settings, cwd=tmp_path / "work")
    yield made
    await client.aclose()
    store.close()


async def test_a_text_call_from_the_model_runs_the_tool(agent: Agent, fake_model: FakeModelServer) -> None:
    fake_model.queue('{"name": "skills_list", "arguments": {}}', "There are no skills yet.")
    events: list[TurnEvent] = []
    session = await agent.new_session()
    result = await agent.run_turn(session.id, "which skills do you have?", on_event=events.append)
    assert result.answer == "There are no skills yet." and result.tool_calls == 1
    assert [e.name for e in events if isinstance(e, ToolFinished)] == ["skills_list"]
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert shown == "There are no skills yet."
    stored = agent.store.get_messages(session.id)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].tool_calls[0].name == "skills_list" and not stored[1].content


async def test_a_dangerous_text_call_still_asks_for_approval(
    agent: Agent, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    ran = tmp_path / "work" / "ran"
    asked: list[str] = []

    async def refuse(tool: str, description: str) -> bool:
        asked.append(tool)
        return False

    agent.approve = refuse
    command = f"mkfs.ext4 /nonexistent/vigil-device; touch {ran}"
    call = json.dumps({"name": "terminal", "arguments": {"command": command}})
    fake_model.queue(f"Deleting it.\n<tool_call>\n{call}\n</tool_call>", "I did not delete it.")
    events: list[TurnEvent] = []
    session = await agent.new_session()
    await agent.run_turn(session.id, "format the disk", on_event=events.append)
    assert asked == ["terminal"] and not ran.exists()
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "<tool_call>" not in shown and "mkfs" not in shown
