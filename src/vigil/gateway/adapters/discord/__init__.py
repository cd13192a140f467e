"""The Discord adapter (``pip install 'vigil[discord]'``): see :mod:`.adapter`.

Setting up the bot (discord.com/developers/applications): create an application, add a bot
and copy its token into ``DISCORD_BOT_TOKEN`` (the variable ``discord.token_env`` names); under
Bot → Privileged Gateway Intents turn on the Message Content intent; invite the bot with the
OAuth2 scopes ``bot`` and ``applications.commands`` and the permissions View Channels, Send
Messages, Send Messages in Threads, Create Public Threads, Read Message History and Attach
Files. Then in config.yaml::

    discord:
      enabled: true
      allow: ["80351110224678912"]   # Discord user ids that may talk to the agent

``vigil gateway run`` then answers DMs, mentions in servers (each in a thread of its own) and
``/vigil …``. The README's Discord section has the steps in full.
"""

from typing import Any

from vigil.gateway.adapters.discord.adapter import DiscordAdapter


def create(settings: Any) -> DiscordAdapter:
    """The adapter for a profile's settings (the platform registry's factory)."""
    return DiscordAdapter(settings.discord)


__all__ = ["DiscordAdapter", "create"]
