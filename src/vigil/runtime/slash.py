"""Slash commands: one registry shared by the REPL, the web chat and every gateway platform.

A command handler knows nothing about terminals or platforms: it acts on a
:class:`ConversationControl` and returns text (or an action) for the front end to show.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

from vigil.store import SessionStore

if TYPE_CHECKING:
    from vigil.agent.compression import CompressionResult
    from vigil.config.settings import Settings
    from vigil.profiles import Profile


_SURROGATE = re.compile("[\ud800-\udfff]")


class ConversationControl(Protocol):
    """What a slash command may do to the conversation it was typed in."""

    store: SessionStore

    @property
    def session_id(self) -> str | None:
        """The current session, or ``None`` before the first message."""
        ...

    @property
    def profile(self) -> "Profile":
        """The profile the conversation belongs to (its home, skills, output folders)."""
        ...

    @property
    def settings(self) -> "Settings":
        """The profile's configuration (time zone, tools, model defaults)."""
        ...

    async def new_conversation(self) -> str:
        """End the current conversation (reason ``new``) and start a fresh one; return its id."""
        ...

    async def resume(self, ref: str) -> str:
        """Switch to another stored conversation (id or prefix); return the session id used."""
        ...

    def model_name(self) -> str:
        """The model this conversation talks to."""
        ...

    async def compress(self) -> "CompressionResult":
        """Summarise older turns now; the conversation continues in a new session."""
        ...

    def set_model(self, name: str) -> None:
        """Use another model from the next request on (no prompt refresh needed)."""
        ...

    def tool_names(self) -> list[str]:
        """The tools pinned for the current session (or that a new one would get)."""
        ...

    def skills(self) -> list[tuple[str, str]]:
        """(name, description) of the profile's skills."""
        ...


@dataclass(frozen=True, slots=True)
class CommandReply:
    """What to show after a command; ``action`` asks the front end to do something (``quit``)."""

    text: str = ""
    action: str | None = None
    is_error: bool = False


Handler = Callable[[ConversationControl, str], Awaitable[CommandReply] | CommandReply]


@dataclass(frozen=True, slots=True)
class SlashCommand:
    name: str
    summary: str
    handler: Handler
    usage: str = ""
    aliases: tuple[str, ...] = ()


@dataclass
class CommandRegistry:
    """Slash commands by name and alias."""

    _commands: dict[str, SlashCommand] = field(default_factory=dict)
    _by_alias: dict[str, SlashCommand] = field(default_factory=dict)

    def register(self, command: SlashCommand) -> None:
        for name in (command.name, *command.aliases):
            if name in self._by_alias:
                raise ValueError(f"slash command /{name} is registered twice")
            self._by_alias[name] = command
        self._commands[command.name] = command

    def commands(self) -> list[SlashCommand]:
        """Every command once, in registration order."""
        return list(self._commands.values())

    def names(self) -> list[str]:
        """Every name and alias, with its slash, for completion."""
        return sorted(f"/{name}" for name in self._by_alias)

    def find(self, name: str) -> SlashCommand | None:
        return self._by_alias.get(name.lower())

    @staticmethod
    def is_command(text: str) -> bool:
        """Whether a typed line is a slash command (``/word ...``, not a path like ``/etc/x``)."""
        stripped = text.strip()
        if not stripped.startswith("/") or len(stripped) < 2:
            return False
        word = stripped[1:].split(maxsplit=1)[0]
        return "/" not in word

    async def dispatch(self, control: ConversationControl, text: str) -> CommandReply:
        """Run the command typed in ``text``; unknown commands get a helpful error."""
        stripped = text.strip()[1:]
        if _SURROGATE.search(stripped):
            # Lone surrogates (a terminal's undecodable bytes, or JSON "\udcff") cannot be stored.
            return CommandReply(
                "The command is not valid UTF-8 text (it holds an undecodable character); nothing was changed.",
                is_error=True,
            )
        name, _, args = stripped.partition(" ")
        command = self.find(name)
        if command is None:
            return CommandReply(f"Unknown command /{name}. Type /help for the list.", is_error=True)
        result = command.handler(control, args.strip())
        if inspect.isawaitable(result):
            result = await result
        return result

    def help_text(self) -> str:
        lines = ["Commands:"]
        for command in self.commands():
            label = f"/{command.name}" + (f" {command.usage}" if command.usage else "")
            alias = f" (alias {', '.join('/' + a for a in command.aliases)})" if command.aliases else ""
            lines.append(f"  {label:<28} {command.summary}{alias}")
        return "\n".join(lines)
