"""A model client that connects on first use, for processes that must start without a model.

The gateway runs on its embedded defaults even before a model is configured: it starts, serves
its schedules, and a job that fires without a model fails with the configuration hint.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Mapping

from vigil.config import ModelSettings
from vigil.model_env import LOCAL_MODEL_ENV
from vigil.models.base import ModelClient, ModelRequest, ModelResponse, TextCallback
from vigil.models.factory import build_client


class LazyModelClient:
    """Builds the real client on the first call; a failed build is retried on the next call."""

    def __init__(
        self, settings: ModelSettings, env: Mapping[str, str] = os.environ, *, home: Path | None = None
    ) -> None:
        self._settings = settings
        self._env = env
        self._home = home
        self._inner: ModelClient | None = None
        self._lock = asyncio.Lock()
        self.provider = settings.provider or "openai"
        self._model = settings.name or env.get("VIGIL_MODEL") or ""
        if settings.provider == "local":  # the engine serves its file under the file's name
            self._model = Path(settings.path or env.get(LOCAL_MODEL_ENV) or "").name

    @property
    def model(self) -> str:
        return self._inner.model if self._inner is not None else self._model

    @model.setter
    def model(self, name: str) -> None:
        self._model = name
        if self._inner is not None:
            self._inner.model = name

    async def _client(self) -> ModelClient:
        async with self._lock:
            if self._inner is None:
                self._inner = await build_client(self._settings, self._env, home=self._home)
                if self._model:
                    self._inner.model = self._model
                self.provider = self._inner.provider
            return self._inner

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None
    ) -> ModelResponse:
        return await (await self._client()).complete(request, on_text=on_text)

    async def list_models(self) -> list[str]:
        return await (await self._client()).list_models()

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
