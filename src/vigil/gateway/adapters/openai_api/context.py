"""What the agent is shown of a request besides the new message.

A client's own system message (``system``/``developer`` messages, ``instructions``) does not
replace the conversation's stored prompt — that prompt is replayed byte for byte so that the
provider's prompt cache holds. It is put after the message as context of that turn, and only
when it is new to the conversation (the first request, or when the client changed it; once
more after a gateway restart). Likewise a history the API never answered (an edited chat, one
started elsewhere) starts a new conversation that is shown the earlier messages once.

A slash command (``/heartbeat every 10m …``) is passed on alone, so that it runs as a command.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

from vigil.gateway.adapters.openai_api.parsing import ClientTurn, Message
from vigil.runtime.slash import CommandRegistry

MAX_CONTEXT = 100_000
"""Characters of context shown with one message; an earlier history past this keeps its end."""


def system_hash(turn: ClientTurn) -> str | None:
    """What identifies the client's system text (``None``: it sent none)."""
    if not turn.system.strip():
        return None
    return hashlib.sha256(turn.system.encode("utf-8")).hexdigest()


def is_command(turn: ClientTurn) -> bool:
    return CommandRegistry.is_command(turn.text)


def turn_text(turn: ClientTurn, *, show_system: bool, show_history: bool) -> str:
    """The text stored and answered as the user's message of this turn: the message first (it
    leads in the web chat), then what the client sent with it."""
    if is_command(turn):
        return turn.text.strip()
    blocks = [turn.text]
    if show_history and turn.prior:
        blocks.append("[Earlier messages of this chat in the client app, before the message above, which you "
                      "did not see]\n" + _transcript(turn.prior) + "\n[End of the earlier messages]")
    if show_system and turn.system.strip():
        blocks.append("[Context the client app sent with the message above (its system message); it does not "
                      "replace your instructions]\n" + _bounded(turn.system.strip())
                      + "\n[End of the client's context]")
    return "\n\n".join(blocks)


def title_of(text: str) -> str:
    """A conversation's title from its first message, as vigil makes it (one line, 60 characters)."""
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:59] + "…"


def _transcript(messages: Sequence[Message]) -> str:
    lines = [f"{m.role}: {m.text.strip()}" for m in messages if m.text.strip()]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line) + 1
        if size > MAX_CONTEXT:
            kept.append(f"(… {len(lines) - len(kept)} earlier message(s) left out)")
            break
        kept.append(line)
    return "\n".join(reversed(kept))


def _bounded(text: str) -> str:
    if len(text) <= MAX_CONTEXT:
        return text
    return text[:MAX_CONTEXT] + f"\n(… {len(text) - MAX_CONTEXT} more characters left out)"
