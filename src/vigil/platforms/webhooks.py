"""Webhooks: named HTTP hooks that start or continue conversations, and the URLs their answers,
heartbeats and cron results are delivered to. Its config.yaml section and its declaration in
the platform registry.

::

    webhooks:
      enabled: true
      hooks:
        ha:                                  # POST /hooks/ha on the gateway's port
          secret_env: HA_HOOK_SECRET         # the signing secret is read from this variable
          url: https://ha.example/api/webhook/vigil-answer   # answers go here (optional)

Requests and deliveries are signed as Standard Webhooks are (``webhook-id``,
``webhook-timestamp``, ``webhook-signature``: HMAC-SHA256); the adapter is
``vigil.gateway.adapters.webhooks``. A hook's caller is authenticated by its signature, so the
hooks configured here are the platform's allow-list (:attr:`WebhooksSettings.allow`): no
pairing codes.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Mapping
from urllib.parse import urlsplit

from vigil.config.mcp import _Table
from vigil.platforms.fields import env_name
from vigil.platforms.spec import Capabilities, Check, TargetForm, sectioned
from vigil.config.schema import Problem, Section, setting, validates

HOOK_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
"""A hook's name: its path ``/hooks/NAME`` and its cron target ``webhooks:NAME``."""
KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
"""A conversation key or a delivery id (``webhook-id``): letters, digits and ``._@-``."""
MAX_HOOKS = 100
_URL = re.compile(r"^https?://[^\s/?#@]+([/?][^\s]*)?$")


def answer_url(value: str | None) -> str | None:
    """``value`` if it is an http(s) URL with a host, no spaces and no credentials in it."""
    if value is None:
        return None
    if not _URL.match(value):
        raise ValueError("must be an http:// or https:// URL without spaces or user:password@")
    return value


class HookSettings(Section):
    """One named hook: ``POST /hooks/NAME``, signed with the secret its variable holds."""

    secret_env: str = setting(
        "", max_length=128,
        description="environment variable holding the hook's signing secret (never written in config.yaml)",
    )
    url: str | None = setting(
        None, max_length=2048,
        description="where the hook's answers, heartbeats and cron results are POSTed, signed "
        "(without it they stay in the conversation)",
    )

    @validates("secret_env")
    @classmethod
    def _env(cls, value: str) -> str:
        return env_name(value)

    @validates("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return answer_url(value)

    @classmethod
    def _fill(cls, data: Mapping[Any, Any], loc: tuple[Any, ...], out: list[Problem]) -> dict[str, Any]:
        before = len(out)
        values = super()._fill(data, loc, out)
        if len(out) == before and not values["secret_env"]:
            out.append(Problem((*loc, "secret_env"), "missing", "Value error, give the hook secret_env: the "
                               "environment variable holding its signing secret (e.g. HA_HOOK_SECRET)", dict(data)))
        return values


class Hooks(_Table):
    """The hooks by name."""

    key_pattern = HOOK_NAME
    key_words = "a hook name: lower-case letters, digits, _ and -, at most 32 characters (e.g. ha, n8n, ci)"
    max_entries = MAX_HOOKS

    @classmethod
    def _entry(cls, key: str, value: Any, loc: tuple[Any, ...], out: list[Problem]) -> Any:
        return HookSettings._checked(value, loc, out)


class WebhooksSettings(Section):
    """Webhooks: ``POST /hooks/NAME`` starts or continues a conversation; answers go to the hook's url."""

    enabled: bool = setting(False, description="serve the hooks at /hooks/NAME on the gateway's port")
    hooks: Hooks = setting(
        default_factory=Hooks, description="the hooks by name, each with secret_env and, for answers, url"
    )
    tolerance: int = setting(
        300, ge=10, le=86_400,
        description="seconds a request's webhook-timestamp may be off the gateway's clock (older: a replay, refused)",
    )
    max_body_bytes: int = setting(262_144, ge=1024, le=10_485_760, description="largest request body a hook takes")
    timeout: float = setting(
        15.0, gt=0, le=300, allow_inf_nan=False, description="seconds one delivery to a hook's url may take"
    )

    @property
    def allow(self) -> list[str]:
        """Who may talk to the agent: every configured hook (its caller proved itself by the
        signature), as the gateway's authorization reads a platform's ``allow``."""
        return list(self.hooks)


def _secrets(settings: Any) -> list[str]:
    return list(dict.fromkeys(hook.secret_env for _name, hook in settings.webhooks.hooks.items()))


def _plain_http(url: str) -> bool:
    """Whether ``url`` leaves this machine unencrypted (http:// to a host not on loopback)."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        return False
    host = parts.hostname or ""
    try:
        return not (host == "localhost" or ipaddress.ip_address(host).is_loopback)
    except ValueError:
        return True


def _checks(settings: Any) -> list[Check]:
    section = settings.webhooks
    if not len(section.hooks):
        return [("webhooks hooks", "webhooks.enabled is true but webhooks.hooks names no hook",
                 "vigil config set webhooks.hooks.NAME.secret_env NAME_HOOK_SECRET")]
    return [
        (f"webhooks hook {name}", f"answers to the hook {name} go unencrypted to {hook.url}",
         f"give webhooks.hooks.{name}.url an https:// URL")
        for name, hook in section.hooks.items() if hook.url and _plain_http(hook.url)
    ]


WEBHOOKS = sectioned(
    "webhooks",
    "Webhooks",
    secrets=_secrets,
    checks=_checks,
    target=TargetForm(
        usage="webhooks:<hook>[:<conversation>]",
        short="webhooks:<hook>",
        chat=HOOK_NAME,
        chat_needed="a hook's name (webhooks.hooks)",
        thread=KEY,
        thread_shape="a webhook conversation key is letters, digits and ._@- (at most 128)",
    ),
    capabilities=Capabilities(),
)
