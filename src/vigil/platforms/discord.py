"""Discord: its config.yaml section and its declaration in the platform registry.

A Discord bot (discord.py, ``pip install 'vigil[discord]'``) answers DMs and, in servers,
messages that mention it — each such conversation in a thread of its own — and the slash
command ``/vigil …`` carrying any of vigil's commands. The bot token comes from the
environment variable ``discord.token_env`` names (``DISCORD_BOT_TOKEN``), never from
config.yaml. ``discord.api_url`` points the bot at another Discord API than discord.com: it is
for tests, which run it against a fake server (:mod:`vigil.testing.discord_api`).
"""

from __future__ import annotations

import re
from typing import Any

from vigil.config.schema import Section, setting
from vigil.platforms.fields import check, env_name, http_url
from vigil.platforms.spec import Capabilities, Check, TargetForm, sectioned

SNOWFLAKE = re.compile(r"[1-9]\d{14,20}")
"""A Discord id (user, channel, thread): a number of 15 to 21 digits."""
_COMMAND = re.compile(r"^/?[a-z0-9_-]{1,32}$")


def user_ids(values: list[str]) -> list[str]:
    """``values`` if each is a Discord user id."""
    for item in values:
        if not SNOWFLAKE.fullmatch(item):
            raise ValueError(f"'{item[:70]}' is not a Discord user id (a number such as 80351110224678912; "
                             "Developer Mode in Discord's settings lets you copy it)")
    return values


def command_name(value: str) -> str:
    """The slash command's name ``value`` names, without its ``/``."""
    if not _COMMAND.match(value):
        raise ValueError("must be a slash command name such as vigil (lower-case letters, digits, _ and -)")
    return value.removeprefix("/")


class DiscordSettings(Section):
    """The Discord adapter (``pip install 'vigil[discord]'``)."""

    enabled: bool = setting(False, description="serve Discord (DMs, mentions in servers, the slash command)")
    token_env: str = setting("DISCORD_BOT_TOKEN", max_length=128,
                             description="environment variable holding the bot token")
    allow: list[str] = setting(default_factory=list, max_length=10_000,
                               description="Discord user ids allowed to talk to the agent")
    command: str = setting("vigil", max_length=33, description="the slash command that carries vigil's commands")
    threads: bool = setting(True, description="a mention in a server channel starts a thread for its conversation")
    api_url: str | None = setting(
        None, max_length=2048,
        description="base URL of Discord's REST API, for tests against a fake server (default https://discord.com/api/v10)",
    )

    _env = check(env_name, "token_env")
    _allow = check(user_ids, "allow")
    _command = check(command_name, "command")
    _url = check(http_url, "api_url")


def _checks(settings: Any) -> list[Check]:
    section = settings.discord
    if section.api_url:
        return [("discord api", f"discord.api_url is set: the bot talks to {section.api_url}, not to Discord "
                                "(the setting is for tests)", "vigil config unset discord.api_url")]
    return []


DISCORD = sectioned(
    "discord",
    "Discord",
    sdk="discord",
    checks=_checks,
    target=TargetForm(
        usage="discord:<channel id>[:<thread id>]",
        short="discord:<channel>",
        chat=SNOWFLAKE,
        chat_needed="a Discord channel id (a number; a DM's channel id works too)",
        thread=SNOWFLAKE,
        thread_shape="a Discord thread is its channel id, a number such as 1234567890123456789",
    ),
    # A single receiver: with several workers on one store only one holds the Gateway session
    # (every event would reach each, and the session saved for resuming is one).
    capabilities=Capabilities(single_receiver=True, edits=True, buttons=True, files=True, pairing=True,
                              max_message_chars=2000, edit_interval=1.0),
)
