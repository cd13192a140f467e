"""An agent wired to a real SQLite store and a real model client talking to the fake server."""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable

import pytest

from vigil.agent.turn import Agent
from vigil.config.settings import ModelSettings, Settings
from vigil.models.factory import build_client
from vigil.models.retry import RetryPolicy
from vigil.profiles import Profile
from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer

AgentFactory = Callable[..., Awaitable[Agent]]


async def _no_sleep(_seconds: float) -> None:
    return None


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> str:
    """Both API styles: every agent test runs against each."""
    return request.param


def model_settings(server: FakeModelServer, provider: str, **overrides: object) -> ModelSettings:
    base = server.base_url if provider == "openai" else server.anthropic_base_url
    values: dict[str, object] = {
        "provider": provider,
        "name": "fake-model",
        "base_url": base,
        "api_key": server.api_key,
        "timeout": 10,
    }
    values.update(overrides)
    return ModelSettings.from_data(values)


@pytest.fixture
def profile(vigil_home: Path) -> Profile:
    """The default profile of the test's $VIGIL_HOME, so `vigil` commands see the same data."""
    return Profile("default", vigil_home).ensure()


@pytest.fixture
async def make_agent(
    fake_model: FakeModelServer, provider: str, profile: Profile, tmp_path: Path
) -> AsyncIterator[AgentFactory]:
    """Build agents sharing one state.db; each gets its own client (closed at the end)."""
    store = SQLiteStore(profile.state_db)
    agents: list[Agent] = []
    workdir = tmp_path / "work"
    workdir.mkdir()

    async def factory(*, settings: Settings | None = None, **model_overrides: object) -> Agent:
        settings = settings or Settings()
        settings = settings.copy_with(
            update={"model": model_settings(fake_model, provider, **model_overrides)}
        )
        client = await build_client(settings.model, {}, retry=RetryPolicy(max_retries=3, sleep=_no_sleep))
        agent = Agent(store=store, client=client, profile=profile, settings=settings, cwd=workdir)
        agents.append(agent)
        return agent

    yield factory
    for agent in agents:
        await agent.client.aclose()
    store.close()
