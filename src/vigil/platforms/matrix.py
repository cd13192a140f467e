"""Matrix: its config.yaml section and its declaration in the platform registry.

The agent is a Matrix account (a bot user on a homeserver): ``matrix.homeserver`` is its
server's client URL, ``matrix.user_id`` its id (``@vigil:example.org``), and its access token
comes from the environment variable ``matrix.token_env`` names, never from config.yaml. Only
the people on ``matrix.allow`` (or paired) are answered, and only their invitations are
accepted. Encrypted rooms need ``matrix-nio[e2e]``; without it the agent answers in
unencrypted rooms only and says so in an encrypted one.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any

from vigil.config.schema import Section, setting
from vigil.platforms.fields import check, env_name, http_url
from vigil.platforms.spec import Capabilities, Check, TargetForm, sectioned, unset

USER_ID = re.compile(r"@[a-z0-9._=/+-]{1,200}:[A-Za-z0-9.-]{1,230}(?::\d{1,5})?", re.IGNORECASE)
"""A Matrix user id: ``@localpart:server[:port]`` (historical ids may hold upper-case letters)."""
ROOM_ID = re.compile(r"![A-Za-z0-9._=/+-]{1,200}:[A-Za-z0-9.-]{1,230}(?::\d{1,5})?")
"""A room id (``!opaque:server``), which a cron target names: not an alias (``#room:server``)."""
EVENT_ID = re.compile(r"\$[A-Za-z0-9._=/+-]{1,200}(?::[A-Za-z0-9.-]{1,230}(?::\d{1,5})?)?")
"""An event id (``$opaque`` in today's rooms, ``$opaque:server`` in old ones): a thread's root."""

UNENCRYPTED_ONLY = "unencrypted rooms only (install matrix-nio[e2e] for encrypted rooms)"


def user_id(value: str) -> str:
    """``value`` if it is a Matrix user id."""
    if not isinstance(value, str) or not USER_ID.fullmatch(value):
        raise ValueError(f"'{str(value)[:80]}' is not a Matrix user id such as @alice:example.org")
    return value


def encryption_available() -> bool:
    """Whether matrix-nio's end-to-end encryption can run here (its ``e2e`` extra installed)."""
    modules = ("nio", "vodozemac", "peewee", "cachetools", "atomicwrites")
    return all(importlib.util.find_spec(module) is not None for module in modules)


class MatrixSettings(Section):
    """The Matrix adapter (``pip install 'vigil[matrix]'``)."""

    enabled: bool = setting(False, description="serve Matrix (rooms, direct messages and threads)")
    homeserver: str | None = setting(
        None, max_length=2048, description="the homeserver's client URL, such as https://matrix.example.org"
    )
    user_id: str | None = setting(None, max_length=255, description="the agent's own Matrix id, such as @vigil:example.org")
    allow: list[str] = setting(default_factory=list, max_length=10_000, description="Matrix user ids allowed to talk to the agent")
    token_env: str = setting("MATRIX_ACCESS_TOKEN", max_length=128, description="environment variable holding the access token")
    encryption: bool = setting(True, description="answer in encrypted rooms too (needs matrix-nio[e2e])")

    _env = check(env_name, "token_env")
    _allow = check(lambda value: [user_id(item) for item in value], "allow")
    _user = check(lambda value: None if value is None else user_id(value), "user_id")
    _url = check(http_url, "homeserver")


def _checks(settings: Any) -> list[Check]:
    return unset(settings, "matrix", {
        "homeserver": ("homeserver", "", "https://matrix.example.org"),
        "user_id": ("user", ": the agent's own Matrix id", "@vigil:example.org"),
    })


def _warnings(settings: Any) -> list[Check]:
    if settings.matrix.encryption and not encryption_available():
        return [("matrix encryption", UNENCRYPTED_ONLY, "pip install 'matrix-nio[e2e]'")]
    return []


MATRIX = sectioned(
    "matrix",
    "Matrix",
    sdk="nio",
    checks=_checks,
    warnings=_warnings,
    target=TargetForm(
        usage="matrix:<room id>[:<thread event id>]",
        short="matrix:<room>",
        chat=ROOM_ID,
        chat_needed="a Matrix room id such as !abc123:example.org",
        thread=EVENT_ID,
        thread_shape="a Matrix thread is its first event's id such as $Ab12Cd34",
    ),
    capabilities=Capabilities(single_receiver=True, edits=True, buttons=True, files=True, pairing=True,
                              max_message_chars=12_000),
)
