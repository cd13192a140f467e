"""The platform registry: every place vigil meets people, declared once (:mod:`.spec`).

Config, the supervisor, cron delivery, pairing, ``vigil doctor``, ``gateway status`` and the
CLI's help texts iterate :func:`platforms` instead of naming platforms. Adding a platform is its
adapter folder under ``vigil.gateway.adapters``, its fake server under ``vigil.testing``, a
declaration module here, and one line in :data:`BUILT_IN`. A test (or an embedder) may
:func:`register` one more for the life of the process.
"""

from __future__ import annotations

from typing import Callable

from vigil.platforms.api import API
from vigil.platforms.discord import DISCORD
from vigil.platforms.email import EMAIL
from vigil.platforms.matrix import MATRIX
from vigil.platforms.slack import SLACK
from vigil.platforms.spec import NAME, Capabilities, Platform, TargetForm
from vigil.platforms.telegram import TELEGRAM
from vigil.platforms.web import WEB
from vigil.platforms.webhooks import WEBHOOKS

BUILT_IN: tuple[Platform, ...] = (WEB, SLACK, TELEGRAM, API, EMAIL, WEBHOOKS, DISCORD, MATRIX)
"""In the order lists show them (adapters in ``gateway status``, ``send_file``'s chats)."""

_registered: dict[str, Platform] = {}
RESERVED = frozenset({"local", "gateway", "cli", "cron", "heartbeat", "repl"})
"""Names that already mean something else (cron's ``local`` target, session sources)."""


def register(platform: Platform) -> Platform:
    """Add ``platform`` to the registry; ``ValueError`` for a malformed, reserved or taken name."""
    if not NAME.fullmatch(platform.name) or platform.name in RESERVED:
        raise ValueError(f"{platform.name!r} cannot name a platform (lower-case letters, digits and _)")
    if platform.name in _registered:
        raise ValueError(f"a platform named {platform.name!r} is registered already")
    _registered[platform.name] = platform
    return platform


def unregister(name: str) -> None:
    """Take a platform :func:`register` added out again (a test's clean-up)."""
    if any(platform.name == name for platform in BUILT_IN):
        raise ValueError(f"{name!r} is built in")
    _registered.pop(name, None)


def platforms() -> tuple[Platform, ...]:
    """Every platform, in registry order."""
    return tuple(_registered.values())


def get(name: str) -> Platform | None:
    """The platform named ``name``, if there is one."""
    return _registered.get(name)


def delivery_targets() -> tuple[Platform, ...]:
    """The platforms cron answers can be delivered to: those needing a chat first (their
    forms are longer), then the ones named alone."""
    found = [platform for platform in _registered.values() if platform.target is not None]
    return tuple(sorted(found, key=lambda platform: platform.target.chat is None))  # type: ignore[union-attr]


def deliver_help(*, brief: bool = False) -> str:
    """``local (default), slack:<channel>[:<thread>], ..., web``: the cron targets for help texts."""
    forms = [platform.target.brief if brief else platform.target.usage  # type: ignore[union-attr]
             for platform in delivery_targets()]
    return ", ".join(["local (default)", *forms])


def titles(*, where: "Callable[[Platform], bool]" = lambda platform: True) -> str:
    """``the web chat, Slack, Telegram``: the platforms ``where`` picks, as a list in words."""
    return ", ".join(platform.title for platform in _registered.values() if where(platform))


for _platform in BUILT_IN:
    register(_platform)

__all__ = ["BUILT_IN", "Capabilities", "Platform", "TargetForm", "delivery_targets", "get", "platforms",
           "register", "titles", "deliver_help", "unregister"]
