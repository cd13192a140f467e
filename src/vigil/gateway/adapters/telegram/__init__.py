"""The Telegram adapter (``pip install 'vigil[telegram]'``): see :mod:`.adapter`.

Setting it up: create a bot with @BotFather, put its token in ``TELEGRAM_BOT_TOKEN`` (the
variable ``telegram.token_env`` names; never in config.yaml), and in config.yaml::

    telegram:
      enabled: true
      allow: ["123456789"]     # Telegram user ids that may talk to the agent
      # mode: webhook          # instead of long polling; then also:
      # webhook_url: https://example.org/telegram/webhook   (TELEGRAM_WEBHOOK_SECRET set)

``vigil gateway run`` then answers private chats, groups (one conversation per person unless
``group_per_user: false``) and forum topics (one conversation each).
"""

from typing import Any

from vigil.gateway.adapters.telegram.adapter import TelegramAdapter


def create(settings: Any) -> TelegramAdapter:
    """The adapter for a profile's settings (the platform registry's factory); it reads its
    section when it starts and on SIGHUP."""
    return TelegramAdapter()


__all__ = ["TelegramAdapter", "create"]
