"""Telegram: its config.yaml section and its declaration in the platform registry."""

from __future__ import annotations

import re
from typing import Any, Literal

from vigil.config.schema import Section, setting
from vigil.platforms.fields import check, env_name, http_url, user_ids
from vigil.platforms.spec import Capabilities, Check, TargetForm, sectioned


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

    _env = check(env_name, "token_env", "webhook_secret_env")
    _allow = check(user_ids, "allow")
    _url = check(http_url, "api_url", "webhook_url")


def _secrets(settings: Any) -> list[str]:
    section = settings.telegram
    return [section.token_env] + ([section.webhook_secret_env] if section.mode == "webhook" else [])


def _checks(settings: Any) -> list[Check]:
    section = settings.telegram
    if section.mode == "webhook" and not section.webhook_url:
        return [("telegram webhook", "telegram.mode is webhook but telegram.webhook_url is not set",
                 "vigil config set telegram.webhook_url https://HOST/telegram/webhook")]
    return []


TELEGRAM = sectioned(
    "telegram",
    "Telegram",
    sdk="telegram",
    secrets=_secrets,
    checks=_checks,
    target=TargetForm(
        usage="telegram:<chat id or @name>[:<topic id>]",
        short="telegram:<chat>",
        chat=re.compile(r"-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31}"),
        chat_needed="a Telegram chat id or @name",
        thread=re.compile(r"[1-9]\d{0,9}"),
        thread_shape="a Telegram forum topic is its numeric id (message_thread_id) such as 42",
    ),
    capabilities=Capabilities(single_receiver=True, edits=True, buttons=True, files=True, pairing=True,
                              max_message_chars=4096),
)
