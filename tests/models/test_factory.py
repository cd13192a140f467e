"""``build_client`` against the fake model server, configured through the environment and config."""

from __future__ import annotations

import os

import pytest

from vigil.config.settings import ModelSettings
from vigil.models import ModelAuthError, ModelNotConfigured, RetryPolicy, build_client
from vigil.models.base import ChatMessage, ModelRequest
from vigil.testing import FakeModelServer, Reply

from .conftest import RecordedSleeps

HELLO = ModelRequest(system="be brief", messages=[ChatMessage("user", "hello")])


async def test_environment_only_picks_openai_and_the_first_listed_model(fake_model: FakeModelServer) -> None:
    env = {"OPENAI_BASE_URL": fake_model.base_url, "OPENAI_API_KEY": fake_model.api_key}
    client = await build_client(ModelSettings(), env=env)
    try:
        assert client.provider == "openai"
        assert client.model == fake_model.models[0]
        fake_model.queue(Reply.text("hi from the fake"))
        assert (await client.complete(HELLO)).content == "hi from the fake"
        assert fake_model.last_request is not None and fake_model.last_request.model == fake_model.models[0]
    finally:
        await client.aclose()


async def test_defaults_to_os_environ(fake_model_env: FakeModelServer) -> None:
    client = await build_client(ModelSettings())
    try:
        assert (client.provider, client.model) == ("openai", fake_model_env.models[0])
    finally:
        await client.aclose()


async def test_vigil_model_wins_over_the_listing(
    fake_model_env: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIGIL_MODEL", "chosen-by-env")
    client = await build_client(ModelSettings(), env=os.environ)
    try:
        assert client.model == "chosen-by-env"
        await client.complete(HELLO)
        record = fake_model_env.last_request
        assert record is not None and record.model == "chosen-by-env"
    finally:
        await client.aclose()


async def test_config_wins_over_environment(
    fake_model_env: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIGIL_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # would fail if used
    settings = ModelSettings(
        provider="anthropic",
        name="config-model",
        base_url=fake_model_env.anthropic_base_url,
        api_key=fake_model_env.api_key,
    )
    client = await build_client(settings, env=os.environ)
    try:
        assert (client.provider, client.model) == ("anthropic", "config-model")
        fake_model_env.queue(Reply.text("anthropic says hi"))
        assert (await client.complete(HELLO)).content == "anthropic says hi"
        record = fake_model_env.last_request
        assert record is not None and (record.api, record.model) == ("anthropic", "config-model")
    finally:
        await client.aclose()


async def test_anthropic_from_its_environment_variables(fake_model: FakeModelServer) -> None:
    env = {
        "ANTHROPIC_BASE_URL": fake_model.anthropic_base_url,
        "ANTHROPIC_API_KEY": fake_model.api_key,
        "VIGIL_MODEL": "claude-fake",
    }
    client = await build_client(ModelSettings(), env=env)
    try:
        assert (client.provider, client.model) == ("anthropic", "claude-fake")
        await client.complete(HELLO)
        assert fake_model.last_request is not None and fake_model.last_request.api == "anthropic"
    finally:
        await client.aclose()


async def test_wrong_key_names_where_it_came_from(
    fake_model: FakeModelServer, sleeps: RecordedSleeps
) -> None:
    env = {"OPENAI_BASE_URL": fake_model.base_url, "MY_LLM_KEY": "definitely-wrong"}
    settings = ModelSettings(api_key_env="MY_LLM_KEY")
    with pytest.raises(ModelAuthError) as caught:
        await build_client(settings, env=env, retry=RetryPolicy(sleep=sleeps))
    message = str(caught.value)
    assert "MY_LLM_KEY" in message and fake_model.base_url in message
    assert "definitely-wrong" not in message


async def test_nothing_configured() -> None:
    with pytest.raises(ModelNotConfigured) as caught:
        await build_client(ModelSettings(), env={})
    message = str(caught.value)
    hints = (
        "vigil config set model.provider openai",
        "vigil config set model.name",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
    )
    for hint in hints:
        assert hint in message
