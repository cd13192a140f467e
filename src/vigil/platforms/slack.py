"""Slack: its config.yaml section and its declaration in the platform registry."""

from __future__ import annotations

import re
from typing import Any

from vigil.config.schema import Section, setting
from vigil.platforms.fields import check, env_name, http_url, user_ids
from vigil.platforms.spec import Capabilities, TargetForm, sectioned

_SLASH_NAME = re.compile(r"^/?[a-z0-9][a-z0-9_-]{0,31}$")


def command_name(value: str) -> str:
    """The slash command ``value`` names, with its ``/``."""
    if not _SLASH_NAME.match(value):
        raise ValueError("must be a slash command name such as /vigil (lower-case letters, digits, _ and -)")
    return value if value.startswith("/") else "/" + value


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

    _env = check(env_name, "bot_token_env", "signing_secret_env", "app_token_env")
    _allow = check(user_ids, "allow")
    _url = check(http_url, "api_url")
    _slash = check(command_name, "command")


def _secrets(settings: Any) -> list[str]:
    section = settings.slack
    return [section.bot_token_env, section.app_token_env if section.socket_mode else section.signing_secret_env]


SLACK = sectioned(
    "slack",
    "Slack",
    sdk="slack_sdk",
    secrets=_secrets,
    target=TargetForm(
        usage="slack:<channel>[:<thread>]",
        short="slack:<channel>",
        chat=re.compile(r"#?[A-Za-z0-9][A-Za-z0-9_.-]{0,79}"),
        chat_needed="a Slack channel id or name",
        thread=re.compile(r"\d{1,12}\.\d{1,9}"),
        thread_shape="a Slack thread is a message timestamp such as 1712345678.123456",
    ),
    capabilities=Capabilities(edits=True, buttons=True, files=True, pairing=True, max_message_chars=3_500),
)
