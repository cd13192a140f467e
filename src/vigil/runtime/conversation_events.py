"""What a live conversation reports to the front end showing it (REPL, web chat, gateway).

Besides these, every :mod:`vigil.agent.events` event of a running turn is passed on as is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable, Union

from vigil.agent.events import TurnEvent
from vigil.agent.turn import TurnResult
from vigil.runtime.slash import CommandReply

USER = "user"
HEARTBEAT = "heartbeat"


@dataclass(frozen=True, slots=True)
class TurnBegan:
    """A turn starts. ``kind`` is ``user`` or ``heartbeat``; a heartbeat turn carries the
    header line to show above its answer."""

    kind: str
    text: str
    session_id: str | None
    header: str | None = None


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """A turn ended: answered (``result``), failed (``error``) or was interrupted."""

    kind: str
    result: TurnResult | None = None
    error: BaseException | None = None
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one submitted input: a turn's result or a command's reply."""

    kind: str
    """``turn`` or ``command``."""
    result: TurnResult | None = None
    reply: CommandReply | None = None
    error: BaseException | None = None
    cancelled: bool = False
    withdrawn: bool = False
    """Withdrawn while it waited (``/queue drop``): never handled."""


@dataclass(frozen=True, slots=True)
class BackgroundNote:
    """A ``/background`` task ended (:mod:`vigil.runtime.background`): its note, to show at
    once like an answer. ``session_id`` is the conversation's session the note belongs to (it
    is stored there at the next moment no turn runs), ``child_id`` the task's own session;
    ``status`` is ``answered``, ``failed`` or ``interrupted``."""

    session_id: str
    child_id: str
    prompt: str
    status: str
    text: str


ConversationEvent = Union[TurnBegan, TurnEnded, BackgroundNote, TurnEvent]
Listener = Callable[[ConversationEvent], Awaitable[None] | None]
