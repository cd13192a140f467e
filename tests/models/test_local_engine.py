"""The cache claim on a real engine: SmolLM2-135M in vigil's in-process llama.cpp.

One engine serves the whole module (a model load costs a second; a cold prompt many); each
test gets its own profile, store and client. Prompts are kept short (few tools, a one-line
SOUL.md) and answers to a few tokens, so that a cold turn costs seconds on two cores.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import AsyncIterator, Callable, Iterator

import pytest

from tests.cli.helpers import run_cli
from tests.models.local_model import needs_local_model, smollm2_path
from vigil.agent.events import TextDelta, ToolFinished
from vigil.agent.turn import Agent
from vigil.config.settings import LocalModelSettings, ModelSettings, Settings, ToolSettings
from vigil.models.local_client import LocalClient, wrap_for_tools
from vigil.models.base import ChatMessage, ModelClient, ModelRequest
from vigil.models.local_engine import EngineOptions, LocalEngine, LocalModelError, start_engine
from vigil.profiles import Profile
from vigil.store import SQLiteStore

pytestmark = needs_local_model

CONTEXT = 4096


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    path = smollm2_path()
    assert path is not None
    running = start_engine(EngineOptions(path=path, threads=2, context=CONTEXT, slots=1))
    yield running
    running.close()


def _settings(path: Path, tools: list[str], answer_tokens: int = 12) -> Settings:
    model = ModelSettings(
        provider="local",
        path=str(path),
        local=LocalModelSettings(context=CONTEXT),
        max_output_tokens=answer_tokens,
        temperature=0.0,
        timeout=300,
    )
    return Settings(model=model, tools=ToolSettings(enabled=tools))


AgentFactory = Callable[..., Agent]


@pytest.fixture
async def make_agent(engine: LocalEngine, vigil_home: Path, tmp_path: Path) -> AsyncIterator[AgentFactory]:
    """Agents on the module's engine sharing one profile; few tools and short answers keep
    every cold turn cheap."""
    profile = Profile("default", vigil_home).ensure()
    profile.soul_path.write_text("You are Pip, a terse assistant.\n")
    store = SQLiteStore(profile.state_db)
    workdir = tmp_path / "work"
    workdir.mkdir()
    clients: list[ModelClient] = []

    def factory(tools: list[str] = [], answer_tokens: int = 4) -> Agent:
        settings = _settings(engine.options.path, tools=tools, answer_tokens=answer_tokens)
        client = wrap_for_tools(LocalClient(settings.model, engine, owns_engine=False), settings.model)
        clients.append(client)
        return Agent(store=store, client=client, profile=profile, settings=settings, cwd=workdir)

    yield factory
    for client in clients:
        await client.aclose()
    store.close()


@pytest.fixture
def agent(make_agent: AgentFactory) -> Agent:
    return make_agent()


def _token_count(engine: LocalEngine, text: str) -> int:
    root = engine.base_url.removesuffix("/v1")
    body = json.dumps({"content": text}).encode()
    headers = {"content-type": "application/json", "Authorization": f"Bearer {engine.api_key}"}
    request = urllib.request.Request(f"{root}/tokenize", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return len(json.loads(response.read())["tokens"])


def _stored_prompt(agent: Agent, session_id: str) -> str:
    record = agent.store.get_session(session_id)
    assert record.system_prompt_hash
    prompt = agent.store.get_prompt(record.system_prompt_hash)
    assert prompt
    return prompt


async def test_turns_hit_the_cache_and_a_refresh_misses_exactly_once(agent: Agent, engine: LocalEngine) -> None:
    session = await agent.new_session()
    first = await agent.run_turn(session.id, "Say hi.", stream=False)
    assert first.answer.strip()

    prompt_tokens = _token_count(engine, _stored_prompt(agent, session.id))
    second = await agent.run_turn(session.id, "Again.", stream=True)
    assert second.answer.strip()
    assert second.usage.cache_read_tokens >= prompt_tokens > 20

    agent.profile.soul_path.write_text("You are Pop, a cheerful assistant.\n")
    result = run_cli("sessions", "refresh-prompts")
    assert result.exit_code == 0, result.output
    refreshed = await agent.run_turn(session.id, "Once more.", stream=False)
    assert "Pop" in _stored_prompt(agent, session.id)
    assert refreshed.usage.cache_read_tokens < prompt_tokens  # the one miss: the prompt changed
    after = await agent.run_turn(session.id, "And again.", stream=False)
    assert after.usage.cache_read_tokens >= _token_count(engine, _stored_prompt(agent, session.id))


async def test_a_tool_call_the_model_writes_as_text_runs_the_tool(make_agent: AgentFactory, engine: LocalEngine) -> None:
    agent = make_agent(tools=["skills_list"], answer_tokens=30)
    assert not engine.native_tool_calls  # SmolLM2's template: tools exist only in the prompt
    # A 135M model copies what it has seen: one example in the persona is enough.
    agent.profile.soul_path.write_text(
        'You are Pip. Example of a conversation:\nuser: list your skills\nassistant: <tool_call>\n'
        '{"name": "skills_list", "arguments": {}}\n</tool_call>\n'
    )
    session = await agent.new_session()
    finished: list[str] = []
    shown: list[str] = []

    def on_event(event: object) -> None:
        if isinstance(event, ToolFinished):
            finished.append(event.name)
        elif isinstance(event, TextDelta):
            shown.append(event.text)

    result = await agent.run_turn(
        session.id,
        'Answer with only this JSON: {"name": "skills_list", "arguments": {}}',
        on_event=on_event,
    )
    assert finished[:1] == ["skills_list"]
    assert result.tool_calls >= 1
    assert '"name"' not in "".join(shown)


async def test_a_request_beyond_the_context_gets_a_clear_message(engine: LocalEngine) -> None:
    settings = _settings(engine.options.path, tools=[])
    client = LocalClient(settings.model, engine, owns_engine=False)
    request = ModelRequest(system="You are Pip.", messages=[ChatMessage("user", "word " * (CONTEXT + 500))])
    try:
        with pytest.raises(LocalModelError, match="no longer fits the local engine's context of 4,096 tokens"):
            await client.complete(request)
    finally:
        await client.aclose()


async def test_a_model_without_tool_calls_says_so_and_pins_no_tools(
    engine: LocalEngine, vigil_home: Path, tmp_path: Path
) -> None:
    settings = _settings(engine.options.path, tools=["skills_list"])
    settings = settings.copy_with(update={"model": settings.model.copy_with(update={"text_tool_calls": "off"})})
    client = wrap_for_tools(LocalClient(settings.model, engine, owns_engine=False), settings.model)
    assert "run without tools" in (client.notice or "")
    profile = Profile("default", vigil_home).ensure()
    store = SQLiteStore(profile.state_db)
    try:
        agent = Agent(store=store, client=client, profile=profile, settings=settings, cwd=tmp_path)
        session = await agent.new_session()
        assert tuple(store.get_session(session.id).tool_names) == ()
    finally:
        await client.aclose()
        store.close()


async def test_a_restart_and_a_compression_each_miss_once(agent: Agent, engine: LocalEngine) -> None:
    agent.profile.soul_path.write_text("You are Kip, a calm assistant.\n")
    session = await agent.new_session()
    await agent.run_turn(session.id, "Hello.", stream=False)
    stored = _stored_prompt(agent, session.id)

    # vigil and the engine restart: the stored prompt is replayed, the first request warms the cache
    restarted = start_engine(engine.options)
    client = wrap_for_tools(LocalClient(agent.settings.model, restarted), agent.settings.model)
    later = Agent(store=agent.store, client=client, profile=agent.profile, settings=agent.settings, cwd=agent.cwd)
    try:
        warming = await later.run_turn(session.id, "Are you there?", stream=False)
        assert warming.usage.cache_read_tokens < _token_count(restarted, stored)
        hit = await later.run_turn(session.id, "Still there?", stream=False)
        assert _stored_prompt(later, session.id) == stored
        assert hit.usage.cache_read_tokens >= _token_count(restarted, stored)

        compressed = await later.compress(session.id)
        assert compressed.ok and compressed.child_id
        first = await later.run_turn(compressed.child_id, "Go on.", stream=False)
        assert first.usage.input_tokens > 20  # the summary is new to the engine: a miss
        second = await later.run_turn(compressed.child_id, "More.", stream=False)
        assert second.usage.cache_read_tokens >= first.usage.input_tokens + first.usage.cache_read_tokens
    finally:
        await client.aclose()


def test_the_engine_answers_only_requests_carrying_its_key(engine: LocalEngine) -> None:
    models = urllib.request.Request(engine.base_url + "/models")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(models, timeout=10)
    assert refused.value.code == 401
    models.add_header("Authorization", f"Bearer {engine.api_key}")
    with urllib.request.urlopen(models, timeout=10) as response:
        assert response.status == 200
