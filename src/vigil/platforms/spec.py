"""What a platform declares about itself: one :class:`Platform` per place vigil meets people.

Everything outside a platform's own adapter folder that has to know about platforms — config,
the supervisor, cron delivery, pairing, doctor, ``gateway status``, the CLI's help texts —
reads these declarations from the registry (:mod:`vigil.platforms`) instead of naming the
platforms, so a new platform is its adapter folder, its fake server under ``vigil.testing``,
and one registry entry.

Declarations live at the bottom of the layering (beside config): they hold data and small pure
functions of a profile's settings, and name their adapter by import path, which only the
gateway resolves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

Check = tuple[str, str, str]
"""A problem ``vigil doctor`` reports for an enabled platform: (name, what is wrong, the fix)."""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the gateway may rely on a platform's adapter for."""

    single_receiver: bool = False
    """Its receiving loop must run in one gateway worker only (a long poll): with
    several workers on one store, a lease decides which (``adapter.poll_lease``)."""
    edits: bool = False
    """A sent message can be edited: answers stream by editing one message."""
    buttons: bool = False
    """Approve/Deny buttons for a command that needs approval."""
    files: bool = False
    """Files both ways (uploads into the workspace, ``send_file`` to the person)."""
    pairing: bool = False
    """People are let in by an allow-list (``NAME.allow``) or a pairing code."""
    max_message_chars: int | None = None
    """Longest message the platform takes (longer answers are split); ``None``: no limit."""
    edit_interval: float = 1.0
    """Seconds between two edits of a streamed message in one chat, at least (the
    platform's rate limit for edits; :mod:`vigil.gateway.adapters.streaming` keeps it);
    ``0``: none, each piece is shown as it is written (the web chat's pages)."""


@dataclass(frozen=True, slots=True)
class TargetForm:
    """How a cron job's ``--deliver`` names a place on the platform: ``NAME`` alone when
    ``chat`` is ``None`` (the run's own conversation), else ``NAME:<chat>[:<thread>]``."""

    usage: str
    """The form as help texts show it: ``NAME:<chat id or @name>[:<topic id>]``."""
    short: str = ""
    """A shorter form for tight texts (``NAME:<chat>``); ``usage`` when empty."""
    chat: re.Pattern[str] | None = None
    chat_needed: str = ""
    """Said when the chat part is missing or malformed: ``a chat id or @name``."""
    thread: re.Pattern[str] | None = None
    thread_shape: str = ""
    """Said when the thread part is malformed: ``a forum topic is its numeric id ...``."""

    @property
    def brief(self) -> str:
        return self.short or self.usage


@dataclass(frozen=True, slots=True)
class Platform:
    """One platform: its name (the adapter's and the routes' name), how config turns it on,
    the secrets and SDK it needs, where cron answers can go on it, and its adapter."""

    name: str
    title: str
    """As a person reads it in a list: ``the web chat``."""
    adapter: str
    """``module:function`` making its adapter from the profile's settings (the gateway
    resolves it, only when the platform is enabled)."""
    enabled: Callable[[Any], bool]
    """Whether a profile's ``Settings`` turn it on."""
    how_to_enable: str
    """What to change when it is off: ``NAME.enabled is not true in config.yaml``."""
    section: str | None = None
    """Its own config.yaml section (``Settings.<section>``, with ``enabled`` and ``allow``),
    or ``None`` for one configured under ``gateway``."""
    secrets: Callable[[Any], list[str]] = field(default=lambda settings: [])
    """The environment variables (names) an enabled platform reads its secrets from."""
    sdk: tuple[str, str] | None = None
    """(module to import, how to install it) when it needs an optional SDK."""
    checks: Callable[[Any], list[Check]] = field(default=lambda settings: [])
    """Further problems of an enabled platform's settings, for ``vigil doctor``."""
    warnings: Callable[[Any], list[Check]] = field(default=lambda settings: [])
    """What an enabled platform cannot do here though it runs (``vigil doctor`` warns):
    a missing optional part, say."""
    target: TargetForm | None = None
    """How cron answers are delivered to it; ``None``: not a delivery target."""
    capabilities: Capabilities = Capabilities()

    def missing_secrets(self, settings: Any, environ: Any) -> list[str]:
        """The secret variables an enabled platform needs that ``environ`` does not set."""
        if not self.enabled(settings):
            return []
        return [name for name in self.secrets(settings) if not str(environ.get(name, "")).strip()]


NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
"""A platform's name: the adapter's name in routes, the cron target's prefix, the config section."""


def unset(settings: Any, name: str, needed: Mapping[str, tuple[str, str, str]]) -> list[Check]:
    """``vigil doctor``'s problems for the settings an enabled platform needs that its section
    ``name`` leaves unset. ``needed`` maps each such setting to (the check's name after the
    platform's, what its absence means, an example value for the fix)."""
    section = getattr(settings, name)
    return [(f"{name} {check}", f"{name}.enabled is true but {name}.{key} is not set{means}",
             f"vigil config set {name}.{key} {example}")
            for key, (check, means, example) in needed.items() if not getattr(section, key)]


def sectioned(name: str, title: str, *, sdk: str | None = None,
              secrets: Callable[[Any], list[str]] | None = None, **declared: Any) -> Platform:
    """A platform with a config.yaml section of its own named ``name`` (``enabled`` turns it on)
    and its adapter's factory at ``vigil.gateway.adapters.<name>:create``. ``sdk``: the module of
    its optional SDK, installed by ``pip install 'vigil[<name>]'``; ``secrets``: by default the
    variable its ``token_env`` names. ``declared``: the rest of the :class:`Platform`."""
    return Platform(
        name=name,
        title=title,
        adapter=f"vigil.gateway.adapters.{name}:create",
        enabled=lambda settings: bool(getattr(settings, name).enabled),
        how_to_enable=f"{name}.enabled is not true in config.yaml",
        section=name,
        secrets=secrets or (lambda settings: [getattr(settings, name).token_env]),
        sdk=None if sdk is None else (sdk, f"pip install 'vigil[{name}]'"),
        **declared,
    )
