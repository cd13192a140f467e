"""The ``slack`` and ``telegram`` sections of a profile's config.yaml (read by :mod:`vigil.config`).

Secrets never live here: each section names the environment variable that holds its token, and
the gateway reads the variable at start (and on SIGHUP). An enabled platform whose variable is
unset is reported at start and by ``vigil gateway status``; the gateway still starts.
"""

from __future__ import annotations

import re
from typing import Literal

from vigil.settings_schema import Section, setting, validates

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_USER_ID = re.compile(r"^[A-Za-z0-9_.@:+-]{1,64}$")
_SLASH_NAME = re.compile(r"^/?[a-z0-9][a-z0-9_-]{0,31}$")


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError("must be the name of an environment variable (letters, digits and _)")
    return value


def _user_ids(values: list[str]) -> list[str]:
    for value in values:
        if not _USER_ID.match(value):
            raise ValueError(f"'{value[:70]}' is not a platform user id (letters, digits and _.@:+-, at most 64)")
    return values


def _http_url(value: str | None) -> str | None:
    if value is None:
        return None
    if not re.match(r"^https?://[^\s/?#]+(/[^\s]*)?$", value):
        raise ValueError("must be an http:// or https:// URL without spaces")
    return value.rstrip("/")


class SlackSettings(Section):
    """The Slack adapter (``pip install 'vigil[slack]'``)."""

    enabled: bool = setting(False, description="serve Slack (Events API at /slack/events, or Socket Mode)")
    api_url: str | None = setting(
        None, max_length=2048, description="base URL of the Slack Web API (default https://slack.com/api)"
    )
    command: str = setting("/vigil", max_length=33, description="the app's slash command that carries vigil's commands")
    allow: list[str] = setting(default_factory=list, max_length=10_000, description="Slack user ids allowed to talk to the agent")
    socket_mode: bool = setting(False, description="connect out over Socket Mode instead of receiving HTTP events")
    bot_token_env: str = setting("SLACK_BOT_TOKEN", max_length=128, description="environment variable holding the bot token (xoxb-...)")
    signing_secret_env: str = setting(
        "SLACK_SIGNING_SECRET", max_length=128, description="environment variable holding the request signing secret"
    )
    app_token_env: str = setting(
        "SLACK_APP_TOKEN", max_length=128, description="environment variable holding the app-level token (xapp-...) for Socket Mode"
    )

    @validates("bot_token_env", "signing_secret_env", "app_token_env")
    @classmethod
    def _env(cls, value: str) -> str:
        return _env_name(value)

    @validates("allow")
    @classmethod
    def _allow(cls, value: list[str]) -> list[str]:
        return _user_ids(value)

    @validates("api_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return _http_url(value)

    @validates("command")
    @classmethod
    def _slash(cls, value: str) -> str:
        if not _SLASH_NAME.match(value):
            raise ValueError("must be a slash command name such as /vigil (lower-case letters, digits, _ and -)")
        return value if value.startswith("/") else "/" + value


class TelegramSettings(Section):
    """The Telegram adapter (``pip install 'vigil[telegram]'``)."""

    enabled: bool = setting(False, description="serve Telegram")
    api_url: str | None = setting(
        None, max_length=2048, description="base URL of the Bot API (default https://api.telegram.org)"
    )
    allow: list[str] = setting(default_factory=list, max_length=10_000, description="Telegram user ids allowed to talk to the agent")
    mode: Literal["polling", "webhook"] = setting("polling", description="long polling, or a webhook at /telegram/webhook")
    webhook_url: str | None = setting(
        None, max_length=2048, description="public URL Telegram posts updates to (mode: webhook)"
    )
    group_per_user: bool = setting(True, description="in a group, each person has their own conversation")
    token_env: str = setting("TELEGRAM_BOT_TOKEN", max_length=128, description="environment variable holding the bot token")
    webhook_secret_env: str = setting(
        "TELEGRAM_WEBHOOK_SECRET", max_length=128, description="environment variable holding the webhook secret token"
    )

    @validates("token_env", "webhook_secret_env")
    @classmethod
    def _env(cls, value: str) -> str:
        return _env_name(value)

    @validates("allow")
    @classmethod
    def _allow(cls, value: list[str]) -> list[str]:
        return _user_ids(value)

    @validates("api_url", "webhook_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return _http_url(value)
