"""Helpers for driving the real clients against the fake model server."""

from __future__ import annotations

import socket
from typing import Any, AsyncIterator, Callable

import pytest

from vigil.config.settings import ModelSettings
from vigil.models.anthropic_client import AnthropicClient
from vigil.models.base import ModelClient
from vigil.models.openai_client import OpenAIClient
from vigil.models.retry import RetryPolicy
from vigil.testing import FakeModelServer


class RecordedSleeps:
    """A stand-in for ``asyncio.sleep`` that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleeps() -> RecordedSleeps:
    return RecordedSleeps()


ClientFactory = Callable[..., ModelClient]


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def make_client(
    provider: str, fake_model: FakeModelServer, sleeps: RecordedSleeps
) -> AsyncIterator[ClientFactory]:
    """Build a client of the test's provider aimed at the fake model (or at ``base_url``)."""
    made: list[ModelClient] = []

    def build(
        *, api_key: str | None = None, base_url: str | None = None, max_retries: int = 3, **settings: Any
    ) -> ModelClient:
        config = ModelSettings(max_retries=max_retries, **settings)
        retry = RetryPolicy(max_retries=max_retries, sleep=sleeps)
        kwargs: dict[str, Any] = {
            "model": "fake-model",
            "api_key": api_key or fake_model.api_key,
            "retry": retry,
        }
        client: ModelClient
        if provider == "openai":
            kwargs["key_source"] = "the environment variable OPENAI_API_KEY"
            client = OpenAIClient(config, base_url=base_url or fake_model.base_url, **kwargs)
        else:
            kwargs["key_source"] = "the environment variable ANTHROPIC_API_KEY"
            client = AnthropicClient(config, base_url=base_url or fake_model.anthropic_base_url, **kwargs)
        made.append(client)
        return client

    yield build
    for client in made:
        await client.aclose()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
