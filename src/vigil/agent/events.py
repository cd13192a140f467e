"""What a running turn reports to whoever shows it (REPL, web chat, gateway)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable, Union

from vigil.usage import Usage


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer as it streams in."""

    text: str


@dataclass(frozen=True, slots=True)
class AssistantStep:
    """A model response was received and stored (text and/or tool calls)."""

    content: str | None
    tool_call_count: int
    usage: Usage


@dataclass(frozen=True, slots=True)
class ToolStarted:
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolFinished:
    name: str
    content: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class PromptRebuilt:
    """The session's stored prompt was (re)built this turn, and why."""

    reason: str


@dataclass(frozen=True, slots=True)
class Compressed:
    """The conversation was compressed: it continues in ``child_id``, which replaces
    ``parent_id`` (now ended with reason ``compression``) from here on."""

    parent_id: str
    child_id: str
    reason: str = "auto"
    """``auto`` (the context budget) or ``manual`` (``/compress``)."""


@dataclass(frozen=True, slots=True)
class Steered:
    """Guidance sent during the turn (``/steer``) was stored as a user message after the tool
    results, so the model's next call reads it."""

    text: str


TurnEvent = Union[TextDelta, AssistantStep, ToolStarted, ToolFinished, PromptRebuilt, Compressed, Steered]
EventCallback = Callable[[TurnEvent], Awaitable[None] | None]
