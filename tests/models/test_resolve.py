"""Resolving config + environment into a provider, endpoint, key and model (no network)."""

from __future__ import annotations

import pytest

from vigil.config.settings import ModelSettings
from vigil.models.factory import ModelNotConfigured, build_client, resolve_model_settings


def test_openai_from_environment_only() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1", "OPENAI_API_KEY": "sk-env"}
    resolved = resolve_model_settings(ModelSettings(), env)
    assert resolved.provider == "openai"
    assert resolved.base_url == "http://127.0.0.1:8000/v1"
    assert resolved.api_key == "sk-env"
    assert "OPENAI_API_KEY" in resolved.key_source
    assert resolved.model is None


def test_anthropic_only_when_its_key_is_the_only_one() -> None:
    assert resolve_model_settings(ModelSettings(), {"ANTHROPIC_API_KEY": "a"}).provider == "anthropic"
    both = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}
    assert resolve_model_settings(ModelSettings(), both).provider == "openai"
    anthropic = resolve_model_settings(ModelSettings(), {"ANTHROPIC_API_KEY": "a"})
    assert anthropic.base_url == "https://api.anthropic.com" and anthropic.api_key == "a"


def test_config_wins_over_environment() -> None:
    settings = ModelSettings(provider="openai", name="cfg-model", base_url="http://cfg/v1", api_key="cfg-key")
    env = {"OPENAI_BASE_URL": "http://env/v1", "OPENAI_API_KEY": "env-key", "VIGIL_MODEL": "env-model"}
    resolved = resolve_model_settings(settings, env)
    assert (resolved.model, resolved.base_url, resolved.api_key) == ("cfg-model", "http://cfg/v1", "cfg-key")
    assert "model.api_key" in resolved.key_source


def test_key_precedence_config_then_named_variable_then_default() -> None:
    named = ModelSettings(api_key_env="MY_KEY")
    env = {"MY_KEY": "mine", "OPENAI_API_KEY": "default"}
    assert resolve_model_settings(named, env).api_key == "mine"
    assert "MY_KEY" in resolve_model_settings(named, env).key_source
    assert resolve_model_settings(named, {"OPENAI_API_KEY": "default"}).api_key == "default"


def test_vigil_model_names_the_model() -> None:
    resolved = resolve_model_settings(ModelSettings(), {"OPENAI_API_KEY": "k", "VIGIL_MODEL": "m1"})
    assert resolved.model == "m1"


def test_endpoint_without_key_gets_a_placeholder() -> None:
    resolved = resolve_model_settings(ModelSettings(), {"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"})
    assert resolved.api_key and "OPENAI_API_KEY" in resolved.key_source


def test_the_key_never_appears_in_the_repr() -> None:
    resolved = resolve_model_settings(ModelSettings(), {"OPENAI_API_KEY": "sk-secret-123"})
    assert "sk-secret-123" not in repr(resolved)


def test_nothing_configured_explains_how_to_configure() -> None:
    with pytest.raises(ModelNotConfigured) as caught:
        resolve_model_settings(ModelSettings(), {})
    message = str(caught.value)
    assert "vigil config set model.provider openai" in message
    assert "vigil config set model.name" in message
    assert "OPENAI_BASE_URL" in message and "OPENAI_API_KEY" in message
    assert "Ollama" in message


def test_configured_provider_without_key_names_the_variable() -> None:
    with pytest.raises(ModelNotConfigured, match="ANTHROPIC_API_KEY"):
        resolve_model_settings(ModelSettings(provider="anthropic"), {})


async def test_build_client_raises_before_any_network_when_unconfigured() -> None:
    with pytest.raises(ModelNotConfigured):
        await build_client(ModelSettings(), env={})


async def test_anthropic_needs_a_model_name() -> None:
    with pytest.raises(ModelNotConfigured, match="model.name"):
        await build_client(ModelSettings(), env={"ANTHROPIC_API_KEY": "a"})


async def test_build_client_uses_the_named_model_without_listing() -> None:
    settings = ModelSettings(provider="anthropic", name="claude-x")
    client = await build_client(settings, env={"ANTHROPIC_API_KEY": "a"})
    try:
        assert (client.provider, client.model) == ("anthropic", "claude-x")
    finally:
        await client.aclose()
