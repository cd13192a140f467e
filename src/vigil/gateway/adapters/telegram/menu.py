"""The bot's command menu (``setMyCommands``): the gateway's slash commands, in the names
Telegram accepts (lower-case letters, digits and ``_``, at most 32)."""

from __future__ import annotations

import re

_NAME = re.compile(r"^[a-z0-9_]{1,32}$")
MAX_COMMANDS = 100


def bot_commands() -> list[tuple[str, str]]:
    """``(name, description)`` of every slash command a gateway conversation knows, aliases
    (``hb``) included, in the registry's order."""
    from vigil.gateway.commands import QUIT_WORDS
    from vigil.runtime.commands import build_registry

    registry = build_registry()
    found: list[tuple[str, str]] = []
    for command in registry.commands():
        for name in (command.name, *command.aliases):
            if _NAME.match(name) and name not in QUIT_WORDS:  # nothing to leave in a chat app
                found.append((name, (command.summary or name).strip()[:256] or name))
    if not any(name == "status" for name, _ in found):  # a gateway-only command
        found.append(("status", "what this conversation is doing: session, queue, heartbeat"))
    return found[:MAX_COMMANDS]
