"""The ``local`` provider: an in-process llama.cpp engine behind the OpenAI-compatible client."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Mapping

from vigil.config.settings import ModelSettings
from vigil.models.base import ModelBadRequest, ModelClient, ModelRequest, ModelResponse, TextCallback
from vigil.models.local_engine import EngineOptions, LocalEngine, LocalModelError, start_engine
from vigil.models.openai_client import OpenAIClient
from vigil.models.retry import RetryPolicy

_OVERFLOW_MARKERS = ("exceeds the available context", "context size", "n_ctx")


class LocalClient(OpenAIClient):
    """An ``OpenAIClient`` for a local engine; ``aclose`` stops the engine when it ``owns_engine``."""

    provider = "local"

    def __init__(
        self,
        settings: ModelSettings,
        engine: LocalEngine,
        *,
        retry: RetryPolicy | None = None,
        owns_engine: bool = True,
    ) -> None:
        super().__init__(
            settings,
            model=engine.options.path.name,
            api_key=engine.api_key,
            base_url=engine.base_url,
            key_source="nowhere (the local engine needs no key)",
            retry=retry,
        )
        self.engine = engine
        self.owns_engine = owns_engine
        self.tools_supported = True
        self.notice: str | None = None
        """Said once when the client starts (e.g. that the model runs without tools)."""

    async def complete(self, request: ModelRequest, *, on_text: TextCallback | None = None) -> ModelResponse:
        try:
            return await super().complete(request, on_text=on_text)
        except ModelBadRequest as exc:
            if any(marker in str(exc) for marker in _OVERFLOW_MARKERS):
                raise LocalModelError(
                    f"the conversation no longer fits the local engine's context of {self.engine.options.context:,} "
                    "tokens: raise it with `vigil config set model.local.context N` or start a new conversation (/new)."
                ) from None
            raise

    async def aclose(self) -> None:
        await super().aclose()
        if self.owns_engine:
            await asyncio.to_thread(self.engine.close)


async def start_local_client(
    settings: ModelSettings,
    env: Mapping[str, str] = os.environ,
    *,
    retry: RetryPolicy | None = None,
    home: Path | None = None,
) -> ModelClient:
    """Start the engine for ``settings`` (or, with ``model.local.shared`` and the profile
    ``home``, reach the profile's shared one) and return a client for it; tool calls the model
    writes as text become real ones as ``model.text_tool_calls`` says."""
    options = EngineOptions.from_settings(settings, env)
    if settings.local.shared and home is not None:
        from vigil.models.local_engine import check_model_file
        from vigil.models.shared_engine import connect

        await asyncio.to_thread(check_model_file, options.path)
        base_url, api_key = await asyncio.to_thread(
            connect, options, home, idle_stop=settings.local.idle_stop, timeout=settings.timeout
        )
        engine = await asyncio.to_thread(LocalEngine, None, options, api_key, base_url)
    else:
        engine = await asyncio.to_thread(start_engine, options)
    return wrap_for_tools(LocalClient(settings, engine, retry=retry), settings)


def wrap_for_tools(client: LocalClient, settings: ModelSettings) -> ModelClient:
    """``client``, reading tool calls from text where ``model.text_tool_calls`` says so."""
    engine = client.engine
    mode = settings.text_tool_calls
    if mode == "off" and not engine.native_tool_calls:
        client.tools_supported = False
        client.notice = (
            f"{engine.options.path.name} has no tool-call format in its chat template and "
            "model.text_tool_calls is off: new conversations run without tools."
        )
        return client
    if mode == "on" or (mode == "auto" and not engine.native_tool_calls):
        from vigil.models.text_tool_client import TextToolCallClient

        return TextToolCallClient(client, describe_tools=not engine.native_tool_calls)
    return client
