"""Inputs a conversation answers the moment they arrive instead of queueing them behind the
running turn: ``/steer TEXT`` while a turn runs (:mod:`vigil.runtime.steering`), ``/queue`` and
``/background PROMPT`` (:mod:`vigil.runtime.background`).

``/queue`` lists the inputs waiting behind the running one, numbered in the order they will be
handled; ``/queue drop N`` and ``/queue clear`` withdraw waiting inputs. A withdrawn input is never
silently lost: its sender's future resolves as withdrawn (the gateway records its inbox entry so,
and the reply names what was withdrawn).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Protocol

from vigil.runtime.background import background_prompt
from vigil.runtime.conversation_events import Outcome
from vigil.runtime.slash import CommandReply
from vigil.runtime.steering import Steer, SteeringBox, steer_text

if TYPE_CHECKING:
    from vigil.runtime.background import BackgroundTasks

USAGE = "Usage: /queue (what waits), /queue drop N (withdraw message N), /queue clear (withdraw all)"


class Waiting(Protocol):
    """A queued input: its text, the meta its front end gave it and its sender's future."""

    text: str
    meta: dict[str, Any] | None
    future: asyncio.Future[Outcome]


def queue_words(text: str) -> list[str] | None:
    """The words after ``/queue`` (``[]`` for a bare one); ``None`` for any other line."""
    words = text.strip().split()
    return words[1:] if words and words[0].lower() == "/queue" else None


class Immediate:
    """See the module docstring. ``queue`` is the conversation's queue of waiting inputs,
    ``running()`` whether a turn runs now, ``is_command(text)`` whether a line is a command."""

    def __init__(self, queue: "deque[Any]", running: Callable[[], bool], is_command: Callable[[str], bool]) -> None:
        self.queue = queue
        self.running = running
        self.is_command = is_command
        self.steering = SteeringBox()
        self.background: BackgroundTasks | None = None
        """Takes ``/background`` lines (set by :class:`~vigil.runtime.background.BackgroundTasks`)."""

    def handle(self, text: str, future: asyncio.Future[Outcome], meta: dict[str, Any] | None) -> bool:
        """Answer ``text`` now if it is one of these inputs (``future`` resolved or kept for
        the running turn); ``False``: it goes to the queue as usual."""
        guidance = steer_text(text)
        if guidance and self.running():
            self.steering.offer(Steer(guidance, future, meta))
            return True
        prompt = background_prompt(text)
        if prompt is not None and self.background is not None:
            future.set_result(Outcome("command", reply=self.background.start(prompt, turn_running=self.running())))
            return True
        words = queue_words(text)
        if words is None:
            return False
        future.set_result(Outcome("command", reply=self._queue(words)))
        return True

    def waiting(self) -> list[Waiting]:
        """The inputs waiting behind the running one, in the order they will be handled (what
        ``/queue`` lists, numbered from 1)."""
        return list(self.queue)

    def withdraw_one(self, item: Waiting) -> CommandReply | None:
        """Withdraw ``item``, one of :meth:`waiting`, as ``/queue drop N`` does (a front end's
        remove button); ``None`` when it no longer waits (its turn began, or it went)."""
        if not any(queued is item for queued in self.queue):
            return None
        return self.withdraw([item])

    @staticmethod
    def plain(text: str) -> str:
        """What a line is as a message: ``/steer TEXT`` with nothing running is ``TEXT``."""
        return steer_text(text) or text

    def _queue(self, words: list[str]) -> CommandReply:
        waiting = list(self.queue)
        if not words:
            if not waiting:
                return CommandReply("Nothing waits." + (" (An answer is being written.)" if self.running() else ""))
            lines = [f"{n}. {_short(item.text)}" for n, item in enumerate(waiting, 1)]
            return CommandReply("Waiting, in order:\n" + "\n".join(lines) + "\n/queue drop N withdraws one.")
        if words == ["clear"]:
            return self.withdraw(waiting)
        if len(words) == 2 and words[0] == "drop" and words[1].isdigit():
            number = int(words[1])
            if not 1 <= number <= len(waiting):
                return CommandReply(f"There is no message {number} waiting ({len(waiting)} wait).", is_error=True)
            return self.withdraw([waiting[number - 1]])
        return CommandReply(USAGE, is_error=True)

    def withdraw(self, items: list[Waiting]) -> CommandReply:
        """Withdraw ``items`` (waiting in the queue now) as ``/queue drop`` does; the reply says which."""
        if not items:
            return CommandReply("Nothing waits: nothing to withdraw.")
        for item in items:
            self.queue.remove(item)
            if not item.future.done():
                kind = "command" if self.is_command(item.text) else "turn"
                item.future.set_result(Outcome(kind, cancelled=True, withdrawn=True))
        shown = "; ".join(f"“{_short(item.text, 40)}”" for item in items)
        return CommandReply(f"Withdrew {len(items)} waiting message{'s' if len(items) != 1 else ''}: {shown}")


def _short(text: str, width: int = 70) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
