"""Input checks every backend runs before writing: bad input is refused, never stored."""

from __future__ import annotations

from typing import Any, Iterable

from vigil.store.records import NewMessage

ROLES = frozenset({"user", "assistant", "tool", "summary", "note"})
"""The message roles a session may hold (see ``NewMessage``). A ``note`` is shown to people
(e.g. "the heartbeat ended") and never sent to the model."""


def check_message(message: NewMessage) -> None:
    """Refuse an unknown role, negative or non-integer token counts, or a non-dict ``meta``."""
    if message.role not in ROLES:
        raise ValueError(f"unknown message role {message.role!r}; expected one of {sorted(ROLES)}")
    counts = message.usage.as_dict().values()
    if not all(isinstance(n, int) and n >= 0 for n in counts):
        raise ValueError(f"token counts must be non-negative integers, got {message.usage}")
    check_dict(message.meta, "meta")


def check_dict(value: Any, name: str) -> dict[str, Any]:
    """``value`` if it is a dict (a JSON object column); ``TypeError`` otherwise."""
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict, not {type(value).__name__}")
    return value


def check_names(names: Iterable[str]) -> list[str]:
    """Tool names as a list; a bare string (an iterable of letters) or an empty name is refused."""
    if isinstance(names, str):
        raise TypeError("tool_names must be an iterable of names, not a single string")
    listed = list(names)
    if not all(isinstance(n, str) and n for n in listed):
        raise ValueError(f"tool names must be non-empty strings: {listed!r}")
    return listed


def check_prompt(prompt: str | None) -> None:
    """A stored system prompt is a non-empty string (an empty one counts as damaged)."""
    if prompt is not None and (not isinstance(prompt, str) or not prompt):
        raise ValueError("a system prompt must be a non-empty string")


def check_key(key: str) -> str:
    """``key`` if it is a usable ``state_meta`` key (a non-empty string)."""
    if not isinstance(key, str) or not key:
        raise ValueError("a state_meta key must be a non-empty string")
    return key


def check_limit(limit: int) -> int:
    """``limit`` if it is not negative."""
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    return limit
