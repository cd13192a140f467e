"""The OpenAI-compatible API's declaration in the platform registry (its settings are
``gateway.api``). Its clients ask and are answered in the same request, so it is no delivery
target for cron."""

from __future__ import annotations

from vigil.platforms.spec import Platform

API = Platform(
    name="api",
    title="the OpenAI-compatible API",
    adapter="vigil.gateway.adapters.openai_api:create",
    enabled=lambda settings: bool(settings.gateway.api.enabled),
    how_to_enable="gateway.api.enabled is false",
)
