"""Which adapters a profile's configuration turns on.

The web chat is on unless ``gateway.web.enabled`` is false, the OpenAI-compatible API (``api``)
unless ``gateway.api.enabled`` is false; Slack and Telegram join here when their sections are
configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vigil.config import Settings
from vigil.profiles import Profile

if TYPE_CHECKING:
    from vigil.gateway.adapters.base import Adapter


def configured_adapters(settings: Settings, profile: Profile) -> "dict[str, Adapter]":
    adapters: dict[str, Adapter] = {}
    if settings.gateway.web.enabled:
        from vigil.gateway.adapters.web import WebAdapter

        web = WebAdapter()
        adapters[web.name] = web
    if settings.gateway.api.enabled:
        from vigil.gateway.adapters.openai_api import ApiAdapter

        api = ApiAdapter()
        adapters[api.name] = api
    if settings.slack.enabled:
        from vigil.gateway.adapters.slack import SlackAdapter

        slack = SlackAdapter(settings.slack)
        adapters[slack.name] = slack
    if settings.telegram.enabled:
        from vigil.gateway.adapters.telegram import TelegramAdapter

        telegram = TelegramAdapter()
        adapters[telegram.name] = telegram
    return adapters
