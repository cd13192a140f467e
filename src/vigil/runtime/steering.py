"""``/steer TEXT``: guidance for the turn that runs now, read by its next model call.

While a turn runs, ``/steer`` does not wait in the queue behind it (that would defeat it): the
text waits in a :class:`SteeringBox` until the agent finishes the tool calls in flight, is stored
then as a user message marked ``steer`` (appended after the tool results, so the cached prefix
stays as it was) and read by the model's next call. Its sender is answered once it is stored.
Guidance the turn did not reach (its answer came without another model call, or it was stopped)
is not lost: it goes to the front of the queue as an ordinary message, answered next, in the
order it was sent. With no turn running, ``/steer TEXT`` is simply a message.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from vigil.runtime.conversation_events import Outcome
from vigil.runtime.slash import CommandReply

NAME = "steer"
USAGE = "Usage: /steer TEXT — guidance the running answer reads after its current step"


def steer_text(text: str) -> str | None:
    """The guidance of a ``/steer TEXT`` line (``""`` when it has none); ``None`` for any other line."""
    word, _, rest = text.strip().partition(" ")
    return rest.strip() if word.lower() == f"/{NAME}" else None


@dataclass(eq=False)
class Steer:
    """Guidance waiting for the running turn, and its sender's future."""

    text: str
    future: asyncio.Future[Outcome] = field(repr=False)
    meta: dict[str, Any] | None = None


class SteeringBox:
    """The guidance sent during one conversation's running turn (see the module docstring)."""

    def __init__(self) -> None:
        self._waiting: deque[Steer] = deque()
        self._taken: deque[Steer] = deque()

    def offer(self, steer: Steer) -> None:
        """Keep ``steer`` for the running turn's next step."""
        self._waiting.append(steer)

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        """For the agent, after a round of tool calls: the guidance sent meanwhile, in order,
        each with the meta its front end gave it (the gateway's inbox entry: a restart then
        finds it stored and does not store it again)."""
        taken = list(self._waiting)
        self._taken.extend(taken)
        self._waiting.clear()
        return [(steer.text, dict(steer.meta or {})) for steer in taken]

    def stored(self, text: str) -> None:
        """The agent stored ``text``: its sender is answered."""
        if self._taken and self._taken[0].text == text:
            steer = self._taken.popleft()
            if not steer.future.done():
                steer.future.set_result(Outcome("command", reply=CommandReply(f"↪ Steered: “{_short(text)}”")))

    def leftover(self) -> list[Steer]:
        """After the turn: the guidance it did not store, oldest first (emptied)."""
        left = [*self._taken, *self._waiting]
        self._taken.clear()
        self._waiting.clear()
        return left


def _short(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
