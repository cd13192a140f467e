"""A model client that connects on first use, for processes that must start without a model.

The gateway runs on its embedded defaults even before a model is configured: it starts, serves
its schedules, and a job that fires without a model fails with the configuration hint. A
message that arrives then waits for a model (see :mod:`vigil.gateway.patience`): each new try
builds the client again, with the model settings of the profile's config.yaml read again when
the file changed, so `vigil config set model.…` takes effect without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Mapping

from vigil.config.settings import ModelSettings
from vigil.config.model_env import LOCAL_MODEL_ENV
from vigil.models.base import ModelClient, ModelRequest, ModelResponse, TextCallback
from vigil.models.factory import ModelNotConfigured, build_client

log = logging.getLogger(__name__)

Stamp = tuple[int, int] | None


class LazyModelClient:
    """Builds the real client on the first call; a failed build is retried on the next call.

    With ``config_path``, a build that finds no model configured reads the model settings of
    that file again first, if it changed since they were read (a broken file is ignored)."""

    def __init__(
        self, settings: ModelSettings, env: Mapping[str, str] = os.environ, *, home: Path | None = None,
        config_path: Path | None = None,
    ) -> None:
        self._env = env
        self._home = home
        self._inner: ModelClient | None = None
        self._lock = asyncio.Lock()
        self._config_path = config_path
        self._config_stamp = _stamp(config_path)
        self._use(settings)

    def _use(self, settings: ModelSettings) -> None:
        self._settings = settings
        self.provider = settings.provider or "openai"
        self._model = settings.name or self._env.get("VIGIL_MODEL") or ""
        if settings.provider == "local":  # the engine serves its file under the file's name
            self._model = Path(settings.path or self._env.get(LOCAL_MODEL_ENV) or "").name

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
                try:
                    self._inner = await build_client(self._settings, self._env, home=self._home)
                except ModelNotConfigured:
                    if not await asyncio.to_thread(self._reread):
                        raise
                    self._inner = await build_client(self._settings, self._env, home=self._home)
                if self._model:
                    self._inner.model = self._model
                self.provider = self._inner.provider
            return self._inner

    def _reread(self) -> bool:
        """Take the model settings of config.yaml if the file changed and they did too."""
        stamp = _stamp(self._config_path)
        if self._config_path is None or stamp == self._config_stamp:
            return False
        self._config_stamp = stamp
        from vigil.config.settings import load_settings

        try:
            settings = load_settings(self._config_path).model
        except Exception as exc:  # a file being edited or broken: the running settings stay
            log.warning("cannot read the model settings of %s again: %s", self._config_path, exc)
            return False
        if settings == self._settings:
            return False
        self._use(settings)
        return True

    async def complete(
        self, request: ModelRequest, *, on_text: TextCallback | None = None
    ) -> ModelResponse:
        return await (await self._client()).complete(request, on_text=on_text)

    async def list_models(self) -> list[str]:
        return await (await self._client()).list_models()

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()


def _stamp(path: Path | None) -> Stamp:
    """When and how big ``path`` is (``None``: there is no such file)."""
    if path is None:
        return None
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size
