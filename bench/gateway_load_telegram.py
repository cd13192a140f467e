"""The Telegram side of ``gateway_load.py``: users writing to the bot through the fake Bot API,
and what reached them.

The fake (:class:`FakeTelegramServer`) runs in the bench's process, in its own thread, like the
fake model. Each bench user has a private chat with the bot (chat id = user id). A message is
*available to the bot* once :meth:`FakeTelegramServer.message` returned (the next
``getUpdates`` hands it out); its answer has *reached the fake* when a ``sendMessage`` or
``editMessageText`` carrying the whole answer text was served in that chat. The fake's call log
is watched by wrapping its ``record`` hook, so no polling is needed.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from vigil.testing.telegram_api.server import FakeTelegramServer

ANSWER = "ok"
"""What the fake model answers to every message (its default reply)."""
FIRST_USER = 700_000_001
ANSWER_METHODS = frozenset({"sendmessage", "editmessagetext"})


@dataclass
class Watch:
    """Answers as they reach the fake: a count per chat, and waiters woken on the bench's loop."""

    loop: asyncio.AbstractEventLoop
    answers: dict[int, int] = field(default_factory=dict)
    waiters: dict[int, asyncio.Event] = field(default_factory=dict)

    def seen(self, chat: int, at: float) -> None:  # on the bench's loop
        self.answers[chat] = self.answers.get(chat, 0) + 1
        event = self.waiters.get(chat)
        if event is not None:
            event.set()

    async def wait(self, chat: int, count: int, timeout: float) -> bool:
        """Whether ``chat`` has ``count`` answers within ``timeout`` seconds."""
        event = self.waiters.setdefault(chat, asyncio.Event())
        deadline = time.monotonic() + timeout
        while self.answers.get(chat, 0) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            event.clear()
            try:
                await asyncio.wait_for(event.wait(), left)
            except asyncio.TimeoutError:
                return self.answers.get(chat, 0) >= count
        return True


def watch(fake: FakeTelegramServer, loop: asyncio.AbstractEventLoop) -> Watch:
    """Start counting ``fake``'s answers for code running on ``loop``."""
    seen = Watch(loop)
    state = fake.state
    record = state.record

    def recording(method: str, params: dict[str, Any], status: int) -> None:
        record(method, params, status)
        if status == 200 and method.lower() in ANSWER_METHODS and str(params.get("text")) == ANSWER:
            try:
                chat = int(params.get("chat_id"))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                return
            loop.call_soon_threadsafe(seen.seen, chat, time.perf_counter())

    state.record = recording  # type: ignore[method-assign]
    return seen


@dataclass
class Side:
    """One phase's figures for the Telegram users."""

    latencies: list[float] = field(default_factory=list)
    sent: dict[int, int] = field(default_factory=dict)
    """Messages each user wrote."""
    timeouts: int = 0
    ended: float = 0.0


def users(count: int) -> list[int]:
    return [FIRST_USER + n for n in range(count)]


async def conversation(fake: FakeTelegramServer, seen: Watch, user: int, messages: int, side: Side,
                       counter: list[int], timeout: float) -> None:
    """``user`` writes ``messages`` messages, each once the previous one is answered (a
    message not answered within ``timeout`` seconds is counted and the next one written)."""
    for n in range(messages):
        fake.message(user, user, f"message {n} from telegram user {user}")
        available = time.perf_counter()
        side.sent[user] = side.sent.get(user, 0) + 1
        counter[0] += 1
        if await seen.wait(user, side.sent[user], timeout):
            side.latencies.append(time.perf_counter() - available)
        else:
            side.timeouts += 1
    side.ended = max(side.ended, time.perf_counter())


def delivered(fake: FakeTelegramServer, side: Side) -> dict[str, int]:
    """What the users see: each chat's bot messages showing the answer against the messages
    its user wrote (lost = too few, duplicated = too many)."""
    lost = duplicated = 0
    for user, wrote in side.sent.items():
        shown = sum(1 for text in fake.texts(user) if text == ANSWER)
        lost += max(0, wrote - shown)
        duplicated += max(0, shown - wrote)
    return {"written": sum(side.sent.values()), "lost": lost, "duplicated": duplicated,
            "other": sum(1 for m in fake.sent() if m.text != ANSWER)}


def all_delivered(fake: FakeTelegramServer, side: Side) -> bool:
    counts = delivered(fake, side)
    return counts["lost"] == 0


def config(fake: FakeTelegramServer, allow: list[int]) -> str:
    """The ``telegram`` section of the gateway's config.yaml."""
    listed = ", ".join(f"'{user}'" for user in allow)
    return f"telegram:\n  enabled: true\n  api_url: {fake.api_url}\n  allow: [{listed}]\n"
